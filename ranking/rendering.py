"""A leaderboard report as the text of its files (docs/protocol.md "Files" (Reports)): JSON, the systems CSV,
the HTML page.

The published page, the researcher page, their downloads and the ``leaderboard`` command render
the stored report (``ranking.leaderboard.leaderboard_compute`` / the queued run) with these functions.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.template.loader import render_to_string

from annotation import csv_cells
from annotation.files import write_text_atomic
from annotation.models import Study
from ranking.objective_scores import CSV_COLUMNS as OBJECTIVE_CSV_COLUMNS
from ranking.objective_scores import objective_csv_cells

CSV_COLUMNS = (
    "rank",
    "system",
    "name",
    "score",
    "ci95_low",
    "ci95_high",
    "rank_ci95_low",
    "rank_ci95_high",
    "soft_preference",
    "appearances",
    "rank1_share",
    "penalty",  # docs/protocol.md "Scores set by the penalty": empty unless the penalty sets the score
)


def leaderboard_csv(report: Mapping[str, Any]) -> str:
    """The systems table of a leaderboard report as CSV (one row per system, by rank)."""
    buffer = io.StringIO()
    writer = csv_cells.writer(buffer)
    # With ground truth, the objective scores and their intervals follow (docs/protocol.md
    # "Objective scores beside the rankings").
    objective = bool(report.get("objective_scores"))
    writer.writerow(CSV_COLUMNS + (OBJECTIVE_CSV_COLUMNS if objective else ()))
    for row in report.get("systems", []):
        writer.writerow(
            [
                row["rank"],
                row["system"],
                row.get("name", ""),
                repr(row["score"]),
                repr(row["ci95"][0]),
                repr(row["ci95"][1]),
                row["rank_ci95"][0],
                row["rank_ci95"][1],
                repr(row["soft_preference"]),
                row["appearances"],
                repr(row["rank1_share"]),
                row.get("penalty") or "",
                *(objective_csv_cells(report, row["system"]) if objective else []),
            ]
        )
    return buffer.getvalue()


def leaderboard_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def leaderboard_context(*, study: Study, report: Mapping[str, Any]) -> dict[str, Any]:
    """Template context shared by the published page, the researcher page and the HTML file."""
    from ranking.plots import leaderboard_intervals_svg

    return {
        "study": study,
        "report": report,
        "intervals_svg": leaderboard_intervals_svg(report.get("systems", [])),
    }


def leaderboard_html(*, study: Study, report: Mapping[str, Any]) -> str:
    """A self-contained HTML page (docs/protocol.md "Files" (Reports)): own CSS, inline SVG, no script."""
    return render_to_string(
        "ranking/leaderboard_report.html", leaderboard_context(study=study, report=report)
    )


def leaderboard_write(
    *,
    study: Study,
    report: Mapping[str, Any],
    json_path: Path | None,
    html_path: Path | None = None,
    csv_path: Path | None = None,
) -> None:
    # Render everything first, then write each file whole: no half-written set of files.
    outputs = [
        (path, render())
        for path, render in (
            (json_path, lambda: leaderboard_json(report)),
            (csv_path, lambda: leaderboard_csv(report)),
            (html_path, lambda: leaderboard_html(study=study, report=report)),
        )
        if path is not None
    ]
    for path, text in outputs:
        write_text_atomic(path, text)


__all__ = [
    "CSV_COLUMNS",
    "leaderboard_context",
    "leaderboard_csv",
    "leaderboard_html",
    "leaderboard_json",
    "leaderboard_write",
]
