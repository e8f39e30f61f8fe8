"""Votes CSV of the other study kinds (docs/study-kinds.md "Votes CSV", annotation/kinds/,
annotation/services/votes_csv.py).

Each kind's example bundle (fixtures/bundles/<kind>) takes a hand-written votes CSV with main
votes, a hidden repeat and attention checks; the stored rows are checked against the file with a
plain loop, the export must give the file back byte for byte, and bad files are refused with one
line naming line and field, writing nothing. The docs/protocol.md "Files" (``pairwise_reference``) rules that
the kinds share are tested in test_votes.py; the attention-check rules of that format are here.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from annotation.errors import ValidationFailed
from annotation.kinds import design_of
from annotation.models import (
    Assignment,
    AssignmentState,
    AuditEvent,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    Predicate,
    Rater,
    Study,
    Trial,
    Vote,
)
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.votes_csv import votes_export_csv, votes_import_csv
from tests.annotation.factories import EXAMPLE_ROWS, make_study, votes_csv_text, write_votes_csv
from tests.annotation.test_bundle_kinds import kind_bundle
from tests.annotation.test_bundles import edit_doc

pytestmark = pytest.mark.django_db

KINDS = ("pairwise", "checklist", "rating")

HEADERS: dict[str, tuple[str, ...]] = {
    "pairwise": (
        "comparison",
        "brief",
        "item_a",
        "item_b",
        "system_a",
        "system_b",
        "block",
        "rater",
        "position",
        "swapped",
        "repeat",
        "attention",
        "label",
        "confidence",
        "rationale",
        "response_ms",
    ),
    "checklist": (
        "predicate",
        "item",
        "brief",
        "system",
        "block",
        "rater",
        "position",
        "repeat",
        "attention",
        "label",
        "evidence",
        "response_ms",
    ),
    "rating": (
        "item",
        "brief",
        "system",
        "block",
        "rater",
        "position",
        "repeat",
        "attention",
        "response_ms",
        "rating:aesthetics",
        "rating:brief_fidelity",
    ),
}
C1 = ("c1", "b1", "b1-alpha", "b1-beta", "alpha", "beta")
C2 = ("c2", "b1", "b1-gamma", "b1-alpha", "gamma", "alpha")
C4 = ("c4", "b2", "b2-alpha", "b2-beta", "alpha", "beta")
P1 = ("p1", "i1", "b1", "alpha")
P2 = ("p2", "i1", "b1", "alpha")
P3 = ("p3", "i2", "b1", "beta")
P5 = ("p5", "i3", "b2", "alpha")
B1A = ("b1-alpha", "b1", "alpha")
B1B = ("b1-beta", "b1", "beta")
B2A = ("b2-alpha", "b2", "alpha")
B3B = ("b3-beta", "b3", "beta")
# In export order (block, rater slot, position). Per kind, r01: two main votes (lines 2, 3), an
# attention check (line 4), a hidden repeat of line 2 (line 5); r02: two main votes (lines 6, 7)
# and a failed attention check on a unit it also voted on (line 8, multi-line text last).
ROWS: dict[str, list[tuple[str, ...]]] = {
    "pairwise": [
        (*C1, "block-1", "r01", "1", "0", "0", "", "A", "4", "left is cleaner", "12034"),
        (*C2, "block-1", "r01", "2", "1", "0", "", "TIE", "2", "", "8410"),
        (*C4, "block-1", "r01", "3", "1", "0", "B", "A", "5", "", "3100"),  # shown B on the left: canonical A
        (*C1, "block-1", "r01", "4", "0", "1", "", "A", "3", "", "6120"),
        (*C1, "block-1", "r02", "1", "1", "0", "", "B", "3", "", "15022"),
        (*C2, "block-1", "r02", "2", "0", "0", "", "CANNOT_JUDGE", "", "image did not load", "4000"),
        (*C1, "block-1", "r02", "3", "0", "0", "TIE", "A", "1", 'multi\nline, "quoted"', ""),
    ],
    "checklist": [
        (*P1, "block-1", "r01", "1", "0", "", "YES", "headline band across the top", "9000"),
        (*P2, "block-1", "r01", "2", "0", "", "UNCLEAR", "date text too small to read", ""),
        (*P3, "block-1", "r01", "3", "0", "NO", "NO", "instructed: answer No", "2500"),
        (*P1, "block-1", "r01", "4", "1", "", "YES", "same headline", "7000"),
        (*P5, "block-1", "r02", "1", "0", "", "NO", "nothing round", "11000"),
        (*P1, "block-1", "r02", "2", "0", "", "YES", "big title", "5000"),
        (*P1, "block-1", "r02", "3", "0", "UNCLEAR", "YES", '  multi\nline, "quoted"  ', "800"),
    ],
    "rating": [
        (*B1A, "block-1", "r01", "1", "0", "", "9000", "4", "5"),
        (*B1B, "block-1", "r01", "2", "0", "", "", "2", "3"),
        (*B2A, "block-1", "r01", "3", "0", "3", "4000", "3", "3"),
        (*B1A, "block-1", "r01", "4", "1", "", "7000", "4", "4"),
        (*B3B, "block-1", "r02", "1", "0", "", "12000", "1", "5"),
        (*B1A, "block-1", "r02", "2", "0", "", "6000", "5", "5"),
        (*B1A, "block-1", "r02", "3", "0", "1", "3000", "2", "1"),
    ],
}
UNIT_COLUMN = {"pairwise": "comparison", "checklist": "predicate", "rating": "item"}
UNIT_FIELD = {"pairwise": "comparison", "checklist": "predicate", "rating": "candidate"}


def rows_of(kind: str) -> list[dict[str, str]]:
    return [dict(zip(HEADERS[kind], row, strict=True)) for row in ROWS[kind]]


def rows_with(kind: str, line: int, **changes: str) -> list[dict[str, str]]:
    """The kind's rows with the row at file ``line`` (header = line 1) changed."""
    rows = rows_of(kind)
    rows[line - 2].update(changes)
    return rows


def kind_study(kind: str, tmp_path: Path, slug: str | None = None) -> Study:
    """The example bundle of ``kind`` imported (under another slug when given: a fresh copy)."""
    if slug is None:
        return study_import_bundle(path=Path(__file__).resolve().parents[2] / "fixtures" / "bundles" / kind)
    bundle = edit_doc(kind_bundle(kind, tmp_path / slug), lambda d: d.update(slug=slug))
    return study_import_bundle(path=bundle)


def import_rows(
    study: Study,
    tmp_path: Path,
    rows: Sequence[Mapping[str, str]],
    header: Sequence[str],
    name: str = "votes.csv",
) -> Any:
    return votes_import_csv(study=study, path=write_votes_csv(tmp_path / name, rows, header))


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8", newline="")))


def nothing_written() -> bool:
    return not (
        Vote.objects.exists()
        or Trial.objects.exists()
        or Assignment.objects.exists()
        or Block.objects.exists()
        or BlockItem.objects.exists()
        or Rater.objects.exists()
        or AuditEvent.objects.filter(action="votes.import").exists()
    )


def unit_object(kind: str, study: Study, external_id: str) -> Any:
    if kind == "pairwise":
        return Comparison.objects.get(study=study, external_id=external_id)
    if kind == "checklist":
        return Predicate.objects.get(study=study, external_id=external_id)
    return Candidate.objects.get(page__study=study, external_id=external_id)


def expected_answer(kind: str, row: Mapping[str, str]) -> tuple[str, int | None, str, dict[str, Any]]:
    """(label, confidence, rationale, answers) the row should store (docs/study-kinds.md)."""
    if kind == "pairwise":
        return row["label"], int(row["confidence"]) if row["confidence"] else None, row["rationale"], {}
    if kind == "checklist":
        return row["label"], None, row["evidence"], {}
    ratings = {d: int(row[f"rating:{d}"]) for d in ("aesthetics", "brief_fidelity")}
    return "", None, "", {"ratings": ratings}


# ---------------------------------------------------------------------------------------------
# Columns
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_columns_are_the_decided_ones(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    assert design_of(study).votes_csv(study).export_header() == list(HEADERS[kind])
    out = tmp_path / "empty.csv"
    assert votes_export_csv(study=study, path=out) == 0
    assert out.read_text(encoding="utf-8") == ",".join(HEADERS[kind]) + "\n"
    assert votes_import_csv(study=kind_study(kind, tmp_path, "copy"), path=out).rows == 0


# ---------------------------------------------------------------------------------------------
# Import: stored rows
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_import_stores_canonical_answers_attention_checks_and_repeats(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    rows = rows_of(kind)
    result = import_rows(study, tmp_path, rows, HEADERS[kind])

    n_checks = sum(1 for r in rows if r["attention"])
    n_repeats = sum(1 for r in rows if r["repeat"] == "1")
    assert (result.rows, result.repeat_votes, result.main_votes) == (7, n_repeats, 7 - n_checks - n_repeats)
    assert (result.blocks_created, result.raters_created, result.assignments_created) == (1, 2, 2)
    assert result.block_items_created == len({r[UNIT_COLUMN[kind]] for r in rows})
    field = UNIT_FIELD[kind]
    trials: dict[tuple[str, int], Trial] = {}
    for t in Trial.objects.filter(assignment__block__study=study).select_related(
        "assignment__rater", "vote", field, "repeat_of"
    ):
        assert t.assignment.rater is not None
        trials[t.assignment.rater.external_id, t.position] = t
    assert len(trials) == len(rows)
    for row in rows:
        t = trials[row["rater"], int(row["position"])]
        assert getattr(t, field).external_id == row[UNIT_COLUMN[kind]]
        assert t.swapped is (row.get("swapped") == "1")
        assert t.is_repeat is (row["repeat"] == "1")
        assert t.attention_expected == row["attention"]
        vote = t.vote
        assert (vote.label, vote.confidence, vote.rationale, vote.answers) == expected_answer(kind, row)
        assert vote.response_ms == (int(row["response_ms"]) if row["response_ms"] else None)
        assert vote.axis_scores == {}
        if t.is_repeat:
            assert t.repeat_of is not None and not t.repeat_of.attention_expected
            assert (t.repeat_of.assignment_id, getattr(t.repeat_of, field)) == (
                t.assignment_id,
                getattr(t, field),
            )
            assert not t.repeat_of.is_repeat
        else:
            assert t.repeat_of is None
    assert set(Assignment.objects.filter(block__study=study).values_list("state", flat=True)) == {"finished"}
    items = BlockItem.objects.filter(block__study=study).values_list(f"{field}__external_id", flat=True)
    assert sorted(items) == sorted({r[UNIT_COLUMN[kind]] for r in rows})
    assert AuditEvent.objects.get(action="votes.import", study=study).details["rows"] == 7


def test_checklist_evidence_and_pairwise_rationale_are_kept_verbatim(tmp_path: Path) -> None:
    study = kind_study("checklist", tmp_path)
    import_rows(study, tmp_path, rows_of("checklist"), HEADERS["checklist"])
    vote = Vote.objects.get(trial__assignment__rater__external_id="r02", trial__position=3)
    assert vote.rationale == '  multi\nline, "quoted"  ' and vote.label == "YES" and vote.confidence is None


# ---------------------------------------------------------------------------------------------
# Round trip
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_export_gives_the_file_back_and_round_trips_through_a_fresh_copy(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    source = write_votes_csv(tmp_path / "votes.csv", rows_of(kind), HEADERS[kind])
    votes_import_csv(study=study, path=source)
    first = tmp_path / "first.csv"
    assert votes_export_csv(study=study, path=first) == 7
    # The hand-written file is in export order with canonical values: the export is the same text.
    assert first.read_text(encoding="utf-8") == source.read_text(encoding="utf-8")

    copy = kind_study(kind, tmp_path, f"{kind}-copy")
    result = votes_import_csv(study=copy, path=first)
    assert result.rows == 7
    second = tmp_path / "second.csv"
    assert votes_export_csv(study=copy, path=second) == 7
    assert second.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")


@pytest.mark.parametrize("kind", KINDS)
def test_an_export_reimported_into_the_same_study_is_refused(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    import_rows(study, tmp_path, rows_of(kind), HEADERS[kind])
    out = tmp_path / "out.csv"
    votes_export_csv(study=study, path=out)
    with pytest.raises(
        ValidationFailed, match=r"^out\.csv line 2, field 'position': rater 'r01' already answered"
    ):
        votes_import_csv(study=study, path=out)
    assert Vote.objects.count() == 7


@pytest.mark.parametrize("kind", KINDS)
def test_voided_assignments_are_not_exported(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    import_rows(study, tmp_path, rows_of(kind), HEADERS[kind])
    Assignment.objects.filter(rater__external_id="r02").update(state=AssignmentState.VOIDED)
    out = tmp_path / "out.csv"
    assert votes_export_csv(study=study, path=out) == 4
    assert [r["rater"] for r in read_csv(out)] == ["r01"] * 4


@pytest.mark.parametrize("kind", KINDS)
def test_a_repeat_may_point_at_a_main_vote_stored_by_an_earlier_import(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    rows = rows_of(kind)
    import_rows(study, tmp_path, [r for r in rows if r["repeat"] == "0"], HEADERS[kind], name="first.csv")
    result = import_rows(
        study, tmp_path, [r for r in rows if r["repeat"] == "1"], HEADERS[kind], name="second.csv"
    )
    assert (result.assignments_reused, result.trials_created, result.repeat_votes) == (1, 1, 1)
    repeat = Trial.objects.get(is_repeat=True)
    assert repeat.repeat_of is not None and repeat.repeat_of.position == 1
    assert repeat.repeat_of.assignment_id == repeat.assignment_id
    with pytest.raises(
        ValidationFailed, match=r"^third\.csv line 2, field 'repeat': rater 'r01' already has a hidden"
    ):
        import_rows(study, tmp_path, [dict(rows[3], position="9")], HEADERS[kind], name="third.csv")


# ---------------------------------------------------------------------------------------------
# Planned trials (a rater holding a live assignment)
# ---------------------------------------------------------------------------------------------


def plan_r01(kind: str, study: Study, state: str = AssignmentState.ACTIVE) -> tuple[Assignment, list[Trial]]:
    """A planned assignment of rater r01 whose trials are exactly r01's rows (as the scheduler would)."""
    field = UNIT_FIELD[kind]
    block = Block.objects.create(study=study, name="block-1")
    rows = [r for r in rows_of(kind) if r["rater"] == "r01"]
    units = {r[UNIT_COLUMN[kind]]: unit_object(kind, study, r[UNIT_COLUMN[kind]]) for r in rows}
    for i, unit in enumerate(units.values()):
        BlockItem.objects.create(block=block, position=i, **{field: unit})
    rater = Rater.objects.create(study=study, external_id="r01", source=Rater.Source.LINK)
    a = Assignment.objects.create(block=block, slot=0, rater=rater, state=state)
    trials: list[Trial] = []
    for row in rows:
        unit = units[row[UNIT_COLUMN[kind]]]
        original = next(
            (t for t in trials if getattr(t, field) == unit and not t.is_repeat and not t.attention_expected),
            None,
        )
        trials.append(
            Trial.objects.create(
                assignment=a,
                position=int(row["position"]),
                swapped=row.get("swapped") == "1",
                is_repeat=row["repeat"] == "1",
                repeat_of=original if row["repeat"] == "1" else None,
                attention_expected=row["attention"],
                **{field: unit},
            )
        )
    return a, trials


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("state", [AssignmentState.OPEN, AssignmentState.ACTIVE])
def test_import_answers_the_planned_trials_of_a_raters_live_assignment(
    kind: str, state: str, tmp_path: Path
) -> None:
    study = kind_study(kind, tmp_path)
    a, trials = plan_r01(kind, study, state)
    rows = [r for r in rows_of(kind) if r["rater"] == "r01"]

    result = import_rows(study, tmp_path, rows, HEADERS[kind])

    assert (result.assignments_created, result.assignments_reused, result.trials_created) == (0, 1, 0)
    assert (result.trials_answered, result.block_items_created, result.raters_created) == (4, 0, 0)
    for t, row in zip(trials, rows, strict=True):
        vote = Vote.objects.get(trial=t)
        assert (vote.label, vote.confidence, vote.rationale, vote.answers) == expected_answer(kind, row)
    a.refresh_from_db()
    assert a.state == AssignmentState.FINISHED and a.finished_at is not None
    assert Rater.objects.get(external_id="r01").source == Rater.Source.LINK


@pytest.mark.parametrize("kind", KINDS)
def test_rows_that_contradict_the_planned_trials_are_refused(kind: str, tmp_path: Path) -> None:
    study = kind_study(kind, tmp_path)
    plan_r01(kind, study)
    rows = [r for r in rows_of(kind) if r["rater"] == "r01"]
    noun = UNIT_COLUMN[kind]
    orientation = "orientation, " if kind == "pairwise" else ""
    # The planned attention check at position 3 answered as a data row.
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, [dict(rows[2], attention="")], HEADERS[kind])
    assert str(info.value) == (
        f"votes.csv line 2, field 'position': position 3 of rater 'r01' in block 'block-1' is a planned trial "
        f"of another {noun}, {orientation}repeat flag or attention check"
    )
    # A second main vote on a unit the rater has planned at another position.
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, [dict(rows[0], position="9")], HEADERS[kind])
    assert str(info.value) == (
        f"votes.csv line 2, field 'position': rater 'r01' already has {noun} '{rows[0][noun]}' at position 1 "
        f"in block 'block-1'"
    )
    assert not Vote.objects.exists() and Trial.objects.count() == 4 and Assignment.objects.count() == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_attention_check_may_join_a_planned_assignment(kind: str, tmp_path: Path) -> None:
    """A check is not a main vote: one more on a unit the rater already has is accepted."""
    study = kind_study(kind, tmp_path)
    a, _ = plan_r01(kind, study)
    extra = dict(rows_of(kind)[6], rater="r01", position="5")  # r02's check row, moved to r01
    result = import_rows(study, tmp_path, [extra], HEADERS[kind])
    assert (result.trials_created, result.assignments_reused, result.main_votes) == (1, 1, 0)
    t = Trial.objects.get(assignment=a, position=5)
    assert t.attention_expected == extra["attention"] and not t.is_repeat and t.vote is not None
    a.refresh_from_db()
    assert a.state == AssignmentState.ACTIVE  # four planned trials are still unanswered


# ---------------------------------------------------------------------------------------------
# Bad input: one line naming file, line and field; nothing written
# ---------------------------------------------------------------------------------------------

BAD_ROWS: list[tuple[str, str, int, dict[str, str], str]] = [
    # pairwise
    (
        "pairwise",
        "unknown comparison",
        2,
        {"comparison": "c9"},
        "votes.csv line 2, field 'comparison': unknown comparison 'c9' in study 'example-pairwise'",
    ),
    (
        "pairwise",
        "label of another kind",
        3,
        {"label": "YES"},
        "votes.csv line 3, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'YES'",
    ),
    (
        "pairwise",
        "brief disagrees",
        2,
        {"brief": "b2"},
        "votes.csv line 2, field 'brief': comparison 'c1' has brief 'b1', got 'b2'",
    ),
    (
        "pairwise",
        "item_a disagrees",
        2,
        {"item_a": "b1-gamma"},
        "votes.csv line 2, field 'item_a': comparison 'c1' has item_a 'b1-alpha', got 'b1-gamma'",
    ),
    (
        "pairwise",
        "system_b disagrees",
        3,
        {"system_b": "beta"},
        "votes.csv line 3, field 'system_b': comparison 'c2' has system_b 'alpha', got 'beta'",
    ),
    (
        "pairwise",
        "confidence missing",
        2,
        {"confidence": ""},
        "votes.csv line 2, field 'confidence': expected an integer 1–5, got ''",
    ),
    (
        "pairwise",
        "swapped",
        2,
        {"swapped": "yes"},
        "votes.csv line 2, field 'swapped': expected 0 or 1, got 'yes'",
    ),
    (
        "pairwise",
        "attention not an instructed answer",
        4,
        {"attention": "CANNOT_JUDGE"},
        "votes.csv line 4, field 'attention': expected empty (a data trial) or one of A, B, TIE",
    ),
    (
        "pairwise",
        "attention row marked repeat",
        4,
        {"repeat": "1"},
        "votes.csv line 4, field 'repeat': an attention check (attention 'B') is never a hidden repeat; expected 0",
    ),
    (
        "pairwise",
        "duplicate main vote",
        5,
        {"repeat": "0"},
        "votes.csv line 5, field 'repeat': rater 'r01' already has a main vote on comparison 'c1' (line 2)",
    ),
    (
        "pairwise",
        "repeat without main (a check is not one)",
        6,
        {"repeat": "1"},
        "votes.csv line 6, field 'repeat': a hidden repeat needs a main vote of rater 'r02' on comparison 'c1'",
    ),
    (
        "pairwise",
        "unit in two blocks",
        3,
        {"block": "block-2"},
        "votes.csv line 7, field 'block': comparison 'c2' is in block 'block-2' (line 3), got 'block-1'",
    ),
    # checklist
    (
        "checklist",
        "unknown predicate",
        2,
        {"predicate": "p9"},
        "votes.csv line 2, field 'predicate': unknown predicate 'p9' in study 'example-checklist'",
    ),
    (
        "checklist",
        "label of another kind",
        3,
        {"label": "A"},
        "votes.csv line 3, field 'label': expected one of YES, NO, UNCLEAR, got 'A'",
    ),
    (
        "checklist",
        "lowercase label",
        2,
        {"label": "yes"},
        "votes.csv line 2, field 'label': expected one of YES, NO, UNCLEAR, got 'yes'",
    ),
    (
        "checklist",
        "missing evidence",
        2,
        {"evidence": "  "},
        "votes.csv line 2, field 'evidence': empty; a checklist answer needs an evidence note",
    ),
    (
        "checklist",
        "item disagrees",
        2,
        {"item": "i2"},
        "votes.csv line 2, field 'item': predicate 'p1' has item 'i1', got 'i2'",
    ),
    (
        "checklist",
        "system disagrees",
        6,
        {"system": "beta"},
        "votes.csv line 6, field 'system': predicate 'p5' has system 'alpha', got 'beta'",
    ),
    (
        "checklist",
        "attention not an instructed answer",
        4,
        {"attention": "A"},
        "votes.csv line 4, field 'attention': expected empty (a data trial) or one of YES, NO, UNCLEAR",
    ),
    (
        "checklist",
        "attention row marked repeat",
        4,
        {"repeat": "1"},
        "votes.csv line 4, field 'repeat': an attention check (attention 'NO') is never a hidden repeat",
    ),
    (
        "checklist",
        "duplicate main vote",
        5,
        {"repeat": "0"},
        "votes.csv line 5, field 'repeat': rater 'r01' already has a main vote on predicate 'p1' (line 2)",
    ),
    (
        "checklist",
        "repeat without main (a check is not one)",
        7,
        {"repeat": "1"},
        "votes.csv line 7, field 'repeat': a hidden repeat needs a main vote of rater 'r02' on predicate 'p1'",
    ),
    (
        "checklist",
        "duplicate position",
        3,
        {"position": "1"},
        "votes.csv line 3, field 'position': rater 'r01' already has position 1 in block 'block-1' (line 2)",
    ),
    # rating
    (
        "rating",
        "unknown item",
        2,
        {"item": "b9-alpha"},
        "votes.csv line 2, field 'item': unknown item 'b9-alpha' in study 'example-rating'",
    ),
    (
        "rating",
        "rating above the scale",
        2,
        {"rating:aesthetics": "6"},
        "votes.csv line 2, field 'rating:aesthetics': expected an integer 1–5 (the study's scale), got '6'",
    ),
    (
        "rating",
        "rating below the scale",
        3,
        {"rating:brief_fidelity": "0"},
        "votes.csv line 3, field 'rating:brief_fidelity': expected an integer 1–5 (the study's scale), got '0'",
    ),
    (
        "rating",
        "rating not an integer",
        2,
        {"rating:aesthetics": "4.5"},
        "votes.csv line 2, field 'rating:aesthetics': expected an integer 1–5 (the study's scale), got '4.5'",
    ),
    (
        "rating",
        "rating missing",
        6,
        {"rating:brief_fidelity": ""},
        "votes.csv line 6, field 'rating:brief_fidelity': expected an integer 1–5 (the study's scale), got empty",
    ),
    (
        "rating",
        "brief disagrees",
        2,
        {"brief": "b2"},
        "votes.csv line 2, field 'brief': item 'b1-alpha' has brief 'b1', got 'b2'",
    ),
    (
        "rating",
        "attention off the scale",
        4,
        {"attention": "7"},
        "votes.csv line 4, field 'attention': expected empty (a data trial) or an integer 1–5",
    ),
    (
        "rating",
        "attention row marked repeat",
        4,
        {"repeat": "1"},
        "votes.csv line 4, field 'repeat': an attention check (attention '3') is never a hidden repeat",
    ),
    (
        "rating",
        "duplicate main vote",
        5,
        {"repeat": "0"},
        "votes.csv line 5, field 'repeat': rater 'r01' already has a main vote on item 'b1-alpha' (line 2)",
    ),
    (
        "rating",
        "repeat without main (a check is not one)",
        7,
        {"repeat": "1"},
        "votes.csv line 7, field 'repeat': a hidden repeat needs a main vote of rater 'r02' on item 'b1-alpha'",
    ),
    (
        "rating",
        "response_ms",
        2,
        {"response_ms": "1.5"},
        "votes.csv line 2, field 'response_ms': expected a non-negative integer or empty, got '1.5'",
    ),
]


@pytest.mark.parametrize(
    ("kind", "case", "line", "changes", "message"), BAD_ROWS, ids=[f"{b[0]}: {b[1]}" for b in BAD_ROWS]
)
def test_each_bad_row_is_refused_with_one_line_and_nothing_written(
    kind: str, case: str, line: int, changes: dict[str, str], message: str, tmp_path: Path
) -> None:
    study = kind_study(kind, tmp_path)
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, rows_with(kind, line, **changes), HEADERS[kind])
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(message)
    assert nothing_written()


PAIRWISE_REFERENCE_HEADER = tuple(EXAMPLE_ROWS[0])
BAD_HEADERS: list[tuple[str, str, tuple[str, ...], str]] = [
    (
        "rating",
        "missing rating column",
        HEADERS["rating"][:-1],
        "votes.csv line 1, field 'rating:brief_fidelity': missing required column",
    ),
    (
        "rating",
        "unknown dimension",
        (*HEADERS["rating"], "rating:colour"),
        "votes.csv line 1, field 'rating:colour': unknown rating column (the study's dimensions: aesthetics, "
        "brief_fidelity)",
    ),
    (
        "rating",
        "checklist header",
        HEADERS["checklist"],
        "votes.csv line 1, field 'predicate': a column of the checklist votes CSV, but study 'example-rating' is a "
        "rating study (expected item, brief, system, block, rater, position, repeat, attention, response_ms, "
        "rating:aesthetics, rating:brief_fidelity)",
    ),
    (
        "checklist",
        "rating header",
        HEADERS["rating"],
        "votes.csv line 1, field 'rating:aesthetics': a column of the rating votes CSV, but study "
        "'example-checklist' is a checklist study",
    ),
    (
        "checklist",
        "pairwise header",
        HEADERS["pairwise"],
        "votes.csv line 1, field 'comparison': a column of the pairwise votes CSV, but study 'example-checklist'",
    ),
    (
        "pairwise",
        'docs/protocol.md "Files" header',
        PAIRWISE_REFERENCE_HEADER,
        "votes.csv line 1, field 'page': a column of the pairwise_reference votes CSV, but study 'example-pairwise' "
        "is a pairwise study",
    ),
    (
        "pairwise",
        "missing attention",
        tuple(c for c in HEADERS["pairwise"] if c != "attention"),
        "votes.csv line 1, field 'attention': missing required column",
    ),
    (
        "checklist",
        "unknown column",
        (*HEADERS["checklist"], "notes"),
        "votes.csv line 1, field 'notes': unknown column (expected predicate, item,",
    ),
    (
        "checklist",
        "column twice",
        (*HEADERS["checklist"], "label"),
        "votes.csv line 1, field 'label': the column appears twice",
    ),
]


@pytest.mark.parametrize(
    ("kind", "case", "header", "message"), BAD_HEADERS, ids=[f"{b[0]}: {b[1]}" for b in BAD_HEADERS]
)
def test_header_problems_name_the_column(
    kind: str, case: str, header: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    study = kind_study(kind, tmp_path)
    rows = [{c: "1" for c in header}]
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, rows, header)
    assert str(info.value).startswith(message)
    assert nothing_written()


def test_several_problems_show_the_first_and_count_the_others(tmp_path: Path) -> None:
    study = kind_study("checklist", tmp_path)
    rows = rows_with("checklist", 3, label="MAYBE")
    rows[0]["evidence"] = ""
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, rows, HEADERS["checklist"])
    assert str(info.value) == (
        "votes.csv line 2, field 'evidence': empty; a checklist answer needs an evidence note "
        "(and 1 more problem in the file)"
    )


def test_rating_attention_is_stored_in_its_plain_integer_form(tmp_path: Path) -> None:
    study = kind_study("rating", tmp_path)
    import_rows(study, tmp_path, rows_with("rating", 4, attention="+3"), HEADERS["rating"])
    assert Trial.objects.get(assignment__rater__external_id="r01", position=3).attention_expected == "3"


# ---------------------------------------------------------------------------------------------
# pairwise_reference (docs/protocol.md "Files"): attention checks have no place in its columns
# ---------------------------------------------------------------------------------------------


def test_pairwise_reference_export_leaves_attention_checks_out(tmp_path: Path) -> None:
    study = make_study()
    votes_import_csv(study=study, path=write_votes_csv(tmp_path / "votes.csv", EXAMPLE_ROWS))
    a = Assignment.objects.get(rater__external_id="r01")
    check = Trial.objects.create(
        assignment=a,
        position=9,
        comparison=Comparison.objects.get(study=study, external_id="c2"),
        attention_expected="A",
    )
    Vote.objects.create(trial=check, label="A", confidence=3)
    out = tmp_path / "out.csv"
    assert votes_export_csv(study=study, path=out) == 5
    assert ("r01", "9") not in {(r["rater"], r["position"]) for r in read_csv(out)}


def test_pairwise_reference_rows_never_answer_a_planned_attention_check(tmp_path: Path) -> None:
    study = make_study()
    block = Block.objects.create(study=study, name="block-1")
    c1 = Comparison.objects.get(study=study, external_id="c1")
    BlockItem.objects.create(block=block, position=0, comparison=c1)
    rater = Rater.objects.create(study=study, external_id="r01")
    a = Assignment.objects.create(block=block, slot=0, rater=rater, state=AssignmentState.ACTIVE)
    Trial.objects.create(assignment=a, position=1, comparison=c1, attention_expected="A")
    with pytest.raises(ValidationFailed) as info:
        votes_import_csv(study=study, path=write_votes_csv(tmp_path / "votes.csv", [EXAMPLE_ROWS[0]]))
    assert str(info.value) == (
        "votes.csv line 2, field 'position': position 1 of rater 'r01' in block 'block-1' is a planned "
        "attention check, not a data trial"
    )
    assert not Vote.objects.exists()


# ---------------------------------------------------------------------------------------------
# The commands and the API serve every kind
# ---------------------------------------------------------------------------------------------


def test_commands_import_and_export_a_checklist_study(tmp_path: Path) -> None:
    kind_study("checklist", tmp_path)
    src = write_votes_csv(tmp_path / "votes.csv", rows_of("checklist"), HEADERS["checklist"])
    out = io.StringIO()
    call_command("import_votes", "example-checklist", str(src), stdout=out)
    assert "imported 7 votes (4 main, 1 hidden repeats)" in out.getvalue()
    dest = tmp_path / "export.csv"
    out = io.StringIO()
    call_command("export_votes", "example-checklist", str(dest), stdout=out)
    assert "wrote 7 votes" in out.getvalue()
    assert dest.read_text(encoding="utf-8") == src.read_text(encoding="utf-8")


def test_api_imports_and_exports_a_rating_study(client: Client, researcher: Any, tmp_path: Path) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    study = kind_study("rating", tmp_path)
    study.researchers.add(researcher)
    client.force_login(researcher)
    text = votes_csv_text(rows_of("rating"), HEADERS["rating"])
    response = client.post(
        "/api/studies/example-rating/votes/import/",
        {"file": SimpleUploadedFile("votes.csv", text.encode(), "text/csv")},
    )
    assert response.status_code == 201, response.content
    assert response.json()["rows"] == 7 and response.json()["repeat_votes"] == 1
    response = client.get("/api/studies/example-rating/votes/export/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and response.content.decode() == text
