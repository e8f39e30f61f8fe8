"""Every CSV the project writes goes through the one cell writer (issue 37 item 4; SECURITY.md rows 17, 25).

``participants.csv`` kept a formula test of its own and missed the look-alike starts (``＝HYPERLINK``,
`` =1+1``) in a participant's ``STUDY_ID`` taken from the study link. Two guards: the participants
table is written safely, and no module of the project writes CSV except through
``annotation/csv_cells.py`` (a source scan over every package, so a new CSV endpoint or command
that builds its own writer fails here).
"""

from __future__ import annotations

import ast
import csv
import io
import subprocess
from pathlib import Path

import pytest

from annotation.models import Rater
from annotation.selectors.participants import participants_csv_text
from tests.annotation.factories import make_study
from tests.security.test_csv_injection import HOSTILE, LOOK_ALIKES, _is_safe

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("annotation", "calibration", "judges", "kind_reports", "ranking", "stats", "demo", "config", "deploy")
THE_WRITER = Path("annotation/csv_cells.py")


@pytest.mark.django_db
def test_participants_csv_quotes_look_alike_formulas_from_the_study_link() -> None:
    study = make_study()
    texts = [*HOSTILE, *LOOK_ALIKES]
    for n, text in enumerate(texts):
        Rater.objects.create(
            study=study, external_id=f"{text}-{n}", source=Rater.Source.LINK,
            platform={"PROLIFIC_PID": text, "STUDY_ID": text, "SESSION_ID": text},
        )
    rows = list(csv.reader(io.StringIO(participants_csv_text(study=study))))
    cells = [cell for row in rows[1:] for cell in row]
    assert all(_is_safe(cell) for cell in cells), [cell for cell in cells if not _is_safe(cell)]
    study_ids = {row[rows[0].index("STUDY_ID")] for row in rows[1:] if row[rows[0].index("STUDY_ID")]}
    assert "'\uff1dHYPERLINK(\"http://x\")" in study_ids and "' =1+1" in study_ids


def _csv_writers(path: Path) -> list[str]:
    """``file:line`` of each place that builds a CSV writer or writes a frame as CSV."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            builds_writer = node.func.attr in ("writer", "DictWriter") and isinstance(owner, ast.Name) and owner.id == "csv"
            if builds_writer or node.func.attr == "to_csv":
                found.append(f"{path}:{node.lineno}")
    return found


def test_no_module_writes_csv_but_through_the_one_cell_writer() -> None:
    tracked = subprocess.run(["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True, check=True)
    paths = [Path(name) for name in tracked.stdout.split() if name.endswith(".py")]
    assert len(paths) > 100  # the scan really read the project
    writers = [where for path in paths if path != THE_WRITER for where in _csv_writers(ROOT / path)]
    assert writers == [], "CSV written without annotation/csv_cells.py: " + ", ".join(writers)
    assert _csv_writers(ROOT / THE_WRITER)  # the scan finds a writer where there is one
