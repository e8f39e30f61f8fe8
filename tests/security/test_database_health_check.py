"""The PostgreSQL health check (config/db/postgresql/base.py): no round trip for a healthy idle
connection, Django's ``SELECT 1`` as soon as the server has ended the session.

What the backend last ran is read from ``pg_stat_activity`` on a second connection, so "no round
trip" is the server's own account, not the client's.
"""

from __future__ import annotations

import os
import resource
import select
import time

import psycopg
import pytest
from django.db import connection

pytestmark = pytest.mark.postgres


def _observer() -> psycopg.Connection:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("prepare_threshold", None)
    return psycopg.connect(**params, autocommit=True)


def _last_statement(observer: psycopg.Connection, pid: int) -> str | None:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row[0] if row else None


def test_a_healthy_idle_connection_is_usable_without_a_statement(transactional_db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'health-check-marker'")
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _observer() as observer:
        assert "health-check-marker" not in (_last_statement(observer, pid) or "")  # the pid query came after
        before = _last_statement(observer, pid)
        assert before == "SELECT pg_backend_pid()"
        assert connection.is_usable()
        assert _last_statement(observer, pid) == before  # nothing was sent


def test_a_terminated_session_is_unusable_and_the_next_query_reconnects(transactional_db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with _observer() as observer:
        assert observer.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0] is True
    fd = connection.connection.fileno()
    deadline = time.monotonic() + 10
    while not select.select([fd], [], [], 0.1)[0]:  # the server's farewell (or the close) arrives
        assert time.monotonic() < deadline, "the terminated session's socket never became readable"
    assert connection.is_usable() is False

    connection.health_check_done = False  # as at the start of a request
    connection.health_check_enabled = True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid  # a new session, no error


def test_a_connection_with_a_descriptor_above_1024_is_checked_without_a_statement(transactional_db: None) -> None:
    """``select()`` cannot watch a descriptor of 1024 or more; the check must not then call every
    connection unusable (a reconnect per request in a process with many files open)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft > 1100, "this machine allows too few open files for the test"
    spare = []
    try:
        while not spare or spare[-1] < 1030:
            spare.append(os.open(os.devnull, os.O_RDONLY))
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        assert connection.connection.fileno() >= 1024
        with _observer() as observer:
            assert connection.is_usable()
            assert _last_statement(observer, pid) == "SELECT pg_backend_pid()"
    finally:
        for fd in spare:
            os.close(fd)
        connection.close()
