"""The one CSV writer and reader of every CSV Arbiter writes (docs/protocol.md "Files" (CSV text cells)).

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
as a formula (``=HYPERLINK(...)``, ``+cmd|' /C calc'!A0``). Every text cell that starts so is
written with a leading ``'`` (the OWASP rule); readers remove it again, so export → import is
unchanged. Numbers stay numbers: an ``int`` or ``float`` is never touched, and neither is a text
cell that is a plain number literal (``-2``, ``-0.25``, ``+1e-3``), which no spreadsheet runs.

"Starts with" is read the way a spreadsheet might read it, not byte for byte: the cell is NFKC
normalized (full-width ``＝ ＋ － ＠`` and the small / super- / subscript signs become ``= + - @``)
and its leading quotes, whitespace other than tab and CR (space, newline, no-break space, ...) and
invisible format characters (zero-width space U+200B, the BOM U+FEFF, bidi marks: Unicode category
Cf) are skipped before the first character is looked at. So `` =1``, ``\n=1``, ``\u200b=1``,
``\ufeff=1`` and ``＝1`` are all prefixed. This is only the test; the cell written is the original
text with one ``'`` in front, nothing else changed.

The mapping is exactly reversible: a cell is prefixed when the test above says it starts with a
formula character, the test ignores leading quotes (so ``'=x`` is written ``''=x`` and read back as
``'=x``), and a reader removes one quote from exactly those cells.

Pure Python (no Django), so every app's CSV goes through it.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TextIO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _skipped(char: str) -> bool:
    """A leading character the test looks past: a quote, whitespace but tab and CR, or an invisible one."""
    return char == "'" or (char.isspace() and char not in "\t\r") or unicodedata.category(char) == "Cf"


def _body(text: str) -> str:
    """The text as the formula test sees it: NFKC normalized, the skipped leading characters gone."""
    normal = unicodedata.normalize("NFKC", text)
    start = 0
    while start < len(normal) and _skipped(normal[start]):
        start += 1
    return normal[start:]


def formula_like(text: str) -> bool:
    """Whether a spreadsheet could run this text cell as a formula (the module docstring's rule)."""
    body = _body(text)
    return body.startswith(FORMULA_STARTS) and _NUMBER.fullmatch(body) is None


def neutralize_cell(value: Any) -> Any:
    """A cell as written: ``'``-prefixed when it is text a spreadsheet would run."""
    if isinstance(value, str) and formula_like(value):
        return "'" + value
    return value


def restore_cell(text: str) -> str:
    """A cell as read: the inverse of :func:`neutralize_cell` for text."""
    if text.startswith("'") and formula_like(text):
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
