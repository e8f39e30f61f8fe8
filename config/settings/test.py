"""Test settings: the embedded default unless DATABASE_URL / CELERY_BROKER_URL point at real services."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import env_bool, env_str

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]

# Tests run tasks in-process unless they start a real worker (tests/conftest.py
# ``celery_worker_process`` switches this off for its test and for the worker it starts).
CELERY_TASK_ALWAYS_EAGER = env_bool("ARBITER_CELERY_EAGER", True)
# The judges page's background run needs a server database for its thread (tests/judges/test_views.py).
ARBITER_JUDGES_IN_BACKGROUND = False
# Likewise plans and leaderboards run on commit, in the test's thread (tests/ranking/test_report_pages_first_load.py
# runs them in a thread).
ARBITER_TASKS_IN_BACKGROUND = False

# Importing config.wsgi in a test (the image pass, schemathesis) checks nothing against the database;
# the tests of the checks start their nodes with the production settings.
ARBITER_STARTUP_CHECKS = env_bool("ARBITER_STARTUP_CHECKS", False)


# Each test process keeps its own cache unless CACHE_URL names one (a test's own gunicorn on Redis);
# the login throttle counts in the test database then (rolled back with each test), or in that cache.
if not env_str("CACHE_URL"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
ARBITER_LOGIN_COUNTERS = env_str("ARBITER_LOGIN_COUNTERS") or ("cache" if env_str("CACHE_URL") else "database")

# The rater's prepared-statement alias (annotation/rater/db.py) only when a run asks for it: a
# test's transaction is the default connection's, which a second connection would not see.
if not env_bool("ARBITER_RATER_PREPARED", False):
    DATABASES.pop("rater", None)  # noqa: F405
    ARBITER_RATER_PREPARED = False
    ARBITER_RATER_DATABASE = "default"
