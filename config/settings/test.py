"""Test settings: the embedded default unless DATABASE_URL / CELERY_BROKER_URL point at real services."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]

# Tests run tasks in-process unless they start a real worker (tests/conftest.py
# ``celery_worker_process`` switches this off for its test and for the worker it starts).
CELERY_TASK_ALWAYS_EAGER = env_bool("ARBITER_CELERY_EAGER", True)
# The judges page's background run needs a server database for its thread (tests/judges/test_views.py).
ARBITER_JUDGES_IN_BACKGROUND = False

# Importing config.wsgi in a test (the image pass, schemathesis) checks nothing against the database;
# the tests of the checks start their nodes with the production settings.
ARBITER_STARTUP_CHECKS = env_bool("ARBITER_STARTUP_CHECKS", False)

# Each test process keeps its own cache (login throttling counters must not leak between tests).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
