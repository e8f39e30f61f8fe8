"""Production: a secret key from the environment (never defaulted), HTTPS-only cookies, HSTS."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import ARBITER_LOGIN_COUNTERS, ARBITER_SERVER_TIMING, CACHES, env_bool, env_int

if not os.environ.get("DJANGO_SECRET_KEY"):
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set for config.settings.production")
SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
# Login throttle counters in a per-process cache would give each web process its own limit.
_SHARED_CACHES = ("django.core.cache.backends.redis.RedisCache", "django.core.cache.backends.memcached.PyMemcacheCache")
if ARBITER_LOGIN_COUNTERS == "cache" and CACHES["default"]["BACKEND"] not in _SHARED_CACHES:
    raise ImproperlyConfigured(
        "ARBITER_LOGIN_COUNTERS=cache needs a cache shared by every web process (CACHE_URL=redis://...), "
        f"not {CACHES['default']['BACKEND']}; leave ARBITER_LOGIN_COUNTERS unset to count in the database"
    )
if ARBITER_SERVER_TIMING:
    raise ImproperlyConfigured(
        "ARBITER_SERVER_TIMING=1 is for a load benchmark's own server: it would send raters a query count "
        "that tells a hidden repeat's answer from another's; read arbiter_rater_request_queries in /metrics"
    )
DEBUG = False

SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
STORAGES = {
    **STORAGES,  # noqa: F405  (media: local or S3, config/settings/base.py)
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
