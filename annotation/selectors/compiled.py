"""Hot read queries compiled once per process: the ORM builds the SQL, later calls only bind values.

Compiling a joined ``values()`` query costs the ORM 0.2–0.6 ms of CPU, ten times what the database
takes to answer it (docs/benchmarks.md, "rater hot path"). ``compiled_rows`` builds the queryset
once with placeholder arguments, keeps its SQL and the positions of the placeholders among its
parameters, and from then on executes that SQL with the call's arguments. Only for ``values()``
or ``aggregate``-shaped queries of plain columns (numbers, text, booleans): rows come back as
dicts keyed by the query's column aliases, without the ORM's per-field conversion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection
from django.db.models import QuerySet

_PLACEHOLDER_INT = -7_301_000_000_000
_CACHE: dict[tuple[str, str, str], tuple[str, tuple[Any, ...], tuple[int, ...]]] = {}


def _placeholder(i: int, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError("compiled_rows binds int and str arguments only")
    return _PLACEHOLDER_INT - i if isinstance(value, int) else f"\x00arbiter-arg-{i}\x00"


def compiled_rows(name: str, build: Callable[..., QuerySet[Any]], *args: int | str) -> list[dict[str, Any]]:
    """The rows of ``build(*args)`` (a ``values()`` queryset), its SQL compiled once per process."""
    key = (connection.alias, connection.vendor, name)
    entry = _CACHE.get(key)
    if entry is None:
        placeholders = [_placeholder(i, a) for i, a in enumerate(args)]
        sql, params = build(*placeholders).query.sql_with_params()
        positions = tuple(placeholders.index(p) if p in placeholders else -1 for p in params)
        if {i for i in positions if i >= 0} != set(range(len(args))):
            raise ValueError(f"{name}: every argument must reach the SQL as one plain parameter")
        entry = (sql, tuple(params), positions)
        _CACHE[key] = entry
    sql, constants, slots = entry
    bound = [args[i] if i >= 0 else constants[n] for n, i in enumerate(slots)]
    with connection.cursor() as cursor:
        cursor.execute(sql, bound)
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
