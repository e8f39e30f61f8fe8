"""Shared fixtures: personas, real-service switches and a real Celery worker.

Real services are opt-in through the environment, exactly as in production:
- ``DATABASE_URL`` pointing at PostgreSQL runs the whole suite there (tests marked ``postgres``
  need it and are skipped on SQLite);
- ``CELERY_BROKER_URL`` makes tests marked ``broker`` start a real worker (``celery_worker_process``).
With ``ARBITER_REQUIRE_SERVICES=1`` (set by .ci/run for its real-service pass) a test that would be
skipped for want of PostgreSQL or a broker fails instead, so CI cannot pass by skipping.

Tests marked ``serial`` share something server-wide (the Celery worker on the broker's one queue,
a PostgreSQL restart); .ci/run runs them one at a time, beside its SQLite step (which uses neither).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# Hypothesis's "input generation is slow" check measures the machine, not the code: on a loaded
# machine (CI's two pytest workers, a benchmark next to them) it fails tests whose inputs are fine.
hypothesis_settings.register_profile("arbiter", suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("arbiter")

ROOT = Path(__file__).resolve().parent.parent
REQUIRE_SERVICES = os.environ.get("ARBITER_REQUIRE_SERVICES") == "1"


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def _missing(reason: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"real-service pass: {reason}")
    pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A real Celery worker takes the broker's one queue and answers every ping on it: a test that
    starts one must be marked ``serial``, or .ci/run would run it beside another worker's test."""
    unmarked = [
        item.nodeid
        for item in items
        if "celery_worker_process" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("serial")
    ]
    if unmarked:
        raise pytest.UsageError("uses celery_worker_process but is not marked serial: " + ", ".join(unmarked))
    contradicted = [
        item.nodeid
        for item in items
        if item.get_closest_marker("same_on_any_database") and _asks_for_the_database(item)
    ]
    if contradicted:
        raise pytest.UsageError("marked same_on_any_database but asks for the run's database: " + ", ".join(contradicted))
    if os.environ.get("ARBITER_DATABASE_TESTS_ONLY") == "1":
        # .ci/run's PostgreSQL pass: a test that reaches no database, neither itself nor through a
        # process it starts, ran in the SQLite pass and would only run the same code again here.
        kept, dropped = [], []
        for item in items:
            (kept if _reaches_a_database(item) else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadgroup`` (.ci/run): a module sharing a fixture runs on one worker (tests/xdist_modules.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.xdist_modules import ModuleFixtureScheduling

    return ModuleFixtureScheduling(config, log)


# A test reaches the database when it asks for pytest-django's access (a marker or one of these
# fixtures, directly or through its own fixtures) or when its module starts processes, which may
# open DATABASE_URL themselves (servers, manage.py, workers).
_DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}
)
_STARTS_PROCESSES = ("subprocess", "Popen", "manage.py", "gunicorn", "DATABASE_URL", "celery", "multiprocessing")
_module_starts_processes: dict[str, bool] = {}


def _asks_for_the_database(item: pytest.Item) -> bool:
    """Whether the test itself asks for the run's database (or its services) by marker or fixture."""
    if any(item.get_closest_marker(name) for name in ("django_db", "postgres", "broker")):
        return True
    return bool(_DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def _reaches_a_database(item: pytest.Item) -> bool:
    if _asks_for_the_database(item):
        return True
    # A test whose processes run on a SQLite file of their own (or on none) runs the same here.
    if item.get_closest_marker("same_on_any_database"):
        return False
    info = getattr(item, "_fixtureinfo", None)
    for name, definitions in info.name2fixturedefs.items() if info is not None else ():
        if name.startswith("_") or name == "django_db_blocker":
            continue  # pytest-django's own autouse fixtures ask for the blocker on every test
        if any("django_db_blocker" in d.argnames for d in definitions):
            return True
    path = str(item.path)
    if path not in _module_starts_processes:
        text = Path(path).read_text(encoding="utf-8")
        _module_starts_processes[path] = any(word in text for word in _STARTS_PROCESSES)
    return _module_starts_processes[path]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("postgres") and not _on_postgres():
        _missing("needs PostgreSQL (set DATABASE_URL=postgres://...)")
    if item.get_closest_marker("broker") and not settings.CELERY_BROKER_URL:
        _missing("needs a real Celery broker (set CELERY_BROKER_URL)")


@pytest.fixture(autouse=True)
def _media_root(tmp_path: Path, settings: object) -> Iterator[Path]:
    """Every test gets its own media folder, so file assertions see only what the test wrote."""
    media = tmp_path / "media"
    media.mkdir()
    settings.MEDIA_ROOT = media  # type: ignore[attr-defined]
    settings.ARBITER_BUNDLE_ARCHIVE = tmp_path / "bundles"  # type: ignore[attr-defined]  # new_study's kept bundles
    settings.ARBITER_NEW_STUDY_RENDERS = tmp_path / "new-study-renders"  # type: ignore[attr-defined]
    yield media


@pytest.fixture
def make_user(db: None):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    from annotation.roles import ensure_groups

    def make(username: str, *, role: str | None = None, password: str = "pw-arbiter-123", **extra: object):
        from django.contrib.auth.models import Group

        ensure_groups()
        user = get_user_model().objects.create_user(username=username, password=password, **extra)
        if role:
            user.groups.add(Group.objects.get(name=role))
        return user

    return make


@pytest.fixture
def researcher(make_user):  # type: ignore[no-untyped-def]
    return make_user("rita-researcher", role="researcher")


@pytest.fixture
def other_researcher(make_user):  # type: ignore[no-untyped-def]
    return make_user("oscar-other-researcher", role="researcher")


@pytest.fixture
def admin_user(make_user):  # type: ignore[no-untyped-def]
    return make_user("ada-admin", role="admin", is_staff=True)


@pytest.fixture
def rater_user(make_user):  # type: ignore[no-untyped-def]
    return make_user("rae-rater", role="rater")


@pytest.fixture
def examples_dir() -> Path:
    """The docs/protocol.md "Files" example files (../shared/examples), with a copy in fixtures/ as
    fallback."""
    for candidate in (ROOT.parent / "shared" / "examples", ROOT / "fixtures" / "examples"):
        if (candidate / "bundle" / "study.json").exists():
            return candidate
    pytest.fail("protocol examples not found (../shared/examples or fixtures/examples)")


@pytest.fixture
def celery_worker_process(transactional_db: None) -> Iterator[subprocess.Popen[bytes]]:
    """A real Celery worker on the configured broker, using the test database.

    Tests that use it must be transactional (the worker is another process and only sees
    committed rows) and marked ``serial`` (it purges and consumes the shared ``celery`` queue).
    The worker is killed at the end; ``worker.send_signal(SIGKILL)`` in a test simulates a crash.
    """
    if not settings.CELERY_BROKER_URL:
        _missing("needs a real Celery broker (set CELERY_BROKER_URL)")
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    if db["ENGINE"].endswith("postgresql"):
        user = db.get("USER") or ""
        host = db.get("HOST") or "127.0.0.1"
        port = db.get("PORT") or 5432
        env["DATABASE_URL"] = f"postgres://{user}@{host}:{port}/{db['NAME']}"
    else:
        _missing("a real worker needs a database shared between processes (PostgreSQL)")
    env["MEDIA_ROOT"] = str(settings.MEDIA_ROOT)
    env["ARBITER_CELERY_EAGER"] = "0"
    from config.celery_app import app

    app.conf.task_always_eager = False

    with app.connection_for_write() as conn:  # start from an empty queue
        conn.default_channel.queue_purge("celery")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=prefork", "--concurrency=2",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", "celery", "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # limit=1: back as soon as the worker answers, not after the whole timeout.
        replies = app.control.ping(timeout=0.5, limit=1)
        if replies:
            break
        if worker.poll() is not None:
            pytest.fail("the Celery worker exited during start-up")
    else:
        os.killpg(worker.pid, signal.SIGKILL)
        pytest.fail("the Celery worker did not answer a ping within 30 s")
    try:
        yield worker
    finally:
        app.conf.task_always_eager = True
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """A real S3-compatible server (moto's server mode) on a free loopback port, for the session."""
    from tests.s3_server import start_s3_server

    server = start_s3_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server, settings) -> str:  # type: ignore[no-untyped-def]
    """A new bucket on the test S3 server, configured as django-storages' settings (``media_s3``);
    the media storage itself stays local unless the test also takes ``s3_media``."""
    from tests.s3_server import CREDENTIALS, REGION

    bucket = s3_server.new_bucket()
    settings.AWS_STORAGE_BUCKET_NAME = bucket
    settings.AWS_S3_ENDPOINT_URL = s3_server.endpoint
    settings.AWS_S3_REGION_NAME = REGION
    settings.AWS_ACCESS_KEY_ID = CREDENTIALS["aws_access_key_id"]
    settings.AWS_SECRET_ACCESS_KEY = CREDENTIALS["aws_secret_access_key"]
    settings.ARBITER_S3_TIMEOUT = 1.0  # a paused server is "unreachable" within a second
    settings.ARBITER_S3_ATTEMPTS = 1
    settings.STORAGES = {**settings.STORAGES}  # new storage instances with the settings above
    return bucket  # type: ignore[no-any-return]


@pytest.fixture
def s3_media(s3_bucket, settings) -> str:  # type: ignore[no-untyped-def]
    """``ARBITER_MEDIA_STORAGE=s3``: every stored image lives in the test bucket."""
    settings.ARBITER_MEDIA_STORAGE = "s3"
    settings.STORAGES = {**settings.STORAGES, "default": settings.STORAGES["media_s3"]}
    return s3_bucket  # type: ignore[no-any-return]
