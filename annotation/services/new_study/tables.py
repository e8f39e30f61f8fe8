"""Rows of a researcher's CSV or JSONL table (a manifest, a media table, predicates), each row's
columns named as the table's columns or their aliases, every error naming the file and line."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any

from annotation.errors import ValidationFailed, excerpt
from annotation.services.bundles.reference_format import load_json

# Other names a researcher's own table may use for a column, read as that column. A header is
# matched case-insensitively, with spaces and dashes read as underscores.
COLUMN_ALIASES = {
    "page_id": "page", "id": "page", "page_name": "page", "stem": "page",
    "reference_path": "reference", "reference_image": "reference", "ref": "reference", "ref_path": "reference",
    "system_id": "system", "system_name": "system", "model": "system",
    "image_path": "image", "path": "image", "file": "image", "output": "image", "candidate": "image",
    "brief": "text", "prompt": "text",
}

def table_rows_of_text(
    text: str, *, shown: str, columns: tuple[str, ...], jsonl: bool, line_offset: int = 0
) -> Iterator[tuple[str, dict[str, str]]]:
    """(``shown:line``, row) of a CSV or JSONL text; ``line_offset`` corrects the line numbers of
    a text whose header line was added."""
    if jsonl:
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{shown}:{number + line_offset}"
            row = load_json(line.encode(), filename=where)
            if not isinstance(row, dict):
                raise ValidationFailed("expected a JSON object per line", where=where)
            yield where, table_row(row, where, columns)
        return
    reader = csv.DictReader(io.StringIO(text))
    try:
        seen: dict[str, str] = {}
        for key in reader.fieldnames or ():
            name = table_column(key, columns, where=f"{shown}:{1 + line_offset}")
            if name in seen:
                raise ValidationFailed(
                    f"columns {excerpt(seen[name])} and {excerpt(key)} both give {name!r}", where=f"{shown}:{1 + line_offset}"
                )
            seen[name] = key
        for row in reader:
            where = f"{shown}:{reader.line_num + line_offset}"
            yield where, table_row(row, where, columns)
    except csv.Error as exc:
        raise ValidationFailed(f"not a readable CSV file ({exc})", where=f"{shown}:{reader.line_num + line_offset}") from None


def table_column(key: Any, columns: tuple[str, ...], *, where: str) -> str:
    """The column a header names: itself, or what COLUMN_ALIASES reads it as (``page_id`` → page)."""
    if key in columns:
        return str(key)
    folded = re.sub(r"[\s-]+", "_", str(key).strip().lower()) if isinstance(key, str) else ""
    name = folded if folded in columns else COLUMN_ALIASES.get(folded, "")
    if name not in columns:
        raise ValidationFailed(f"unknown column {excerpt(key)} (expected: {', '.join(columns)})", where=where)
    return name


def table_row(row: dict[str, Any], where: str, columns: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw_key, value in row.items():
        key = table_column(raw_key, columns, where=where)
        if key in out:
            raise ValidationFailed(f"two columns give {key!r}", where=where)
        if value is None:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # a JSONL page id (or a box's coordinate) written as a number: 7 is page "7"
        if not isinstance(value, str):
            raise ValidationFailed(f"column {key!r}: expected text, got {type(value).__name__}", where=where)
        out[key] = value.strip()
    return out
