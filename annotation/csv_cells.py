"""The one CSV writer and reader of every CSV Arbiter writes (SPEC §8 "CSV text cells").

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
as a formula (``=HYPERLINK(...)``, ``+cmd|' /C calc'!A0``). Every text cell that starts so is
written with a leading ``'`` (the OWASP rule); readers remove it again, so export → import is
unchanged. Numbers stay numbers: an ``int`` or ``float`` is never touched, and neither is a text
cell that is a plain number literal (``-2``, ``-0.25``, ``+1e-3``), which no spreadsheet runs.

The mapping is exactly reversible: a cell is prefixed when, with its leading quotes stripped, it
starts with a formula character (so ``'=x`` is written ``''=x`` and read back as ``'=x``), and a
reader removes one quote from exactly those cells.

Pure Python (no Django), so every app's CSV goes through it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _formula_like(text: str) -> bool:
    body = text.lstrip("'")
    return body.startswith(FORMULA_STARTS) and _NUMBER.fullmatch(body) is None


def neutralize_cell(value: Any) -> Any:
    """A cell as written: ``'``-prefixed when it is text a spreadsheet would run."""
    if isinstance(value, str) and _formula_like(value):
        return "'" + value
    return value


def restore_cell(text: str) -> str:
    """A cell as read: the inverse of :func:`neutralize_cell` for text."""
    if text.startswith("'") and _formula_like(text):
        return text[1:]
    return text


class Writer:
    """``csv.writer`` whose every row goes through :func:`neutralize_cell`."""

    def __init__(self, stream: TextIO, **options: Any) -> None:
        options.setdefault("lineterminator", "\n")
        self._writer = csv.writer(stream, **options)

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([neutralize_cell(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class DictWriter:
    """``csv.DictWriter`` with the same neutralization (the header is written as it is)."""

    def __init__(self, stream: TextIO, fieldnames: Sequence[str], **options: Any) -> None:
        options.setdefault("lineterminator", "\n")
        self._writer = csv.DictWriter(stream, fieldnames=fieldnames, **options)

    def writeheader(self) -> None:
        self._writer.writeheader()

    def writerow(self, row: Mapping[str, Any]) -> None:
        self._writer.writerow({key: neutralize_cell(value) for key, value in row.items()})


def writer(stream: TextIO, **options: Any) -> Writer:
    return Writer(stream, **options)


def reader(lines: Iterable[str], **options: Any) -> Reader:
    return Reader(lines, **options)


class Reader:
    """``csv.reader`` whose every cell goes through :func:`restore_cell`; keeps ``line_num``."""

    def __init__(self, lines: Iterable[str], **options: Any) -> None:
        self._reader = csv.reader(lines, **options)

    @property
    def line_num(self) -> int:
        return self._reader.line_num

    def __iter__(self) -> Iterator[list[str]]:
        return self

    def __next__(self) -> list[str]:
        return [restore_cell(cell) for cell in next(self._reader)]


Error = csv.Error
