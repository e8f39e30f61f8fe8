"""The objective leaderboard CSV (docs/protocol.md "Deployment leaderboard", "Commands" ``--objective``):
``system,score`` → ``{system: score}``.

Read by the ``leaderboard`` command (a file) and the researcher page (an upload); every line is
checked and an error names ``source:line``.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from annotation import csv_cells
from annotation.errors import ValidationFailed
from annotation.models import Study
from ranking.selectors import study_system_ids


def objective_parse_csv(text: str, *, source: str, systems: set[str] | frozenset[str]) -> dict[str, float]:
    """An objective leaderboard CSV ``system,score`` (header required) → ``{system: score}``.

    Every line is checked: the system must be one of ``systems`` (bundle ids) and appear once, the
    score a finite number. Errors name ``source:line``.
    """
    reader = csv_cells.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        return _objective_rows(reader, source=source, systems=systems)
    except csv_cells.Error as exc:
        raise ValidationFailed(f"not valid CSV ({exc})", where=f"{source}:{reader.line_num}") from None


def _objective_rows(
    reader: csv_cells.Reader, *, source: str, systems: set[str] | frozenset[str]
) -> dict[str, float]:
    header = next(reader, None)
    if header is None:
        raise ValidationFailed("the file is empty; expected a header 'system,score'", where=f"{source}:1")
    names = [h.strip().lower() for h in header]
    if "system" not in names or "score" not in names:
        raise ValidationFailed(
            f"expected a header with columns 'system,score', got {','.join(header)!r}", where=f"{source}:1"
        )
    col_system, col_score = names.index("system"), names.index("score")
    out: dict[str, float] = {}
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) <= max(col_system, col_score):
            raise ValidationFailed(
                f"expected {len(header)} columns, got {len(row)}", where=f"{source}:{line}"
            )
        system, raw = row[col_system].strip(), row[col_score].strip()
        if system not in systems:
            raise ValidationFailed(
                f"unknown system {system!r} (systems of the study: {', '.join(sorted(systems))})",
                where=f"{source}:{line}",
                field="system",
            )
        if system in out:
            raise ValidationFailed(
                f"system {system!r} is listed twice", where=f"{source}:{line}", field="system"
            )
        try:
            score = float(raw)
        except ValueError:
            raise ValidationFailed(
                f"expected a number, got {raw!r}", where=f"{source}:{line}", field="score"
            ) from None
        if not math.isfinite(score):
            raise ValidationFailed(
                f"expected a finite number, got {raw!r}", where=f"{source}:{line}", field="score"
            )
        out[system] = score
    if not out:
        raise ValidationFailed("no system scores after the header", where=source)
    return out


def objective_read_csv(*, study: Study, path: Path | str) -> dict[str, float]:
    """Read and validate an objective leaderboard CSV file for ``study``
    (docs/protocol.md "Deployment leaderboard", "Commands" ``--objective``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationFailed("no such file", where=str(path)) from None
    except UnicodeDecodeError:
        raise ValidationFailed("not UTF-8 text", where=str(path)) from None
    return objective_parse_csv(text, source=path.name, systems=study_system_ids(study=study))


__all__ = ["objective_parse_csv", "objective_read_csv"]
