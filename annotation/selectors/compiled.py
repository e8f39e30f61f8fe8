"""Hot read queries compiled once per process: the ORM builds the SQL, later calls only bind values.

Compiling a joined ``values()`` query costs the ORM 0.2–0.6 ms of CPU, ten times what the database
takes to answer it (docs/benchmarks-history.md, "rater hot path"). ``compiled_rows`` builds the queryset
once with placeholder arguments, keeps its SQL and the positions of the placeholders among its
parameters, and from then on executes that SQL with the call's arguments. Only for ``values()``
or ``aggregate``-shaped queries of plain columns (numbers, text, booleans): rows come back as
dicts keyed by the query's column aliases, without the ORM's per-field conversion.

On PostgreSQL these hot queries are also *prepared* (``DATABASE_PREPARED_STATEMENTS``, on by
default): they run through a server-side-binding cursor with ``prepare=True``, so PostgreSQL
plans each once per connection instead of on every request (the trial reads join 10–13 tables:
2–5.5 ms of planning against 0.1–0.6 ms of execution, docs/benchmarks-history.md). Every other query
keeps Django's default client-side binding, which has no limit on the number of parameters
(server-side binding caps a statement at 65,535: a long ``__in`` list would fail).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

from django.conf import settings
from django.db import connection, connections
from django.db.models import Model, QuerySet
from django.db.models.query import _get_from_db, get_related_populators  # type: ignore[attr-defined]
from django.db.models.sql import InsertQuery, UpdateQuery
from django.db.transaction import TransactionManagementError

_PLACEHOLDER_INT = -7_301_000_000_000
_CACHE: dict[tuple[str, str, str], tuple[str, tuple[Any, ...], tuple[int, ...]]] = {}
_INSERTS: dict[tuple[str, str, str], str] = {}


def _prepares(db: Any) -> bool:
    """Whether the hot queries are prepared on this connection (PostgreSQL, ``DATABASE_PREPARED_STATEMENTS``)."""
    return bool(db.vendor == "postgresql" and settings.DATABASE_PREPARED_STATEMENTS)


def generic_plans(sender: Any, connection: Any, **kwargs: Any) -> None:
    """A new PostgreSQL connection plans each prepared statement once (``connection_created``).

    By default PostgreSQL plans a prepared statement anew on each execution for as long as a plan
    for the given values looks cheaper than the generic one: measured under load, 0.25 ms of
    planning per execution of the trial read by id and 5.6 ms for the first unanswered trial,
    against 0.1–0.6 ms of execution. Only prepared statements (the hot queries above) are
    affected; every other query keeps being planned for its values.
    """
    if _prepares(connection):
        with connection.cursor() as cursor:
            cursor.execute("SET plan_cache_mode = force_generic_plan")


@contextmanager
def _prepared() -> Iterator[None]:
    """Cursors opened inside bind server-side and prepare their statement (PostgreSQL only).

    The connection is this thread's; its cursor factory is swapped for the block and restored.
    """
    if not _prepares(connection):
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    # Django turns psycopg's preparing off (prepare_threshold None, for connection poolers), and
    # then psycopg prepares nothing, prepare=True included: both are set for the block only.
    previous = raw.cursor_factory, raw.prepare_threshold
    raw.cursor_factory, raw.prepare_threshold = _preparing_cursor_class(), 0
    try:
        yield
    finally:
        raw.cursor_factory, raw.prepare_threshold = previous


@functools.cache
def _preparing_cursor_class() -> type:
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparingCursor(ServerBindingCursor):  # type: ignore[misc,valid-type]
        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = True, binary: bool | None = None) -> Any:
            return super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[misc]

    return PreparingCursor


def _placeholder(i: int, value: Any) -> Any:
    if isinstance(value, datetime):
        return datetime(1901, 2, 3, 4, 5, 6, i + 1, tzinfo=UTC)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError("compiled queries bind int, str and datetime arguments only")
    return _PLACEHOLDER_INT - i if isinstance(value, int) else f"\x00arbiter-arg-{i}\x00"


def _db_value(value: Any) -> Any:
    """``value`` as it reaches a compiled query's parameters (a datetime as the backend stores it)."""
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value


def _positions(name: str, placeholders: list[Any], params: Any) -> tuple[int, ...]:
    """For each parameter of the compiled SQL, the argument it is (or -1: a constant of the query)."""
    stored = [_db_value(p) for p in placeholders]
    positions = tuple(stored.index(p) if p in stored else -1 for p in params)
    if {i for i in positions if i >= 0} != set(range(len(placeholders))):
        raise ValueError(f"{name}: every argument must reach the SQL as one plain parameter")
    return positions


def _bind(args: tuple[Any, ...], constants: tuple[Any, ...], slots: tuple[int, ...]) -> list[Any]:
    return [_db_value(args[i]) if i >= 0 else constants[n] for n, i in enumerate(slots)]


@contextmanager
def _executed(name: str, sql_of: Callable[[list[Any]], tuple[str, Any]], args: tuple[Any, ...]) -> Iterator[Any]:
    """A cursor that ran the SQL ``sql_of(placeholders)`` (compiled once per process) with ``args``."""
    key = (connection.alias, connection.vendor, name)
    entry = _CACHE.get(key)
    if entry is None:
        placeholders = [_placeholder(i, a) for i, a in enumerate(args)]
        sql, params = sql_of(placeholders)
        entry = _CACHE[key] = (sql, tuple(params), _positions(name, placeholders, params))
    sql, constants, slots = entry
    with _prepared(), connection.cursor() as cursor:
        cursor.execute(sql, _bind(args, constants, slots))
        yield cursor


def compiled_rows(name: str, build: Callable[..., QuerySet[Any]], *args: Any) -> list[dict[str, Any]]:
    """The rows of ``build(*args)`` (a ``values()`` queryset), its SQL compiled once per process."""
    with _executed(name, lambda placeholders: build(*placeholders).query.sql_with_params(), args) as cursor:
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class _Prepared:
    """One thread's compiled model query: the ORM's own compiler, set up once, then run with new arguments.

    The compiler runs ``as_sql`` once (which also sets up what rows are turned into: the selected
    columns, the related objects to populate, the converters); later calls replace only its
    parameters. What Django's ``ModelIterable`` sets up on every iteration (the model's columns,
    the converters, the related-object populators) is set up here once, and each call runs the
    SQL on a Django cursor (its execute wrappers included) and builds the instances with those
    same pieces: ``from_db``, the ``select_related`` populators, the annotations. A compiler is
    bound to its thread's connection, hence one per thread.
    """

    def __init__(self, name: str, queryset: QuerySet[Any], placeholders: list[Any]) -> None:
        query = queryset.query.chain()
        compiler = query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        self.sql, self.constants, self.slots = sql, tuple(params), _positions(name, placeholders, params)
        self.model = queryset.model
        self.db = queryset.db
        self.compiler = compiler
        self.locks = bool(query.select_for_update) and connections[self.db].features.has_select_for_update
        # ModelIterable's per-iteration set-up, done once (as_sql above filled select and klass_info).
        select, klass_info = compiler.select, compiler.klass_info
        fields = klass_info["select_fields"]
        self.model_columns = slice(fields[0], fields[-1] + 1)
        self.init_list = [column[0].target.attname for column in select[self.model_columns]]
        fetch_mode = queryset._fetch_mode  # type: ignore[attr-defined]
        if fetch_mode.track_peers:  # its populators would collect every call's instances
            raise ValueError(f"{name}: a compiled query cannot use a fetch mode that tracks peers")
        self.from_db = _get_from_db(self.model, fetch_mode)
        self.populators = get_related_populators(klass_info, select, self.db, fetch_mode)
        self.annotations = list(compiler.annotation_col_map.items())
        self.converters = compiler.get_converters([column[0] for column in select[0 : compiler.col_count]])
        self.col_count = compiler.col_count

    def run(self, args: tuple[Any, ...]) -> list[Any]:
        db = connections[self.db]
        if self.locks and db.get_autocommit():  # as_sql's check, made on every call
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        params = _bind(args, self.constants, self.slots)
        with _prepared(), db.cursor() as cursor:
            cursor.execute(self.sql, params)
            rows: Any = [row[: self.col_count] for row in cursor.fetchall()]
        if self.converters:
            rows = self.compiler.apply_converters(rows, self.converters)
        found = []
        for row in rows:
            obj = self.from_db(self.db, self.init_list, row[self.model_columns])
            for populator in self.populators:
                populator.populate(row, obj)
            for attr, position in self.annotations:
                setattr(obj, attr, row[position])
            found.append(obj)
        return found


_local = threading.local()


def compiled_instances(name: str, build: Callable[..., QuerySet[Any]], *args: Any) -> list[Any]:
    """The model instances of ``build(*args)``, its SQL compiled once per thread.

    For the hot model reads (a trial with its study and unit): ``build`` returns the whole
    queryset, slicing and ordering included; only ``args`` change between calls.
    """
    cache: dict[tuple[str, str], _Prepared] | None = getattr(_local, "prepared", None)
    if cache is None:
        cache = _local.prepared = {}
    key = (connection.alias, name)
    prepared = cache.get(key)
    if prepared is None or prepared.compiler.connection is not connections[connection.alias]:
        placeholders = [_placeholder(i, a) for i, a in enumerate(args)]
        prepared = cache[key] = _Prepared(name, build(*placeholders), placeholders)
    return prepared.run(args)


def compiled_update(name: str, build: Callable[..., tuple[QuerySet[Any], dict[str, Any]]], *args: Any) -> int:
    """``queryset.update(**values)`` for ``(queryset, values) = build(*args)``, compiled once per process.

    For the hot UPDATE of an answer (the next trial marked shown, its candidate versions read in
    the statement itself): the expressions are compiled once; int, str and datetime arguments
    are bound. The number of rows updated is returned, as by ``update``.
    """

    def sql_of(placeholders: list[Any]) -> tuple[str, Any]:
        queryset, values = build(*placeholders)
        query = cast(UpdateQuery, queryset.order_by().query.chain(UpdateQuery))
        query.add_update_values(values)
        query.clear_select_clause()
        return query.get_compiler(queryset.db).as_sql()  # type: ignore[no-any-return]

    with _executed(name, sql_of, args) as cursor:
        return int(cursor.rowcount)


def compiled_create[M: Model](name: str, model: type[M], **values: Any) -> M:
    """``model.objects.create(**values)`` with its INSERT compiled once per process.

    For the hot INSERT of an answer (the vote). The instance is built and its values prepared as
    ``save()`` does (defaults, ``auto_now_add`` through ``pre_save``, ``get_db_prep_save``); the
    SQL, with its ``RETURNING`` of the key, is Django's own, compiled on the first call. Unlike
    ``save()`` no signal is sent: only for models with no ``save()`` override and no receivers.
    A backend that cannot return columns from an INSERT gets a plain ``save()``.
    """
    obj = model(**values)
    meta = model._meta
    fields = [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]
    returning = list(meta.db_returning_fields)
    key = (connection.alias, connection.vendor, name)
    sql = _INSERTS.get(key)
    if sql is None:
        if not connection.features.can_return_columns_from_insert:
            obj.save(force_insert=True, using=connection.alias)
            return obj
        query = InsertQuery(model)
        query.insert_values(fields, [obj])
        compiler = query.get_compiler(connection=connection)
        compiler.returning_fields = returning
        ((sql, _params),) = compiler.as_sql()
        _INSERTS[key] = sql
    params = [f.get_db_prep_save(f.pre_save(obj, True), connection=connection) for f in fields]
    with _prepared(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    for field, value in zip(returning, row, strict=True):
        setattr(obj, field.attname, value)
    obj._state.adding = False
    obj._state.db = connection.alias
    return obj

