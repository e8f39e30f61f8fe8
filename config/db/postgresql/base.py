"""Django's PostgreSQL backend with a health check that costs no round trip while nothing is wrong.

``CONN_HEALTH_CHECKS`` makes Django test a persistent connection before the first query of each
request; its PostgreSQL backend sends ``SELECT 1`` for that. On the rater hot path that is one
round trip in ten, and under load every round trip waits for the scheduler twice (the backend
process, then this thread).

An idle connection has nothing to read: PostgreSQL only speaks when asked, except when it ends the
session (a restart, ``pg_terminate_backend``, ``idle_session_timeout``), when it sends its error
and closes the socket. So the check first polls the socket without waiting: nothing to read, the
connection is usable; anything to read (that farewell, the close itself, or an unexpected
notification), or a poll that fails, Django's own ``SELECT 1`` decides. The same idea as go-sql-driver/mysql's
liveness check before reusing a connection. ``tests/security/test_database_restart.py`` restarts
a real PostgreSQL under a real gunicorn to hold it to that.
"""

from __future__ import annotations

import select

from django.core import checks
from django.db.backends.postgresql import base

from config.db.pooler import check_pooling

# Behind a pooler (DATABASE_POOLER): its mode is checked with the database checks (migrate).
checks.register(check_pooling, checks.Tags.database)


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed:
            return False
        try:
            poller = select.poll()  # not select(): no limit on the descriptor's number
            poller.register(connection.fileno(), select.POLLIN)  # a close or error is reported too
            quiet = not poller.poll(0)
        except (OSError, ValueError):
            quiet = False
        return quiet or bool(super().is_usable())
