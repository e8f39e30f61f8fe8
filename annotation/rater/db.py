"""The database alias the rater's path runs on: PostgreSQL with prepared statements, when configured.

The trial and vote queries joined a dozen tables, and PostgreSQL spent far longer planning them
than running them (since decision 0079 they join nothing, and this alias has no A/B of its own
left). Prepared statements keep each connection's plans; psycopg 3 prepares a
statement once it has run ``prepare_threshold`` times, with server-side binding (Django's
PostgreSQL notes, ``OPTIONS``). Server-side binding caps a statement at 65,535 parameters, which
bulk imports may pass, so only the rater's path uses it: a second alias on the same database
(``ARBITER_RATER_DATABASE``, settings), to which ``RaterRouter`` sends the ORM's reads and writes
while a flow function's ``rater_transaction`` runs. Without that alias (SQLite, behind PgBouncer,
the tests) everything stays on ``default``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import transaction

_ROUTED: ContextVar[bool] = ContextVar("arbiter_rater_routed", default=False)


def rater_alias() -> str:
    """The alias the rater's path uses (``default`` unless the prepared-statement alias is configured)."""
    return str(getattr(settings, "ARBITER_RATER_DATABASE", "default") or "default")


@contextmanager
def rater_transaction() -> Iterator[None]:
    """One transaction on the rater's alias; the ORM's queries inside it go there too."""
    alias = rater_alias()
    token = _ROUTED.set(alias != "default")
    try:
        with transaction.atomic(using=alias):
            yield
    finally:
        _ROUTED.reset(token)


class RaterRouter:
    """Django database router: inside ``rater_transaction``, reads and writes go to the rater's alias."""

    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return rater_alias() if _ROUTED.get() else None

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return rater_alias() if _ROUTED.get() else None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # Both aliases are the same database: rows read through either may be related.
        aliases = {"default", rater_alias()}
        return True if {obj1._state.db, obj2._state.db} <= aliases else None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db != "default" and db == rater_alias() else None
