"""Settings shared by every environment.

Configuration comes from the environment (see README "Configuration"); helpers below fail
loudly on malformed values instead of guessing.
"""

from __future__ import annotations

import copy
import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {value!r}") from exc


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


SECRET_KEY = env_str("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = False
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "demo",  # before staticfiles: its runserver (TCP_NODELAY, demo/management/commands/runserver.py) is the one found
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "annotation",
    "objective",
    "judges",
    "calibration",
    "kind_reports",
    "ranking",
]

MIDDLEWARE = [
    # A request cut off from the database answers 503 + Retry-After, not 500 (config/unavailable.py).
    "config.unavailable.DatabaseUnavailableMiddleware",
    # /livez and /healthz, before the host check, the HTTPS redirect and authentication (config/health.py).
    "config.health.HealthMiddleware",
    # Rater-path latency histograms, the database pool gauge, JSON request logs (config/metrics.py).
    "config.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "annotation.middleware.ServerTimingMiddleware",
    "annotation.middleware.UploadSizeMiddleware",
    "annotation.middleware.NulFieldMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'arbiter.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend under the project's name: the pooler's checks run with the database checks
    # (config/db/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "config.db.postgresql"
# PostgreSQL connection pool (Django's psycopg pool): DATABASE_POOL_MAX_SIZE connections per process,
# 0 = persistent per-thread connections (CONN_MAX_AGE) instead. A pooled connection is checked as
# it is handed out, so a restarted server costs no failed request.
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 0)
if DATABASES["default"]["ENGINE"] == "config.db.postgresql" and DATABASE_POOL_MAX_SIZE > 0:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, DATABASE_POOL_MAX_SIZE), "max_size": DATABASE_POOL_MAX_SIZE, "timeout": 30,
    }
# A transaction-pooling PgBouncer between the nodes and PostgreSQL (DATABASE_POOLER=pgbouncer;
# docs/deploy.md, "PgBouncer"): each transaction may run on another server connection, so nothing
# may outlive a transaction on the server. Django's server-side cursors (``.iterator()``) are
# turned off, and so is the rater path's prepared alias (ARBITER_RATER_PREPARED, below): Debian
# 12's PgBouncer is 1.18, and only PgBouncer >= 1.21 with max_prepared_statements > 0 keeps
# protocol-level prepared statements across its server connections.
# Migrations go straight to PostgreSQL with their own DATABASE_URL (deploy/cluster/cluster.py, compose.yaml).
DATABASE_POOLER = env_str("DATABASE_POOLER")
if DATABASE_POOLER not in ("", "pgbouncer"):
    raise ImproperlyConfigured(f"DATABASE_POOLER: {DATABASE_POOLER!r} is not a known pooler (leave it empty or say pgbouncer)")
if DATABASE_POOLER and DATABASES["default"]["ENGINE"] == "config.db.postgresql":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# The rater's path on a second alias of the same PostgreSQL database with prepared statements
# (psycopg 3's server-side binding, Django's PostgreSQL notes; annotation/rater/db.py): its joins
# cost PostgreSQL more to plan than to run. Only that path: server-side binding caps a statement
# at 65,535 parameters, which bulk imports may pass. On by default for PostgreSQL without a
# pooler; PgBouncer 1.18 in transaction pooling keeps no prepared statements, so it is off there
# and may not be turned on (docs/deploy.md, "PgBouncer"). SQLite: nothing changes.
_postgresql = DATABASES["default"]["ENGINE"] == "config.db.postgresql"
ARBITER_RATER_PREPARED = env_bool("ARBITER_RATER_PREPARED", _postgresql and not DATABASE_POOLER) and _postgresql
if ARBITER_RATER_PREPARED and DATABASE_POOLER:
    raise ImproperlyConfigured(
        f"ARBITER_RATER_PREPARED: prepared statements do not survive {DATABASE_POOLER}'s transaction pooling; leave it unset"
    )
# psycopg prepares a statement on its Nth run on a connection (its default is 5).
ARBITER_RATER_PREPARE_THRESHOLD = env_int("ARBITER_RATER_PREPARE_THRESHOLD", 2)
ARBITER_RATER_DATABASE = "rater" if ARBITER_RATER_PREPARED else "default"
if ARBITER_RATER_PREPARED:
    DATABASES["rater"] = copy.deepcopy(DATABASES["default"])
    DATABASES["rater"].setdefault("OPTIONS", {}).update(
        {"server_side_binding": True, "prepare_threshold": ARBITER_RATER_PREPARE_THRESHOLD}
    )
    DATABASES["rater"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["annotation.rater.db.RaterRouter"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent readers while a writer works (the dev server, in-process tasks).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor", BASE_DIR / "node_modules" / "htmx.org" / "dist")]
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
# Media is never served by URL: images reach raters only through opaque per-trial views.
MEDIA_URL = "/media-not-served/"
# Behind nginx: an internal location aliasing MEDIA_ROOT, or proxying to the bucket under S3 (e.g.
# "/protected-media/"); the image view then answers with X-Accel-Redirect and nginx sends the file.
# Empty: the application sends it.
ARBITER_IMAGE_ACCEL_REDIRECT = env_str("ARBITER_IMAGE_ACCEL_REDIRECT")
# Server-Timing (queries, database and render time) on rater responses: for a load benchmark's own
# server only (benchmarks/bench_raters.py). A rater's browser could read it, and a query count tells
# a hidden repeat's answer from another's (issue 46), so it is off, and the production settings
# refuse it; the same figures are always in /metrics (annotation.middleware.ServerTimingMiddleware).
ARBITER_SERVER_TIMING = env_bool("ARBITER_SERVER_TIMING", False)

# Where stored images live (annotation/media.py): "local" (MEDIA_ROOT) or "s3" (an S3-compatible bucket
# through django-storages, configured by its own AWS_* settings below). Keys are content hashes either way.
ARBITER_MEDIA_STORAGE = env_str("ARBITER_MEDIA_STORAGE", "local").strip().lower() or "local"
if ARBITER_MEDIA_STORAGE not in ("local", "s3"):
    raise ImproperlyConfigured(f"ARBITER_MEDIA_STORAGE must be 'local' or 's3', got {ARBITER_MEDIA_STORAGE!r}")
AWS_STORAGE_BUCKET_NAME = env_str("AWS_STORAGE_BUCKET_NAME") or None
AWS_S3_ENDPOINT_URL = env_str("AWS_S3_ENDPOINT_URL") or None
AWS_S3_REGION_NAME = env_str("AWS_S3_REGION_NAME") or None
# Credentials: django-storages reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the environment itself.
AWS_S3_FILE_OVERWRITE = True  # a key is its content's hash: the same key is the same bytes
AWS_QUERYSTRING_AUTH = False  # no presigned URL is ever made (annotation.media_s3.PrivateS3Storage.url refuses)
AWS_DEFAULT_ACL = None  # the bucket's own policy (private)
# An unreachable bucket answers within these seconds (image requests then get a 503, annotation/media.py).
ARBITER_S3_TIMEOUT = float(env_str("ARBITER_S3_TIMEOUT", "5"))
ARBITER_S3_ATTEMPTS = env_int("ARBITER_S3_ATTEMPTS", 2)
# A rater's image read from the bucket (annotation/media.py): one attempt within this many seconds
# to connect and per read; at most ARBITER_IMAGE_READS of them at once per web process (default:
# half its threads, at least one); a request finding them taken waits at most
# ARBITER_IMAGE_READ_WAIT seconds for one (none once a read has failed), else it is a 503. A
# bucket that hangs then costs one thread under a second at a time, not every thread
# ARBITER_S3_TIMEOUT x attempts.
ARBITER_IMAGE_READ_TIMEOUT = float(env_str("ARBITER_IMAGE_READ_TIMEOUT", "0.75"))
ARBITER_IMAGE_READS = env_int("ARBITER_IMAGE_READS", max(1, env_int("GUNICORN_THREADS", 2) // 2))
ARBITER_IMAGE_READ_WAIT = float(env_str("ARBITER_IMAGE_READ_WAIT", "0.75"))
if ARBITER_MEDIA_STORAGE == "s3" and not AWS_STORAGE_BUCKET_NAME:
    raise ImproperlyConfigured("ARBITER_MEDIA_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME")
_local_media: dict[str, object] = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
_s3_media: dict[str, object] = {"BACKEND": "annotation.media_s3.PrivateS3Storage"}
STORAGES: dict[str, dict[str, object]] = {
    "default": _s3_media if ARBITER_MEDIA_STORAGE == "s3" else _local_media,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    # Both ends of `manage.py copy_media` (the bucket one needs AWS_STORAGE_BUCKET_NAME).
    "media_local": _local_media,
    "media_s3": _s3_media,
}

# A shared cache (login throttling, rate limits) when Redis is configured; per-process otherwise.
_cache_url = env_str("CACHE_URL") or (env_str("CELERY_BROKER_URL") if env_str("CELERY_BROKER_URL").startswith("redis") else "")
CACHES: dict[str, dict[str, object]] = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
    if _cache_url
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
# Where the login throttle counts (annotation/services/login_counters.py): every web process and
# node must see the same counters. "cache": the shared cache above; "database": a table (the
# default without a shared cache: LocMemCache is per process; SECURITY.md row 24).
ARBITER_LOGIN_COUNTERS = env_str("ARBITER_LOGIN_COUNTERS") or ("cache" if _cache_url else "database")
if ARBITER_LOGIN_COUNTERS not in ("cache", "database"):
    raise ImproperlyConfigured(f"ARBITER_LOGIN_COUNTERS must be 'cache' or 'database', not {ARBITER_LOGIN_COUNTERS!r}")
ARBITER_LOGIN_MAX_FAILURES = env_int("ARBITER_LOGIN_MAX_FAILURES", 5)
ARBITER_LOGIN_WINDOW_SECONDS = env_int("ARBITER_LOGIN_WINDOW_SECONDS", 15 * 60)
# Attempts on one account from all addresses together (SECURITY.md row 18).
ARBITER_LOGIN_MAX_FAILURES_PER_ACCOUNT = env_int("ARBITER_LOGIN_MAX_FAILURES_PER_ACCOUNT", 20)
# The client address behind a reverse proxy (annotation/client_address.py): the proxies whose
# X-Forwarded-For is believed (addresses or networks), or the number of proxy hops. Neither set:
# REMOTE_ADDR.
ARBITER_TRUSTED_PROXIES = env_list("ARBITER_TRUSTED_PROXIES")
ARBITER_PROXY_HOPS = env_int("ARBITER_PROXY_HOPS", 0)
for _proxy in ARBITER_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        hint = " (a number of proxies in front goes in ARBITER_PROXY_HOPS)" if _proxy.strip().isdigit() else ""
        raise ImproperlyConfigured(f"ARBITER_TRUSTED_PROXIES: {_proxy!r} is not an address or a network{hint}") from None

# Origin of participant links. Unset: web pages use the serving origin (the request's), commands
# their --origin or http://127.0.0.1:8000.
ARBITER_PUBLIC_URL = env_str("ARBITER_PUBLIC_URL", "")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Uploads (docs/protocol.md "Files" bundles): caps checked before anything is written.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ARBITER_MAX_FORM_BYTES", 5 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
DATA_UPLOAD_MAX_NUMBER_FILES = 10
ARBITER_MAX_UPLOAD_BYTES = env_int("ARBITER_MAX_UPLOAD_BYTES", 2 * 1024 * 1024 * 1024)
ARBITER_BUNDLE_MAX_ENTRIES = env_int("ARBITER_BUNDLE_MAX_ENTRIES", 50_000)
ARBITER_BUNDLE_MAX_UNCOMPRESSED = env_int("ARBITER_BUNDLE_MAX_UNCOMPRESSED", 8 * 1024 * 1024 * 1024)
# Where new_study keeps the bundle it wrote and imported, one folder per study (docs/new-study.md).
ARBITER_BUNDLE_ARCHIVE = Path(env_str("ARBITER_BUNDLE_ARCHIVE", str(VAR_DIR / "bundles")))
ARBITER_IMAGE_MAX_BYTES = env_int("ARBITER_IMAGE_MAX_BYTES", 50 * 1024 * 1024)
ARBITER_IMAGE_MAX_PIXELS = env_int("ARBITER_IMAGE_MAX_PIXELS", 60_000_000)
ARBITER_IMAGE_MAX_EDGE = env_int("ARBITER_IMAGE_MAX_EDGE", 20_000)

# Judges (docs/protocol.md "Judges and calibration"): endpoints on link-local / metadata addresses are refused
# unless listed here.
ARBITER_JUDGE_HOST_ALLOWLIST = env_list("ARBITER_JUDGE_HOST_ALLOWLIST")
ARBITER_JUDGE_BACKOFF_BASE = float(env_str("ARBITER_JUDGE_BACKOFF_BASE", "1.0"))
ARBITER_JUDGE_BACKOFF_CAP = float(env_str("ARBITER_JUDGE_BACKOFF_CAP", "60"))
ARBITER_JUDGE_RETRY_AFTER_CAP = float(env_str("ARBITER_JUDGE_RETRY_AFTER_CAP", "300"))
# A judge reply larger than this (decoded bytes) is abandoned and stored invalid (judges/providers/transport.py).
ARBITER_JUDGE_MAX_REPLY_BYTES = env_int("ARBITER_JUDGE_MAX_REPLY_BYTES", 8 * 1024 * 1024)
# Without a broker, "Run judges" on the judges page runs the calls in a thread of the web process
# and answers at once, so the page shows them finishing (tests keep them on commit, synchronous).
ARBITER_JUDGES_IN_BACKGROUND = env_bool("ARBITER_JUDGES_IN_BACKGROUND", True)
# Likewise a plan or a leaderboard started from its page runs in a thread of the web process after
# the commit (annotation/task_queue.py), so the page answers at once and polls; 0 runs it inside the
# request, as Celery's eager mode would.
ARBITER_TASKS_IN_BACKGROUND = env_bool("ARBITER_TASKS_IN_BACKGROUND", True)
# Egress for judge calls, off by default: an HTTPS proxy URL and a CA bundle file (TLS-inspecting
# gateways). The base-URL allow-list check still runs before every request.
ARBITER_JUDGE_PROXY = env_str("ARBITER_JUDGE_PROXY")
ARBITER_JUDGE_CA_BUNDLE = env_str("ARBITER_JUDGE_CA_BUNDLE")
# How often Celery beat re-queues judge calls whose worker died (lease expired).
ARBITER_JUDGE_SWEEP_SECONDS = float(env_str("ARBITER_JUDGE_SWEEP_SECONDS", "60"))
# A worker making a study from an upload holds its run for this long, renewing it every third of
# it; a run whose worker died is taken over once it runs out (annotation.services.new_study_runs),
# and Celery beat's sweep re-queues such runs this often.
ARBITER_NEW_STUDY_LEASE_SECONDS = float(env_str("ARBITER_NEW_STUDY_LEASE_SECONDS", "60"))
# Uploads made into studies: how many runs of one researcher render at once (the others wait,
# queued); where a run keeps its renders (a dry run's, for the real run started from it); how long
# a dry run's upload and renders are kept for that real run.
ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER = env_int("ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER", 1)
ARBITER_NEW_STUDY_RENDERS = Path(env_str("ARBITER_NEW_STUDY_RENDERS", str(VAR_DIR / "new-study-renders")))
ARBITER_NEW_STUDY_KEEP_HOURS = float(env_str("ARBITER_NEW_STUDY_KEEP_HOURS", "24"))
# An adaptive study's serve-time pair weights are refitted once every this many served trials on
# average (annotation.services.serve_time).
ARBITER_SERVE_REFIT_VOTES = env_int("ARBITER_SERVE_REFIT_VOTES", 50)

# Security headers (SECURITY.md rows 2 and 3).
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", "blob:"],
    "connect-src": [CSP.SELF],
    "font-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
# Django's database sessions (the default engine, named here so a reader finds it).
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "annotation.api.errors.arbiter_exception_handler",
    # DRF's JSON parser recurses without bound (RecursionError → 500) and keeps NUL characters.
    "DEFAULT_PARSER_CLASSES": [
        "annotation.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
# Deepest JSON nesting an API body may have (SECURITY.md row 19).
ARBITER_JSON_MAX_DEPTH = 64
# Widest image shown to raters and judges (SECURITY.md row 16): a page's images are shown at its
# reference's width, at most this.
ARBITER_DISPLAY_MAX_WIDTH = env_int("ARBITER_DISPLAY_MAX_WIDTH", 4096)
SPECTACULAR_SETTINGS = {
    "TITLE": "Arbiter API",
    "DESCRIPTION": "Blinded human-preference studies, VLM judge calibration and Bradley–Terry leaderboards.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Celery: JSON only, time limits, late acks (docs/protocol.md "Judges and calibration" (a crashed worker loses
# no judge call)).
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or None
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 15 * 60)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
# The broker re-delivers an unacknowledged task only after this; it must exceed the time limit.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 5 * 60}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Task modules autodiscovery (``<app>.tasks``) does not find.
CELERY_IMPORTS = ("judges.batch_tasks",)
# Periodic tasks (run `celery -A config beat` next to the workers).
CELERY_BEAT_SCHEDULE = {
    "judges-sweep-leases": {"task": "judges.sweep_leases", "schedule": ARBITER_JUDGE_SWEEP_SECONDS},
    "judges-poll-batches": {"task": "judges.poll_batches", "schedule": ARBITER_JUDGE_SWEEP_SECONDS},
    "annotation-sweep-new-study-runs": {"task": "annotation.sweep_new_study_runs",
                                        "schedule": ARBITER_NEW_STUDY_LEASE_SECONDS},
}

# A web node's checks as it loads (config/wsgi.py): the bucket exists, SECRET_KEY agrees with the other nodes'.
ARBITER_STARTUP_CHECKS = env_bool("ARBITER_STARTUP_CHECKS", True)
# /metrics (config/metrics.py): staff, or clients in these addresses / networks (e.g. "10.0.0.0/8,127.0.0.1").
ARBITER_METRICS_ALLOW = env_list("ARBITER_METRICS_ALLOW")
try:
    ARBITER_METRICS_ALLOW_NETWORKS = [ipaddress.ip_network(n, strict=False) for n in ARBITER_METRICS_ALLOW]
except ValueError as _exc:
    raise ImproperlyConfigured(f"ARBITER_METRICS_ALLOW: {_exc}") from None
# "json": one JSON line per request (logger arbiter.request) with its X-Request-ID; "plain": none.
ARBITER_LOG_FORMAT = env_str("ARBITER_LOG_FORMAT", "plain").strip().lower() or "plain"
if ARBITER_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"ARBITER_LOG_FORMAT must be 'plain' or 'json', got {ARBITER_LOG_FORMAT!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "message": {"format": "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"},
                 "request_lines": {"class": "logging.StreamHandler", "formatter": "message"}},
    "loggers": {"arbiter.request": {"handlers": ["request_lines"], "level": "INFO", "propagate": False}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
}
