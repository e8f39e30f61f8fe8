"""Start-up check of a connection pooler between Arbiter and PostgreSQL (``DATABASE_POOLER``).

Behind PgBouncer, Arbiter needs transaction pooling: its writes are transactions of several
statements (``select_for_update`` then the write, docs/protocol.md "Planning the human study"'s slot claim),
and in statement pooling PgBouncer refuses any transaction block. Session pooling works but pools nothing
useful; transaction pooling is what docs/deploy.md sets up. The probe is one transaction of two
statements, so it needs no access to PgBouncer's admin console: statement pooling answers the
``BEGIN`` with "transaction blocks not allowed in statement pooling mode".

Run by ``manage.py migrate`` / ``check --database default`` (a database-tagged system check) and
by gunicorn's master before it forks (gunicorn.conf.py ``on_starting``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connections, transaction

STATEMENT_MODE = (
    "DATABASE_URL: PgBouncer is in statement pooling mode; Arbiter's transactions need pool_mode = transaction"
)


def pooling_problem(alias: str = "default") -> str | None:
    """A one-line error when the pooler in front of ``alias`` cannot serve Arbiter, else None."""
    if not getattr(settings, "DATABASE_POOLER", ""):
        return None
    connection = connections[alias]
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        if "statement pooling" in str(exc):
            return STATEMENT_MODE
        return f"DATABASE_URL: the database behind {settings.DATABASE_POOLER} is unreachable: {str(exc).strip().splitlines()[0]}"
    finally:
        connection.close()
    return None


def check_pooling(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not databases or "default" not in databases:
        return []
    problem = pooling_problem()
    return [checks.Error(problem, id="arbiter.E028")] if problem else []
