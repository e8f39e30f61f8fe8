"""The login throttle's counters (annotation/views/auth.py; SECURITY.md "Login throttling", row 24).

Every web process of every node must see the same counts, or each process grants its own five
password checks (issue 32: three gunicorn processes with per-process ``LocMemCache`` counters
allowed fifteen). ``ARBITER_LOGIN_COUNTERS`` picks where they live:

- ``"cache"`` (the default when ``CACHE_URL``, or a Redis broker, gives a shared cache): the
  default cache, one atomic ``incr`` per attempt (Redis ``INCR``);
- ``"database"`` (the default otherwise): the ``LoginCounter`` table, one statement per attempt,
  ``INSERT … ON CONFLICT DO UPDATE … RETURNING``, which PostgreSQL and SQLite both run atomically,
  so concurrent attempts from any process get distinct counts. A counter whose window has ended
  starts again at one in the same statement; starting a window also deletes the ended ones.

The production settings refuse ``"cache"`` with a per-process cache backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress

from django.conf import settings
from django.core.cache import cache
from django.db import OperationalError, connection
from django.db.models import F

from annotation.models import LoginCounter


def _count_statement() -> str:
    q = connection.ops.quote_name
    table, key, attempts, expires = q(LoginCounter._meta.db_table), q("key"), q("attempts"), q("expires")
    return (
        f"INSERT INTO {table} ({key}, {attempts}, {expires}) VALUES (%s, 1, %s) "
        f"ON CONFLICT ({key}) DO UPDATE SET "
        f"{attempts} = CASE WHEN {table}.{expires} > %s THEN {table}.{attempts} + 1 ELSE 1 END, "
        f"{expires} = CASE WHEN {table}.{expires} > %s THEN {table}.{expires} ELSE excluded.{expires} END "
        f"RETURNING {attempts}"
    )


def _retrying[T](statement: Callable[[], T]) -> T:
    """Run one statement; on SQLite, again while another connection has its table locked."""
    for pause in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 0.0):
        try:
            return statement()
        except OperationalError as error:
            # SQLite's shared-cache in-memory database (the test database) answers a concurrent
            # writer "table is locked" at once, without the busy timeout a database file waits
            # with; PostgreSQL and SQLite files never get here.
            if connection.vendor != "sqlite" or "locked" not in str(error) or not pause:
                raise
            time.sleep(pause)
    raise AssertionError("unreachable")


def _add_in_database(key: str, now: float, window: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(_count_statement(), [key, now + window, now, now])
        (count,) = cursor.fetchone()
    return int(count)


def _in_database() -> bool:
    return str(getattr(settings, "ARBITER_LOGIN_COUNTERS", "database")) == "database"


def counter_add(key: str, window: int) -> int:
    """Add one to ``key`` (a new counter lasts ``window`` seconds) and return the new count, atomically."""
    if not _in_database():
        cache.add(key, 0, window)
        try:
            return int(cache.incr(key))
        except ValueError:  # expired between add and incr
            cache.set(key, 1, window)
            return 1
    now = time.time()
    count = _retrying(lambda: _add_in_database(key, now, window))
    if count == 1:  # a new window: the ended ones go
        _retrying(LoginCounter.objects.filter(expires__lte=now).delete)
    return count


def counter_delete(key: str) -> None:
    if not _in_database():
        cache.delete(key)
        return
    _retrying(LoginCounter.objects.filter(key=key).delete)


def counter_take_back(key: str) -> None:
    """Take one back from a live counter (a right password does not count against its account)."""
    if not _in_database():
        with suppress(ValueError):  # the window ended meanwhile
            cache.decr(key)
        return
    live = LoginCounter.objects.filter(key=key, expires__gt=time.time(), attempts__gt=0)
    _retrying(lambda: live.update(attempts=F("attempts") - 1))
