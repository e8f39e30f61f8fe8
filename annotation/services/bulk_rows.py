"""Insert many new rows of one model at the speed of the database (issue 29 item 5).

``bulk_create`` builds a model instance per row and compiles one ``INSERT`` per batch through the
ORM's per-value preparation, which was most of a large import's time (docs/benchmarks.md). Here every
column's value is prepared by its field once when it is the same on every row (defaults, the
import time), and per row only for the columns the caller fills, with a plain conversion for
those columns' Python types; the rows then go to the database in one statement:

- PostgreSQL: ``COPY table (columns) FROM STDIN`` through psycopg 3's ``cursor.copy`` and
  ``write_row`` (the server parses the text form; a JSON column gets its JSON text);
- SQLite: one ``executemany`` of a prepared ``INSERT`` (the sqlite3 module's C loop), the values
  shared by every row written into the statement as literals rather than bound again per row;
- any other backend: ``bulk_create``.

No signals are sent and no primary keys are returned (as ``bulk_create`` on SQLite). The caller
holds the transaction (all or nothing) and has validated every value; the database still checks
its constraints. A test holds the stored rows equal to ``bulk_create``'s on both backends.

``ignore_conflicts`` skips rows that would break a unique constraint, as ``bulk_create``'s does
(content-addressed rows another import may have written meanwhile): ``INSERT OR IGNORE`` on
SQLite; on PostgreSQL, where ``COPY`` cannot skip a row, the rows are copied into a temporary
table and moved with one ``INSERT … SELECT … ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, models, transaction

# Fields whose Python values the drivers adapt themselves (or JSON, encoded here). A FileField's
# value is its stored name (a str).
PLAIN_FIELDS = (
    models.BooleanField, models.IntegerField, models.CharField, models.TextField, models.ForeignKey, models.JSONField,
    models.FileField,
)


class JSONText(str):
    """A JSON column's value given already encoded (e.g. one text shared by many rows); taken as is."""


def _prepared(field: models.Field[Any, Any], value: Any) -> Any:
    """One value as the driver takes it (JSON as its text, so COPY and SQLite store the same)."""
    if isinstance(field, models.JSONField):
        return None if value is None else json.dumps(value, cls=field.encoder)
    return field.get_db_prep_save(value, connection)


def _sqlite_literal(value: Any) -> str | None:
    """A shared value as an SQLite literal, or None to bind it (only None, int and str are written)."""
    if value is None:
        return "NULL"
    if type(value) is bool or (type(value) is int and -(2**63) <= value < 2**63):  # SQLite's INTEGER
        return str(int(value))
    if type(value) is str and "\x00" not in value and "%" not in value:  # Django rewrites % in SQLite SQL
        return "'" + value.replace("'", "''") + "'"
    return None


def rows_insert(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    *,
    constants: Mapping[str, Any] | None = None,
    batch_size: int = 5000,
    ignore_conflicts: bool = False,
) -> int:
    """Insert ``rows`` (tuples in the order of ``columns``, field attnames such as ``judge_id``)
    into ``model``'s table; returns the number of rows given (with ``ignore_conflicts``, some of
    them may have been skipped).

    Values in ``rows`` are plain Python values the driver adapts itself (str, int, bool, None) or,
    in JSON columns, any JSON value (encoded here) or a :class:`JSONText` (already encoded, as
    ``json.dumps(value, cls=field.encoder)`` would). ``constants``: attnames with one value for every
    row (e.g. ``created_at``), prepared once by their field; every other column takes its field
    default (``auto_now``/``auto_now_add`` columns must be given).
    """
    if not rows:
        return 0
    constants = dict(constants or {})
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    by_attname = {f.attname: f for f in fields}
    unknown = sorted((set(columns) | set(constants)) - set(by_attname))
    if unknown:
        raise ValueError(f"{model.__name__} has no column(s) {', '.join(unknown)}")
    for name in columns:
        if not isinstance(by_attname[name], PLAIN_FIELDS):
            raise ValueError(f"{model.__name__}.{name}: pass it in constants (prepared by its field)")
    if connection.vendor not in ("postgresql", "sqlite"):
        model.objects.bulk_create(  # type: ignore[attr-defined]
            [model(**constants, **dict(zip(columns, row, strict=True))) for row in rows], batch_size=1000,
            ignore_conflicts=ignore_conflicts,
        )
        return len(rows)
    fixed: dict[str, Any] = {}
    for f in fields:
        if f.attname in columns:
            continue
        if f.attname in constants:
            value = constants[f.attname]
        elif getattr(f, "auto_now_add", False) or getattr(f, "auto_now", False):
            raise ValueError(f"{model.__name__}.{f.attname} is set on save: give it in constants")
        else:
            value = f.get_default()
        fixed[f.attname] = _prepared(f, value)
    fixed_values = tuple(fixed.values())
    json_at = [i for i, name in enumerate(columns) if isinstance(by_attname[name], models.JSONField)]
    encoders = {i: by_attname[columns[i]].encoder for i in json_at}  # type: ignore[attr-defined]

    literals = [_sqlite_literal(v) for v in fixed_values] if connection.vendor == "sqlite" else [None]
    in_statement = None not in literals
    if in_statement:
        fixed_values = ()  # SQLite: written into the statement below, not bound per row

    def values() -> Any:
        if not json_at and not fixed_values:
            yield from rows
            return
        if not json_at:
            for row in rows:
                yield row + fixed_values
            return
        for row in rows:
            out = list(row)
            for i in json_at:
                if out[i] is not None and type(out[i]) is not JSONText:
                    out[i] = json.dumps(out[i], cls=encoders[i])
            out.extend(fixed_values)
            yield out

    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(str(by_attname[name].column)) for name in (*columns, *fixed))
    if connection.vendor == "postgresql" and ignore_conflicts:
        # The table's column types, none of its constraints; all in one transaction (a pooler in
        # transaction mode keeps the session, and a failure rolls the temporary table back too).
        scratch = quote(f"rows_insert_{model._meta.db_table}")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"CREATE TEMPORARY TABLE {scratch} AS SELECT {names} FROM {table} WITH NO DATA")
            with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {scratch} ({names}) FROM STDIN") as copy:
                for row in values():
                    copy.write_row(row)
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {scratch} ON CONFLICT DO NOTHING")
            cursor.execute(f"DROP TABLE {scratch}")
        return len(rows)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The driver's errors as Django's (an IntegrityError is one), as for cursor.execute.
            with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in values():
                    copy.write_row(row)
        else:
            tail = [str(v) for v in literals] if in_statement else ["%s"] * len(fixed)
            placeholders = ", ".join(["%s"] * len(columns) + tail)
            verb = "INSERT OR IGNORE" if ignore_conflicts else "INSERT"
            sql = f"{verb} INTO {table} ({names}) VALUES ({placeholders})"
            batch: list[Any] = []
            for row in values():
                batch.append(row)
                if len(batch) >= batch_size:
                    cursor.executemany(sql, batch)
                    batch = []
            if batch:
                cursor.executemany(sql, batch)
    return len(rows)
