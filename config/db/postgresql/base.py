"""Django's PostgreSQL backend, unchanged, under the project's name so that the pooler's checks
(``config/db/pooler.py``) run with the database checks (``manage.py migrate``, ``check``).

Django's own ``CONN_HEALTH_CHECKS`` test a persistent connection with ``SELECT 1`` before the
first query of each request. A socket-poll check that saved that round trip stood here; a
same-sitting A/B showed no win of 10 % in the closed loop and it was removed (issue 47,
docs/benchmarks.md). ``tests/security/test_database_restart.py`` restarts a real PostgreSQL under a
real gunicorn: the requests after the restart succeed.
"""

from __future__ import annotations

from django.core import checks
from django.db.backends.postgresql import base

from config.db.pooler import check_pooling

# Behind a pooler (DATABASE_POOLER): its mode is checked with the database checks (migrate).
checks.register(check_pooling, checks.Tags.database)


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL backend as it is."""
