"""Hot read queries compiled once per process: the ORM builds the SQL, later calls only bind values.

Compiling a joined ``values()`` query costs the ORM 0.2–0.6 ms of CPU, ten times what the database
takes to answer it (docs/benchmarks.md, "rater hot path"). ``compiled_rows`` builds the queryset
once with placeholder arguments, keeps its SQL and the positions of the placeholders among its
parameters, and from then on executes that SQL with the call's arguments. Only for ``values()``
or ``aggregate``-shaped queries of plain columns (numbers, text, booleans): rows come back as
dicts keyed by the query's column aliases, without the ORM's per-field conversion.
"""

from __future__ import annotations

import threading
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


class _Prepared:
    """One thread's compiled model query: the ORM's own compiler, set up once, then rebound.

    The compiler runs ``as_sql`` once (which also sets up what rows are turned into: the selected
    columns, the related objects to populate, the converters); later calls replace only its
    parameters, so Django's own iteration builds the instances (``select_related`` included).
    A compiler is bound to its thread's connection, hence one per thread.
    """

    def __init__(self, queryset: QuerySet[Any], placeholders: list[Any]) -> None:
        query = queryset.query.chain()
        compiler = query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        positions = tuple(placeholders.index(p) if p in placeholders else -1 for p in params)
        if {i for i in positions if i >= 0} != set(range(len(placeholders))):
            raise ValueError("every argument must reach the SQL as one plain parameter")
        self.sql, self.constants, self.slots = sql, tuple(params), positions
        self.params: tuple[Any, ...] = ()
        self.model = queryset.model
        self.db = queryset.db
        compiler.as_sql = lambda *a, **k: (self.sql, self.params)  # type: ignore[method-assign]
        query.get_compiler = lambda *a, **k: compiler  # type: ignore[method-assign]
        self.query = query

    def run(self, args: tuple[Any, ...]) -> list[Any]:
        self.params = tuple(args[i] if i >= 0 else self.constants[n] for n, i in enumerate(self.slots))
        return list(QuerySet(model=self.model, query=self.query, using=self.db))


_local = threading.local()


def compiled_instances(name: str, build: Callable[..., QuerySet[Any]], *args: int | str) -> list[Any]:
    """The model instances of ``build(*args)``, its SQL compiled once per thread.

    For the hot model reads (a trial with its study and unit): ``build`` returns the whole
    queryset, slicing and ordering included; only ``args`` change between calls.
    """
    cache: dict[tuple[int, str], _Prepared] | None = getattr(_local, "prepared", None)
    if cache is None:
        cache = _local.prepared = {}
    key = (id(connection), name)
    prepared = cache.get(key)
    if prepared is None:
        placeholders = [_placeholder(i, a) for i, a in enumerate(args)]
        prepared = cache[key] = _Prepared(build(*placeholders), placeholders)
    return prepared.run(args)
