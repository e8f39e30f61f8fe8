"""Configuration from the environment (README "Configuration"; SECURITY.md row 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_"))}
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


@pytest.mark.same_on_any_database
def test_production_refuses_to_start_without_a_secret_key() -> None:
    result = manage("check", DJANGO_SETTINGS_MODULE="config.settings.production")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr


@pytest.mark.same_on_any_database
def test_production_passes_the_deploy_check(tmp_path: Path) -> None:
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="x7!" + "k" * 60 + "Qz#9-production-secret-for-the-test",
        DJANGO_ALLOWED_HOSTS="arbiter.example.org",
        DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3",
    )
    assert result.returncode == 0, result.stderr + result.stdout


@pytest.mark.same_on_any_database
def test_malformed_boolean_environment_fails_loudly() -> None:
    result = manage("check", DJANGO_SETTINGS_MODULE="config.settings.local", DJANGO_DEBUG="maybe")
    assert result.returncode != 0
    assert "DJANGO_DEBUG must be a boolean" in result.stderr


@pytest.mark.same_on_any_database
def test_database_url_and_broker_come_from_the_environment(tmp_path: Path) -> None:
    code = (
        "from django.conf import settings as s;"
        "print(s.DATABASES['default']['ENGINE'], s.DATABASES['default']['NAME'], s.CELERY_TASK_ALWAYS_EAGER, s.MEDIA_ROOT)"
    )
    embedded = manage("shell", "--no-imports", "-c", code, DJANGO_SETTINGS_MODULE="config.settings.local")
    assert embedded.returncode == 0, embedded.stderr
    engine, name, eager, _media = embedded.stdout.split()
    assert engine.endswith("sqlite3") and name.endswith("var/arbiter.sqlite3") and eager == "True"

    configured = manage(
        "shell",
        "--no-imports",
        "-c",
        code,
        DJANGO_SETTINGS_MODULE="config.settings.local",
        DATABASE_URL="postgres://someone@db.internal:5433/arbiter",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/3",
        MEDIA_ROOT=str(tmp_path / "m"),
    )
    assert configured.returncode == 0, configured.stderr
    engine, name, eager, media = configured.stdout.split()
    assert engine.endswith("postgresql") and name == "arbiter" and eager == "False"
    assert media == str(tmp_path / "m")


@pytest.mark.django_db
def test_role_groups_exist_after_migrate() -> None:
    from django.contrib.auth.models import Group

    assert set(Group.objects.values_list("name", flat=True)) >= {"admin", "researcher", "rater"}


@pytest.mark.postgres
def test_a_postgresql_connection_pool_serves_queries_when_asked_for(db: None) -> None:
    from django.db import connection

    s = connection.settings_dict  # the test database, which exists while this test runs
    url = f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    script = (
        "from django.conf import settings; from django.db import connection;"
        "c = connection.cursor(); c.execute('SELECT 1');"
        "print(settings.DATABASES['default']['CONN_MAX_AGE'], settings.DATABASES['default']['OPTIONS']['pool'],"
        " connection.pool is not None, c.fetchone()[0])"
    )
    result = manage("shell", "--no-imports", "-c", script, DATABASE_URL=url, DATABASE_POOL_MAX_SIZE="3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "0" and "'max_size': 3" in result.stdout
    assert result.stdout.strip().endswith("True 1")


@pytest.mark.same_on_any_database
def test_production_refuses_login_counters_in_a_per_process_cache(tmp_path: Path) -> None:
    base = {
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": "x7!" + "k" * 60 + "Qz#9-production-secret-for-the-test",
        "DJANGO_ALLOWED_HOSTS": "arbiter.example.org",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "CACHE_URL": "",
        "CELERY_BROKER_URL": "",
    }
    refused = manage("check", **base, ARBITER_LOGIN_COUNTERS="cache")
    assert refused.returncode != 0
    assert "ARBITER_LOGIN_COUNTERS=cache needs a cache shared by every web process" in refused.stderr
    assert "LocMemCache" in refused.stderr.strip().splitlines()[-1]
    # Unset, the counters go to the database and production starts.
    shown = manage("shell", "--no-imports", "-c", "from django.conf import settings as s; print(s.ARBITER_LOGIN_COUNTERS)", **base)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "database"


@pytest.mark.same_on_any_database
def test_the_rater_alias_is_refused_behind_pgbouncer_and_absent_on_sqlite(tmp_path: Path) -> None:
    refused = manage("check", DJANGO_SETTINGS_MODULE="config.settings.local", DATABASE_POOLER="pgbouncer",
                     DATABASE_URL="postgres://u:p@127.0.0.1:6432/arbiter", ARBITER_RATER_PREPARED="1")
    assert refused.returncode != 0
    assert "ARBITER_RATER_PREPARED: prepared statements do not survive pgbouncer" in refused.stderr
    script = "from django.conf import settings as s; print(sorted(s.DATABASES), s.ARBITER_RATER_DATABASE)"
    sqlite = manage("shell", "--no-imports", "-c", script, DJANGO_SETTINGS_MODULE="config.settings.local",
                    DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3", ARBITER_RATER_PREPARED="1")
    assert sqlite.returncode == 0, sqlite.stderr
    assert sqlite.stdout.split() == ["['default']", "default"]


@pytest.mark.postgres
def test_the_rater_alias_prepares_its_statements_on_postgresql(db: None) -> None:
    from django.db import connection

    s = connection.settings_dict  # the test database, which exists while this test runs
    url = f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"
    script = (
        "from django.db import connections; from annotation.models import Study;"
        "from annotation.rater.db import rater_transaction\n"
        "for _ in range(3):\n"
        "    with rater_transaction(): list(Study.objects.filter(pk=1))\n"
        "c = connections['rater'].cursor(); c.execute('SELECT count(*) FROM pg_prepared_statements');"
        "d = connections['default'].cursor(); d.execute('SELECT count(*) FROM pg_prepared_statements');"
        "print(c.fetchone()[0], d.fetchone()[0])"
    )
    result = manage("shell", "--no-imports", "-c", script, DJANGO_SETTINGS_MODULE="config.settings.local", DATABASE_URL=url)
    assert result.returncode == 0, result.stderr
    on_rater, on_default = (int(n) for n in result.stdout.split())
    assert on_rater >= 1 and on_default == 0
