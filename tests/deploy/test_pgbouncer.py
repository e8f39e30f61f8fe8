"""Arbiter behind Debian's PgBouncer (issue 28 item 3): a real PgBouncer on a free loopback port in
front of the test database, in transaction pooling with ONE server connection, so that every
client's transactions interleave on it and anything that outlives a transaction shows.

Through it: the hot path's queries, ``select_for_update`` inside transactions from several threads at once,
``.iterator()`` (server-side cursors off), the database session engine, and ``migrate`` on an
empty database. In statement pooling, ``migrate`` and gunicorn refuse to start with one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from config.db.pooler import STATEMENT_MODE
from deploy.cluster.cluster import Cluster, ensure_debian_packages, free_port

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def pgbouncer(tmp_path: Path, database: str, mode: str) -> Cluster:
    ensure_debian_packages("pgbouncer")
    run = tmp_path / f"pgbouncer-{mode}"
    (run / "logs").mkdir(parents=True)
    for path in (tmp_path, run, run / "logs"):
        path.chmod(0o755)  # PgBouncer runs as postgres when started by root
    c = Cluster(run_dir=run, database=database, ports={"pgbouncer": free_port()}, s3=False)
    config = c.write_pgbouncer_config(pool_mode=mode)
    config.write_text(config.read_text().replace("default_pool_size = 20", "default_pool_size = 1")
                      .replace("reserve_pool_size = 5", "reserve_pool_size = 0"))
    c.start_pgbouncer()
    return c


@pytest.fixture
def pooled(transactional_db: None, tmp_path: Path) -> Iterator[Cluster]:
    c = pgbouncer(tmp_path, connection.settings_dict["NAME"], "transaction")
    yield c
    c.stop("pgbouncer")


def run(code: str, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    environment.update(DATABASE_URL=url, DATABASE_POOLER="pgbouncer", DJANGO_SETTINGS_MODULE="config.settings.test", **env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=120)


THREADS = """
import django, threading
django.setup()
from django.db import connection, transaction
from django.contrib.sessions.backends.base import SessionBase
from annotation.models import Study
from annotation.services.answers import _counts_query
from django.contrib.sessions.backends.db import SessionStore
assert connection.settings_dict["DISABLE_SERVER_SIDE_CURSORS"] is True
errors, done = [], []
store = SessionStore(); store["k"] = "v"; store.save()
def work(n):
    try:
        for i in range(40):
            with transaction.atomic():
                study = Study.objects.select_for_update().get(slug="pooled")
                Study.objects.filter(pk=study.pk).update(title=f"t{n}-{i}")
            assert list(_counts_query(1 + i)) is not None
            assert sum(1 for _ in Study.objects.all().iterator(chunk_size=1)) == 1
            assert SessionStore(store.session_key)["k"] == "v"
        done.append(n)
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        connection.close()
threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
print("errors", errors, "done", sorted(done))
"""


def test_hot_path_queries_locks_cursors_and_sessions_through_transaction_pooling(pooled: Cluster) -> None:
    from annotation.models import Study

    Study.objects.create(slug="pooled", title="pooled")
    done = run(THREADS, pooled.pooled_url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "errors [] done [0, 1, 2, 3]" in done.stdout, done.stdout + done.stderr[-2000:]
    assert Study.objects.get(slug="pooled").title.startswith("t")


def test_migrations_run_through_transaction_pooling(transactional_db: None, tmp_path: Path) -> None:
    name = f"{connection.settings_dict['NAME']}_migrate"[:63]
    admin = psycopg.connect(host="127.0.0.1", port=connection.settings_dict["PORT"] or 5432, user="postgres",
                            dbname="postgres", autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
    admin.execute(f'CREATE DATABASE "{name}"')
    c = pgbouncer(tmp_path, name, "transaction")
    try:
        done = run("import sys; from django.core.management import execute_from_command_line as m; "
                   "m(['manage.py', 'migrate', '--noinput', '-v', '0'])", c.pooled_url)
        assert done.returncode == 0, done.stderr[-2000:]
        with psycopg.connect(c.pooled_url) as conn:
            applied = conn.execute("SELECT count(*) FROM django_migrations WHERE app = 'annotation'").fetchone()
        assert applied is not None and applied[0] == len(list((ROOT / "annotation" / "migrations").glob("0*.py")))
    finally:
        c.stop("pgbouncer")
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_statement_pooling_is_refused_at_start_up_in_one_line(transactional_db: None, tmp_path: Path) -> None:
    c = pgbouncer(tmp_path, connection.settings_dict["NAME"], "statement")
    try:
        check = run("from django.core.management import execute_from_command_line as m; "
                    "m(['manage.py', 'check', '--database', 'default'])", c.pooled_url)
        assert check.returncode != 0
        assert STATEMENT_MODE in check.stderr
        environment = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
        environment.update(DATABASE_URL=c.pooled_url, DATABASE_POOLER="pgbouncer", DJANGO_SETTINGS_MODULE="config.settings.test")
        served = subprocess.run([str(Path(sys.executable).with_name("gunicorn")), "-b", f"127.0.0.1:{free_port()}"],
                                cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)
        assert served.returncode != 0
        assert served.stderr.strip().splitlines()[-1] == f"error: {STATEMENT_MODE}"
    finally:
        c.stop("pgbouncer")
