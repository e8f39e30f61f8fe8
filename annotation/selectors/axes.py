"""A study's axes read inside another query: one JSON array column instead of a query of their own.

An answer reads its trial with the study (``vote_trial``) and then the study's axes, to validate
the scores and to show the next trial's active axes: one more round trip per answer. Annotated
with ``StudyAxesRows("assignment__block__study_id")``, the trial's query brings the axes along
as a JSON array of ``[id, axis_id, title, scope, description, position]`` rows, aggregated by
the database (PostgreSQL ``jsonb_agg``, SQLite ``json_group_array``) in a correlated subquery
with no parameters of its own. ``axes_of_rows`` turns them into the same ``Axis`` instances the
ORM would build, in axis order.
"""

from __future__ import annotations

from typing import Any

from django.db import NotSupportedError
from django.db.models import F, Func, JSONField

from annotation.models import Axis

COLUMNS = ("id", "study_id", "axis_id", "title", "scope", "description", "position")
_ROW = ("id", "axis_id", "title", "scope", "description", "position")  # as aggregated (study_id is known)


class StudyAxesRows(Func):
    """The axes of the study whose id is the expression, as a JSON array of rows (none: NULL or [])."""

    output_field = JSONField()
    vendors = frozenset({"postgresql", "sqlite"})  # the backends with the JSON aggregates used below

    def __init__(self, study_id: str | Any) -> None:
        super().__init__(F(study_id) if isinstance(study_id, str) else study_id)

    def _subquery(self, aggregate: str, array: str) -> str:
        meta = Axis._meta
        column = {f: meta.get_field(f).column for f in COLUMNS}  # type: ignore[union-attr]
        row = ", ".join(f'x."{column[f]}"' for f in _ROW)
        return f'(SELECT {aggregate}({array}({row})) FROM "{meta.db_table}" x WHERE x."{column["study_id"]}" = %(expressions)s)'

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=self._subquery("JSONB_AGG", "JSONB_BUILD_ARRAY"), **extra)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=self._subquery("JSON_GROUP_ARRAY", "JSON_ARRAY"), **extra)

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> Any:  # type: ignore[override]
        if "template" not in extra:
            raise NotSupportedError(f"StudyAxesRows: no JSON aggregate for {connection.vendor}")
        return super().as_sql(compiler, connection, **extra)


def axes_of_rows(study_id: int, rows: list[list[Any]] | None, *, using: str = "default") -> list[Axis]:
    """The ``Axis`` instances of the aggregated rows, ordered by position (as the ORM reads them)."""
    axes = [
        Axis.from_db(using, list(COLUMNS), (int(r[0]), study_id, str(r[1]), str(r[2]), str(r[3]), str(r[4]), int(r[5])))
        for r in rows or []
    ]
    axes.sort(key=lambda axis: axis.position)
    return axes
