"""SECURITY.md row 13 (second half): requests after a PostgreSQL restart succeed.

A real gunicorn worker (one process, one thread, so every request reuses the same persistent
connection: ``CONN_MAX_AGE=60``) serves the API from the test database. After a first request has
opened that connection, PostgreSQL is restarted; once it accepts connections again, the very first
request must succeed: ``CONN_HEALTH_CHECKS`` notices the dead connection and opens a new one
instead of answering 500.

Run on PostgreSQL only (``DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_hardening``),
and restarts the server once: other sessions on the same server see their connections dropped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection
from rest_framework.authtoken.models import Token

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _database_url() -> str:
    db = settings.DATABASES["default"]
    auth = db.get("USER") or ""
    if db.get("PASSWORD"):
        auth += f":{db['PASSWORD']}"
    return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def _wait_ready(db: dict[str, Any], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = subprocess.run(
            ["pg_isready", "-h", str(db.get("HOST") or "127.0.0.1"), "-p", str(db.get("PORT") or 5432)],
            capture_output=True,
        )
        if ready.returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail("PostgreSQL did not accept connections within 60 s of the restart")


def _restart_postgres() -> None:
    versions = sorted(os.listdir("/etc/postgresql")) if os.path.isdir("/etc/postgresql") else []
    if not versions or shutil.which("pg_ctlcluster") is None:
        pytest.fail("cannot restart PostgreSQL here (no pg_ctlcluster / /etc/postgresql)")
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "restart"],
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.fixture
def server(transactional_db: None, tmp_path: Path) -> Iterator[str]:
    """gunicorn on a free port, one worker, one thread, on the test database."""
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": _database_url(),
        "DATABASE_CONN_MAX_AGE": "60",
        "MEDIA_ROOT": str(tmp_path / "media"),
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "1",
            "--timeout",
            "60",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                httpx.get(f"{base}/accounts/login/", timeout=2)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("gunicorn did not start")
                time.sleep(0.3)
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_requests_after_a_postgresql_restart_succeed(server: str, researcher: Any) -> None:
    from tests.annotation.factories import make_study

    make_study("restart", researchers=[researcher])
    headers = {"Authorization": f"Token {Token.objects.create(user=researcher).key}"}
    with httpx.Client(base_url=server, headers=headers, timeout=30) as client:
        first = client.get("/api/studies/")
        assert first.status_code == 200
        assert [s["slug"] for s in first.json()["results"]] == ["restart"]
        # The worker now holds an open connection (CONN_MAX_AGE=60): kill it under its feet.
        _restart_postgres()
        connection.close()  # this test process's own connection died too
        _wait_ready(settings.DATABASES["default"])
        after = [client.get("/api/studies/restart/") for _ in range(5)]
    assert [r.status_code for r in after] == [200] * 5, after[0].text[:300]
    assert after[0].json()["slug"] == "restart"
