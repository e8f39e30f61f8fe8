"""A brief's verifiable requirements (docs/protocol.md "AesCode's rule score").

A brief (a page of any study, the ``checklist`` kind's unit) may carry what its output must
contain, checked from the render rather than by eye: exact ``text`` strings, ``tables`` and
``charts`` given as rows of required data, and the ``canvas`` size. All four are optional; an
empty object requires nothing::

    {"text": ["Quarterly report", "Q3 2026"],
     "tables": [{"rows": [["Region", "Sales"], ["North", 120]]}],
     "charts": [{"rows": [["Mon", 120], ["Tue", 200]]}],
     "canvas": {"width": 1280, "height": 720}}

:func:`parse_requirements` checks one such object into :class:`Requirements` or raises
:class:`RequirementsError` naming the field (``.tables[0].rows[2][1]: expected a string or a
number, got true``); :meth:`Requirements.to_json` is its inverse. No Django here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

KEYS = ("text", "tables", "charts", "canvas")
MAX_STRINGS = 200
MAX_STRING = 1_000
MAX_DATA = 50  # tables, and charts, a brief
MAX_ROWS = 1_000
MAX_CELLS = 50
MAX_CANVAS = 100_000

Cell = str | int | float


class RequirementsError(ValueError):
    """One line: ``path`` (relative to the requirements object, ``.text[2]``) and what was expected."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


@dataclass(frozen=True)
class RequiredData:
    """A table or a chart: the rows it must hold (each an ordered list of cells)."""

    rows: tuple[tuple[Cell, ...], ...]


@dataclass(frozen=True)
class Requirements:
    text: tuple[str, ...] = ()
    tables: tuple[RequiredData, ...] = ()
    charts: tuple[RequiredData, ...] = ()
    canvas: tuple[int, int] | None = None  # (width, height) in CSS pixels

    @property
    def empty(self) -> bool:
        return not (self.text or self.tables or self.charts or self.canvas)

    def to_json(self) -> dict[str, Any]:
        """The canonical object (keys with nothing required left out)."""
        out: dict[str, Any] = {}
        if self.text:
            out["text"] = list(self.text)
        if self.tables:
            out["tables"] = [{"rows": [list(r) for r in t.rows]} for t in self.tables]
        if self.charts:
            out["charts"] = [{"rows": [list(r) for r in c.rows]} for c in self.charts]
        if self.canvas:
            out["canvas"] = {"width": self.canvas[0], "height": self.canvas[1]}
        return out


def _type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else type(value).__name__


def _list(value: object, path: str, *, most: int, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequirementsError(path, f"expected a list of {what}, got {_type(value)}")
    if not value:
        raise RequirementsError(
            path, f"expected at least one of {what}, got an empty list (leave the key out instead)"
        )
    if len(value) > most:
        raise RequirementsError(path, f"at most {most:,} {what}, got {len(value):,}")
    return value


def _cell(value: object, path: str) -> Cell:
    if isinstance(value, str):
        if not value.strip():
            raise RequirementsError(path, "an empty cell cannot be looked for")
        if len(value) > MAX_STRING:
            raise RequirementsError(path, f"at most {MAX_STRING:,} characters, got {len(value):,}")
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise RequirementsError(path, "expected a finite number")
        return value
    raise RequirementsError(path, f"expected a string or a number, got {_type(value)}")


def _data(value: object, path: str) -> RequiredData:
    if not isinstance(value, dict):
        raise RequirementsError(path, f"expected an object {{rows: [[cell, ...], ...]}}, got {_type(value)}")
    unknown = sorted(set(value) - {"rows"})
    if unknown:
        raise RequirementsError(f"{path}.{unknown[0]}", "unknown key (expected rows)")
    if "rows" not in value:
        raise RequirementsError(f"{path}.rows", "required: the rows of data it must hold")
    rows = []
    for i, row in enumerate(_list(value["rows"], f"{path}.rows", most=MAX_ROWS, what="rows")):
        cells = _list(row, f"{path}.rows[{i}]", most=MAX_CELLS, what="cells")
        rows.append(tuple(_cell(c, f"{path}.rows[{i}][{j}]") for j, c in enumerate(cells)))
    return RequiredData(rows=tuple(rows))


def _canvas(value: object, path: str) -> tuple[int, int]:
    if not isinstance(value, dict):
        raise RequirementsError(path, f"expected an object {{width, height}}, got {_type(value)}")
    unknown = sorted(set(value) - {"width", "height"})
    if unknown:
        raise RequirementsError(f"{path}.{unknown[0]}", "unknown key (expected width and height)")
    sides = []
    for key in ("width", "height"):
        side = value.get(key)
        if not isinstance(side, int) or isinstance(side, bool) or not 1 <= side <= MAX_CANVAS:
            shown = side if isinstance(side, int) and not isinstance(side, bool) else _type(side)
            raise RequirementsError(
                f"{path}.{key}",
                f"expected a whole number of CSS pixels from 1 to {MAX_CANVAS:,}, got {shown}",
            )
        sides.append(side)
    return sides[0], sides[1]


def parse_requirements(value: object) -> Requirements:
    """Check one requirements object; :class:`RequirementsError` names the first bad field."""
    if not isinstance(value, dict):
        raise RequirementsError(
            "", f"expected an object with text, tables, charts or canvas, got {_type(value)}"
        )
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise RequirementsError(f".{unknown[0]}", f"unknown key (expected {', '.join(KEYS)})")
    text: list[str] = []
    if "text" in value:
        for i, s in enumerate(_list(value["text"], ".text", most=MAX_STRINGS, what="strings")):
            if not isinstance(s, str):
                raise RequirementsError(f".text[{i}]", f"expected a string, got {_type(s)}")
            text.append(str(_cell(s, f".text[{i}]")))
    tables = (
        [
            _data(t, f".tables[{i}]")
            for i, t in enumerate(_list(value["tables"], ".tables", most=MAX_DATA, what="tables"))
        ]
        if "tables" in value
        else []
    )
    charts = (
        [
            _data(c, f".charts[{i}]")
            for i, c in enumerate(_list(value["charts"], ".charts", most=MAX_DATA, what="charts"))
        ]
        if "charts" in value
        else []
    )
    canvas = _canvas(value["canvas"], ".canvas") if "canvas" in value else None
    return Requirements(text=tuple(text), tables=tuple(tables), charts=tuple(charts), canvas=canvas)
