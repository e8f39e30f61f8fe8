"""Human votes CSV (docs/protocol.md "Files"): import checks, all-or-nothing, round trip, selector, commands,
API access."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotation.errors import ValidationFailed
from annotation.models import (
    Assignment,
    AssignmentState,
    AuditEvent,
    Block,
    BlockItem,
    Comparison,
    Rater,
    Trial,
    Vote,
)
from annotation.selectors.votes import votes_frame
from annotation.services.votes_csv import votes_export_csv, votes_import_csv
from tests.annotation.factories import (
    BASE_COLUMNS,
    EXAMPLE_ROWS,
    HEADER,
    make_study,
    votes_csv_text,
    write_votes_csv,
)

pytestmark = pytest.mark.django_db


def rows_with(line: int, **changes: str) -> list[dict[str, str]]:
    """The example rows with the row at file ``line`` (header = line 1) changed."""
    rows = [dict(r) for r in EXAMPLE_ROWS]
    rows[line - 2].update(changes)
    return rows


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


def import_rows(study, tmp_path: Path, rows, header=HEADER, name: str = "votes.csv"):  # type: ignore[no-untyped-def]
    return votes_import_csv(study=study, path=write_votes_csv(tmp_path / name, rows, header))


def read_csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


# ---------------------------------------------------------------------------------------------
# Import: what it creates
# ---------------------------------------------------------------------------------------------


def test_import_creates_blocks_raters_assignments_trials_and_votes(tmp_path: Path) -> None:
    study = make_study()
    result = import_rows(study, tmp_path, EXAMPLE_ROWS)

    assert (result.rows, result.main_votes, result.repeat_votes) == (5, 4, 1)
    assert (result.blocks_created, result.raters_created, result.assignments_created) == (1, 2, 2)
    block = Block.objects.get(study=study)
    assert block.name == "block-1"
    assert list(BlockItem.objects.filter(block=block).values_list("comparison__external_id", "position")) == [
        ("c1", 0),
        ("c2", 1),
    ]
    assert set(Rater.objects.filter(study=study).values_list("external_id", "source")) == {
        ("r01", "import"),
        ("r02", "import"),
    }
    assignments = {a.rater.external_id: a for a in Assignment.objects.filter(block=block).select_related("rater")}
    assert {r: (a.slot, a.state) for r, a in assignments.items()} == {
        "r01": (0, AssignmentState.FINISHED),
        "r02": (1, AssignmentState.FINISHED),
    }
    repeat = Trial.objects.get(assignment=assignments["r01"], is_repeat=True)
    original = Trial.objects.get(assignment=assignments["r01"], comparison__external_id="c1", is_repeat=False)
    assert (repeat.position, repeat.repeat_of_id, repeat.swapped) == (3, original.pk, False)
    swapped = Trial.objects.get(assignment=assignments["r02"], comparison__external_id="c1")
    assert swapped.swapped is True and swapped.vote.label == "B"
    assert swapped.vote.axis_scores == {"GLOBAL_LAYOUT_FIDELITY": -1, "TEXT_VISUAL_PRESENTATION": 0, "TABLE": -1}
    cj = Vote.objects.get(trial__assignment=assignments["r02"], trial__comparison__external_id="c2")
    assert (cj.label, cj.axis_scores, cj.rationale, cj.response_ms) == ("CANNOT_JUDGE", {}, "image did not load", 4000)
    tie = Vote.objects.get(trial__assignment=assignments["r01"], trial__comparison__external_id="c2")
    assert tie.axis_scores == {"GLOBAL_LAYOUT_FIDELITY": 0, "TEXT_VISUAL_PRESENTATION": 0}  # TABLE inactive on e01
    event = AuditEvent.objects.get(action="votes.import")
    assert event.study == study and event.details["rows"] == 5 and event.target == "votes.csv"


def test_import_of_the_spec_example_file(tmp_path: Path, examples_dir: Path) -> None:
    study = make_study()
    result = votes_import_csv(study=study, path=examples_dir / "votes.csv")
    assert result.rows == 5
    out = tmp_path / "out.csv"
    assert votes_export_csv(study=study, path=out) == 5
    key = ("comparison", "rater", "repeat", "label", "confidence", "axis:GLOBAL_LAYOUT_FIDELITY", "axis:TABLE")
    want = sorted(tuple(r[k] for k in key) for r in read_csv(examples_dir / "votes.csv"))
    assert sorted(tuple(r[k] for k in key) for r in read_csv(out)) == want


def test_new_assignments_take_the_lowest_free_live_slot_in_order_of_first_appearance(tmp_path: Path) -> None:
    study = make_study()
    block = Block.objects.create(study=study, name="block-1")
    # The scheduler planned slots 0 and 2 (no rater yet); slot 1 is voided, so it is free.
    Assignment.objects.create(block=block, slot=0)
    Assignment.objects.create(block=block, slot=1, state=AssignmentState.VOIDED)
    Assignment.objects.create(block=block, slot=2)
    rows = [dict(r, rater={"r01": "zed", "r02": "amy"}[r["rater"]]) for r in EXAMPLE_ROWS]
    import_rows(study, tmp_path, rows)
    slots = dict(
        Assignment.objects.filter(block=block, rater__isnull=False).values_list("rater__external_id", "slot")
    )
    assert slots == {"zed": 1, "amy": 3}


def test_import_answers_the_planned_trials_of_a_raters_live_assignment(tmp_path: Path) -> None:
    study = make_study()
    block = Block.objects.create(study=study, name="block-1")
    c1, c2 = (Comparison.objects.get(study=study, external_id=c) for c in ("c1", "c2"))
    BlockItem.objects.create(block=block, position=0, comparison=c1)
    BlockItem.objects.create(block=block, position=1, comparison=c2)
    rater = Rater.objects.create(study=study, external_id="r01", source=Rater.Source.LINK)
    a = Assignment.objects.create(block=block, slot=0, rater=rater, state=AssignmentState.ACTIVE)
    t1 = Trial.objects.create(assignment=a, position=1, comparison=c1)
    t2 = Trial.objects.create(assignment=a, position=2, comparison=c2, swapped=True)
    t3 = Trial.objects.create(assignment=a, position=3, comparison=c1, is_repeat=True, repeat_of=t1)

    result = import_rows(study, tmp_path, [r for r in EXAMPLE_ROWS if r["rater"] == "r01"])

    assert (result.assignments_created, result.assignments_reused, result.trials_created) == (0, 1, 0)
    assert result.trials_answered == 3 and result.block_items_created == 0
    assert {t.pk: t.vote.label for t in (t1, t2, t3)} == {t1.pk: "A", t2.pk: "TIE", t3.pk: "A"}
    a.refresh_from_db()
    assert a.state == AssignmentState.FINISHED and a.finished_at is not None
    assert Rater.objects.get(pk=rater.pk).source == Rater.Source.LINK  # existing rater kept


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"position": "2"}, "votes.csv line 2, field 'position': position 2 of rater 'r01' in block 'block-1' is a "
                            "planned trial of another comparison"),
        ({"swapped": "1"}, "votes.csv line 2, field 'position': position 1 of rater 'r01' in block 'block-1' is a "
                           "planned trial of another comparison, orientation or repeat flag"),
        ({"position": "9"}, "votes.csv line 2, field 'position': rater 'r01' already has comparison 'c1' at position 1"),
    ],
)
def test_rows_that_contradict_a_planned_assignment_are_refused(
    tmp_path: Path, changes: dict[str, str], message: str
) -> None:
    study = make_study()
    block = Block.objects.create(study=study, name="block-1")
    c1, c2 = (Comparison.objects.get(study=study, external_id=c) for c in ("c1", "c2"))
    rater = Rater.objects.create(study=study, external_id="r01")
    a = Assignment.objects.create(block=block, slot=0, rater=rater, state=AssignmentState.ACTIVE)
    Trial.objects.create(assignment=a, position=1, comparison=c1)
    Trial.objects.create(assignment=a, position=2, comparison=c2, swapped=True)
    row = dict(EXAMPLE_ROWS[0], **changes)
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, [row])
    assert str(info.value).startswith(message)
    assert not Vote.objects.exists() and Trial.objects.count() == 2 and Assignment.objects.count() == 1


def test_a_second_repeat_against_a_stored_one_is_refused(tmp_path: Path) -> None:
    study = make_study()
    import_rows(study, tmp_path, EXAMPLE_ROWS, name="first.csv")
    with pytest.raises(
        ValidationFailed, match=r"^second\.csv line 2, field 'repeat': rater 'r01' already has a hidden repeat of comparison 'c1'"
    ):
        import_rows(study, tmp_path, [dict(EXAMPLE_ROWS[2], position="8")], name="second.csv")
    assert Vote.objects.count() == 5


def test_a_repeat_may_point_at_a_main_vote_stored_by_an_earlier_import(tmp_path: Path) -> None:
    study = make_study()
    first = [r for r in EXAMPLE_ROWS if r["repeat"] == "0"]
    second = [r for r in EXAMPLE_ROWS if r["repeat"] == "1"]
    import_rows(study, tmp_path, first, name="first.csv")
    import_rows(study, tmp_path, second, name="second.csv")
    repeat = Trial.objects.get(is_repeat=True)
    assert repeat.repeat_of.comparison.external_id == "c1"
    assert repeat.repeat_of.assignment_id == repeat.assignment_id
    assert Assignment.objects.count() == 2  # the second file reused r01's assignment


def test_an_export_reimported_into_the_same_study_is_refused_without_writing(tmp_path: Path) -> None:
    study = make_study()
    import_rows(study, tmp_path, EXAMPLE_ROWS)
    out = tmp_path / "out.csv"
    votes_export_csv(study=study, path=out)
    with pytest.raises(ValidationFailed, match=r"^out\.csv line 2, field 'position': rater 'r01' already answered"):
        votes_import_csv(study=study, path=out)
    assert Vote.objects.count() == 5


# ---------------------------------------------------------------------------------------------
# Round trip
# ---------------------------------------------------------------------------------------------


def test_export_then_import_reproduces_the_same_votes(tmp_path: Path) -> None:
    study = make_study()
    rows = [*EXAMPLE_ROWS, dict(EXAMPLE_ROWS[0], rater="r03", position="0", rationale='multi\nline, "quoted"')]
    import_rows(study, tmp_path, rows)
    first = tmp_path / "first.csv"
    assert votes_export_csv(study=study, path=first) == 6

    copy = make_study("copy")
    votes_import_csv(study=copy, path=first)
    second = tmp_path / "second.csv"
    assert votes_export_csv(study=copy, path=second) == 6
    assert second.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")
    # protocol columns only, in order (nothing revised: no optional revision columns).
    assert list(read_csv(first)[0]) == list(HEADER)
    exported = {(r["rater"], r["comparison"], r["repeat"]): r for r in read_csv(first)}
    for row in rows:
        got = exported[row["rater"], row["comparison"], row["repeat"]]
        assert {k: got[k] for k in HEADER if k != "block"} == {k: row.get(k, "") for k in HEADER if k != "block"}
    frame_a = votes_frame(study=study)
    frame_b = votes_frame(study=copy)
    assert frame_a.equals(frame_b)


def test_voided_assignments_are_left_out_of_the_export_and_the_frame(tmp_path: Path) -> None:
    study = make_study()
    import_rows(study, tmp_path, EXAMPLE_ROWS)
    Assignment.objects.filter(rater__external_id="r02").update(state=AssignmentState.VOIDED)
    out = tmp_path / "out.csv"
    assert votes_export_csv(study=study, path=out) == 3
    assert {r["rater"] for r in read_csv(out)} == {"r01"}
    assert set(votes_frame(study=study)["rater"]) == {"r01"}
    full = votes_frame(study=study, include_voided=True)
    assert len(full) == 5 and full["voided"].sum() == 2


def test_an_empty_export_imports_again(tmp_path: Path) -> None:
    study = make_study()
    out = tmp_path / "empty.csv"
    assert votes_export_csv(study=study, path=out) == 0
    assert out.read_text().strip() == ",".join(HEADER)
    assert votes_import_csv(study=make_study("other"), path=out).rows == 0


# ---------------------------------------------------------------------------------------------
# Malformed input: one line naming file, line and field; nothing written
# ---------------------------------------------------------------------------------------------


BAD_ROWS = [
    ("label", 3, {"label": "MAYBE"},
     "votes.csv line 3, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'MAYBE'"),
    ("lowercase label", 2, {"label": "a"}, "votes.csv line 2, field 'label': expected one of"),
    ("unknown comparison", 4, {"comparison": "c9"},
     "votes.csv line 4, field 'comparison': unknown comparison 'c9' in study 'example'"),
    ("page", 2, {"page": "e01"}, "votes.csv line 2, field 'page': comparison 'c1' has page 'e00', got 'e01'"),
    ("system_a", 2, {"system_a": "gamma"}, "votes.csv line 2, field 'system_a': comparison 'c1' has system_a 'alpha'"),
    ("system_b", 5, {"system_b": "alpha"}, "votes.csv line 5, field 'system_b': comparison 'c1' has system_b 'beta'"),
    ("empty block", 2, {"block": " "}, "votes.csv line 2, field 'block': empty; expected a block name"),
    ("empty rater", 2, {"rater": ""}, "votes.csv line 2, field 'rater': empty; expected a rater id"),
    ("confidence high", 2, {"confidence": "6"}, "votes.csv line 2, field 'confidence': expected an integer 1–5, got '6'"),
    ("confidence zero", 2, {"confidence": "0"}, "field 'confidence': expected an integer 1–5, got '0'"),
    ("confidence text", 2, {"confidence": "4.0"}, "field 'confidence': expected an integer 1–5, got '4.0'"),
    ("confidence empty on a valid label", 2, {"confidence": ""}, "line 2, field 'confidence': expected an integer 1–5"),
    ("response_ms negative", 2, {"response_ms": "-5"}, "line 2, field 'response_ms': expected a non-negative integer"),
    ("response_ms float", 2, {"response_ms": "1.5"}, "line 2, field 'response_ms': expected a non-negative integer"),
    ("swapped", 2, {"swapped": "2"}, "votes.csv line 2, field 'swapped': expected 0 or 1, got '2'"),
    ("repeat", 2, {"repeat": "yes"}, "votes.csv line 2, field 'repeat': expected 0 or 1, got 'yes'"),
    ("position", 2, {"position": "-1"}, "votes.csv line 2, field 'position': expected a non-negative integer"),
    ("axis out of range", 2, {"axis:TABLE": "3"}, "votes.csv line 2, field 'axis:TABLE': expected an integer −2…2"),
    ("axis not integer", 2, {"axis:GLOBAL_LAYOUT_FIDELITY": "1.5"},
     "line 2, field 'axis:GLOBAL_LAYOUT_FIDELITY': expected an integer −2…2"),
    ("active axis missing", 2, {"axis:TABLE": ""},
     "votes.csv line 2, field 'axis:TABLE': expected an integer −2…2 (axis active on page 'e00'), got empty"),
    ("inactive axis scored", 3, {"axis:TABLE": "1"},
     "votes.csv line 3, field 'axis:TABLE': must be empty: the axis is inactive on page 'e01'"),
    ("CANNOT_JUDGE with scores", 6, {"axis:GLOBAL_LAYOUT_FIDELITY": "0"},
     "votes.csv line 6, field 'axis:GLOBAL_LAYOUT_FIDELITY': must be empty for a CANNOT_JUDGE vote"),
    ("two main votes", 4, {"repeat": "0", "position": "9"},
     "votes.csv line 4, field 'repeat': rater 'r01' already has a main vote on comparison 'c1' (line 2)"),
    ("duplicate position", 3, {"position": "1"},
     "votes.csv line 3, field 'position': rater 'r01' already has position 1 in block 'block-1' (line 2)"),
    ("comparison in two blocks", 5, {"block": "block-2"},
     "votes.csv line 5, field 'block': comparison 'c1' is in block 'block-1' (line 2), got 'block-2'"),
]


@pytest.mark.parametrize(("kind", "line", "changes", "message"), BAD_ROWS, ids=[b[0] for b in BAD_ROWS])
def test_each_malformed_row_is_refused_with_one_line_and_nothing_written(
    tmp_path: Path, kind: str, line: int, changes: dict[str, str], message: str
) -> None:
    study = make_study()
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, rows_with(line, **changes))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(message) if message.startswith("votes.csv") else message in text
    assert nothing_written()


def test_the_contract_bad_label_message_is_exact(tmp_path: Path) -> None:
    study = make_study()
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, rows_with(3, label="MAYBE"))
    assert str(info.value) == (
        "votes.csv line 3, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'MAYBE'"
    )


def test_second_hidden_repeat_is_refused(tmp_path: Path) -> None:
    study = make_study()
    rows = [*EXAMPLE_ROWS, dict(EXAMPLE_ROWS[2], position="7")]
    with pytest.raises(ValidationFailed, match=r"^votes\.csv line 7, field 'repeat': rater 'r01' already has a hidden repeat"):
        import_rows(study, tmp_path, rows)
    assert nothing_written()


def test_repeat_without_its_main_vote_is_refused(tmp_path: Path) -> None:
    study = make_study()
    rows = [dict(EXAMPLE_ROWS[2], rater="r05")]
    with pytest.raises(
        ValidationFailed,
        match=r"^votes\.csv line 2, field 'repeat': a hidden repeat needs a main vote of rater 'r05' on comparison 'c1'",
    ):
        import_rows(study, tmp_path, rows)
    assert nothing_written()


def test_comparison_already_in_another_block_is_refused(tmp_path: Path) -> None:
    study = make_study()
    other = Block.objects.create(study=study, name="block-9")
    BlockItem.objects.create(block=other, position=0, comparison=Comparison.objects.get(study=study, external_id="c2"))
    with pytest.raises(
        ValidationFailed, match=r"^votes\.csv line 3, field 'block': comparison 'c2' belongs to block 'block-9'"
    ):
        import_rows(study, tmp_path, EXAMPLE_ROWS)
    assert not Vote.objects.exists() and Block.objects.count() == 1


def test_several_problems_show_the_first_and_count_the_others(tmp_path: Path) -> None:
    study = make_study()
    rows = rows_with(2, label="X")
    rows[2]["confidence"] = "9"
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, rows)
    assert str(info.value).startswith("votes.csv line 2, field 'label'")
    assert str(info.value).endswith("(and 1 more problem in the file)")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ((*HEADER, "notes"), "votes.csv line 1, field 'notes': unknown column"),
        ((*HEADER, "axis:COLOR"), "votes.csv line 1, field 'axis:COLOR': unknown axis column"),
        (tuple(c for c in HEADER if c != "label"), "votes.csv line 1, field 'label': missing required column"),
        (tuple(c for c in HEADER if c != "axis:TABLE"), "votes.csv line 1, field 'axis:TABLE': missing required column"),
        ((*HEADER, "label"), "votes.csv line 1, field 'label': the column appears twice"),
    ],
)
def test_header_problems_name_the_column(tmp_path: Path, header: tuple[str, ...], message: str) -> None:
    study = make_study()
    with pytest.raises(ValidationFailed) as info:
        import_rows(study, tmp_path, EXAMPLE_ROWS, header=header)
    assert str(info.value).startswith(message)
    assert nothing_written()


def test_wrong_field_count_and_non_utf8_and_empty_file(tmp_path: Path) -> None:
    study = make_study()
    text = votes_csv_text(EXAMPLE_ROWS).splitlines()
    text[3] = text[3] + ",extra"
    path = tmp_path / "votes.csv"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ValidationFailed, match=r"^votes\.csv line 4: expected 16 fields as in the header, got 17"):
        votes_import_csv(study=study, path=path)
    path.write_bytes(votes_csv_text(EXAMPLE_ROWS).encode() + b"c1,\xff\n")
    with pytest.raises(ValidationFailed, match=r"^votes\.csv line 7: not UTF-8 text"):
        votes_import_csv(study=study, path=path)
    path.write_text("")
    with pytest.raises(ValidationFailed, match=r"^votes\.csv line 1: empty file"):
        votes_import_csv(study=study, path=path)
    assert nothing_written()


def test_line_numbers_count_physical_lines_of_multiline_rationales(tmp_path: Path) -> None:
    study = make_study()
    rows = rows_with(2, rationale="first\nsecond\nthird")
    rows[1]["label"] = "NOPE"  # the record that starts on physical line 5
    with pytest.raises(ValidationFailed, match=r"^votes\.csv line 5, field 'label'"):
        import_rows(study, tmp_path, rows)


def test_cannot_judge_may_have_empty_confidence(tmp_path: Path) -> None:
    study = make_study()
    import_rows(study, tmp_path, rows_with(6, confidence=""))
    assert Vote.objects.get(label="CANNOT_JUDGE").confidence is None
    out = tmp_path / "out.csv"
    votes_export_csv(study=study, path=out)
    votes_import_csv(study=make_study("again"), path=out)  # and it round-trips


def test_csv_with_bom_and_crlf_is_read(tmp_path: Path) -> None:
    study = make_study()
    path = tmp_path / "votes.csv"
    path.write_bytes(b"\xef\xbb\xbf" + votes_csv_text(EXAMPLE_ROWS).replace("\n", "\r\n").encode())
    assert votes_import_csv(study=study, path=path).rows == 5


# ---------------------------------------------------------------------------------------------
# Selector
# ---------------------------------------------------------------------------------------------


def test_votes_frame_columns_and_types(tmp_path: Path) -> None:
    study = make_study()
    import_rows(study, tmp_path, EXAMPLE_ROWS)
    frame = votes_frame(study=study)
    assert list(frame.columns)[:13] == [
        "comparison", "page", "block", "rater", "system_a", "system_b", "position", "swapped", "is_repeat",
        "label", "confidence", "response_ms", "rationale",
    ]
    assert [c for c in frame.columns if c.startswith("axis:")] == [
        "axis:GLOBAL_LAYOUT_FIDELITY", "axis:TEXT_VISUAL_PRESENTATION", "axis:TABLE"
    ]
    assert frame["swapped"].dtype == bool and frame["is_repeat"].dtype == bool
    assert frame["confidence"].dtype == float and frame["axis:TABLE"].dtype == float
    assert len(frame) == 5 and frame["is_repeat"].sum() == 1
    r02_c2 = frame[(frame["rater"] == "r02") & (frame["comparison"] == "c2")].iloc[0]
    assert r02_c2["label"] == "CANNOT_JUDGE" and np.isnan(r02_c2["axis:GLOBAL_LAYOUT_FIDELITY"])
    r01_c2 = frame[(frame["rater"] == "r01") & (frame["comparison"] == "c2")].iloc[0]
    assert r01_c2["axis:GLOBAL_LAYOUT_FIDELITY"] == 0.0 and np.isnan(r01_c2["axis:TABLE"])
    assert r01_c2["swapped"] and r01_c2["system_a"] == "gamma"


def test_votes_frame_is_one_query(tmp_path: Path, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    study = make_study()
    import_rows(study, tmp_path, EXAMPLE_ROWS)
    with django_assert_max_num_queries(2):  # the axes and the votes
        votes_frame(study=study)


@pytest.mark.slow
def test_ten_thousand_votes_round_trip_through_the_csv(tmp_path: Path) -> None:
    """10,472 votes: frame, export and re-import agree row for row (speed: benchmarks/bench_votes_csv.py)."""
    from tests.annotation.factories import make_rated_study

    study = make_rated_study(
        "big", n_pages=200, n_blocks=8, raters_per_block=17, tmp_dir=tmp_path, seed=3
    )  # 600 comparisons, 8 blocks × 17 raters × (75 + 2) = 10,472 rows
    frame = votes_frame(study=study)
    assert len(frame) == Vote.objects.count() >= 10_000
    n = votes_export_csv(study=study, path=tmp_path / "big.csv")
    assert n == len(frame)
    copy = make_rated_study_shell(study)
    votes_import_csv(study=copy, path=tmp_path / "big.csv")
    again = votes_frame(study=copy)
    assert len(again) == n
    columns = ["comparison", "rater", "label", "is_repeat"]
    key = lambda f: sorted(map(tuple, f[columns].astype(str).to_numpy().tolist()))  # noqa: E731
    assert key(again) == key(frame)


def make_rated_study_shell(study):  # type: ignore[no-untyped-def]
    """A copy of ``study``'s pages, candidates and comparisons (no votes), under a new slug."""
    from annotation.models import Axis, Candidate, Page, Study, System

    copy = Study.objects.create(slug=f"{study.slug}-copy", title="copy", seed=study.seed)
    for axis in Axis.objects.filter(study=study):
        Axis.objects.create(study=copy, axis_id=axis.axis_id, scope=axis.scope, position=axis.position)
    systems = {s.pk: System.objects.create(study=copy, external_id=s.external_id, name=s.name) for s in study.systems.all()}
    pages = {p.pk: Page.objects.create(study=copy, external_id=p.external_id, targets=p.targets) for p in study.pages.all()}
    cands = {
        c.pk: Candidate.objects.create(page=pages[c.page_id], system=systems[c.system_id])
        for c in Candidate.objects.filter(page__study=study)
    }
    Comparison.objects.bulk_create(
        Comparison(study=copy, external_id=c.external_id, page=pages[c.page_id], candidate_a=cands[c.candidate_a_id],
                   candidate_b=cands[c.candidate_b_id])
        for c in Comparison.objects.filter(study=study)
    )
    return copy


def test_the_example_bundle_takes_the_example_votes(tmp_path: Path, examples_dir: Path) -> None:
    bundles = pytest.importorskip("annotation.services.bundles.importing")
    study = bundles.study_import_bundle(path=examples_dir / "bundle")
    assert votes_import_csv(study=study, path=examples_dir / "votes.csv").rows == 5
    out = tmp_path / "out.csv"
    votes_export_csv(study=study, path=out)
    assert sorted(map(tuple, (r.values() for r in read_csv(out)))) == sorted(
        map(tuple, (r.values() for r in read_csv(examples_dir / "votes.csv")))
    )


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


def test_commands_import_and_export(tmp_path: Path) -> None:
    make_study()
    src = write_votes_csv(tmp_path / "votes.csv", EXAMPLE_ROWS)
    out = io.StringIO()
    call_command("import_votes", "example", str(src), stdout=out)
    assert "imported 5 votes (4 main, 1 hidden repeats)" in out.getvalue()
    dest = tmp_path / "export.csv"
    out = io.StringIO()
    call_command("export_votes", "example", str(dest), stdout=out)
    assert "wrote 5 votes" in out.getvalue() and len(read_csv(dest)) == 5


def test_command_errors_are_one_line(tmp_path: Path) -> None:
    make_study()
    bad = write_votes_csv(tmp_path / "bad.csv", rows_with(3, label="MAYBE"))
    with pytest.raises(CommandError) as info:
        call_command("import_votes", "example", str(bad))
    assert str(info.value) == "bad.csv line 3, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'MAYBE'"
    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("import_votes", "nope", str(bad))
    with pytest.raises(CommandError, match=r"^missing\.csv: cannot read the file"):
        call_command("import_votes", "example", str(tmp_path / "missing.csv"))
    assert nothing_written()


# ---------------------------------------------------------------------------------------------
# API (personas)
# ---------------------------------------------------------------------------------------------


def _upload(client: Client, slug: str, text: str, name: str = "votes.csv"):  # type: ignore[no-untyped-def]
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(
        f"/api/studies/{slug}/votes/import/", {"file": SimpleUploadedFile(name, text.encode(), "text/csv")}
    )


def test_api_researcher_imports_and_exports(client: Client, researcher) -> None:  # type: ignore[no-untyped-def]
    make_study(researchers=[researcher])
    client.force_login(researcher)
    response = _upload(client, "example", votes_csv_text(EXAMPLE_ROWS))
    assert response.status_code == 201, response.content
    assert response.json()["rows"] == 5 and response.json()["raters_created"] == 2
    assert AuditEvent.objects.get(action="votes.import").actor == researcher
    response = client.get("/api/studies/example/votes/export/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="example-votes.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 5 and list(rows[0]) == list(HEADER)


def test_api_bad_file_is_a_400_with_the_one_line_reason(client: Client, researcher) -> None:  # type: ignore[no-untyped-def]
    make_study(researchers=[researcher])
    client.force_login(researcher)
    response = _upload(client, "example", votes_csv_text(rows_with(3, label="MAYBE")), name="../my votes.csv")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "my_votes.csv line 3, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'MAYBE'"
    }
    response = client.post("/api/studies/example/votes/import/", {})
    assert response.status_code == 400 and "'file'" in response.json()["detail"]
    assert nothing_written()


def test_api_other_researcher_gets_404(client: Client, researcher, other_researcher) -> None:  # type: ignore[no-untyped-def]
    make_study(researchers=[researcher])
    make_study("theirs", researchers=[other_researcher])
    client.force_login(other_researcher)
    assert _upload(client, "example", votes_csv_text(EXAMPLE_ROWS)).status_code == 404
    assert client.get("/api/studies/example/votes/export/").status_code == 404
    assert client.get("/api/studies/theirs/votes/export/").status_code == 200
    assert not Vote.objects.exists()


def test_api_rater_and_anonymous_are_refused(client: Client, rater_user) -> None:  # type: ignore[no-untyped-def]
    make_study()
    assert client.get("/api/studies/example/votes/export/").status_code in (401, 403)
    assert _upload(client, "example", votes_csv_text(EXAMPLE_ROWS)).status_code in (401, 403)
    client.force_login(rater_user)
    assert client.get("/api/studies/example/votes/export/").status_code == 403
    assert _upload(client, "example", votes_csv_text(EXAMPLE_ROWS)).status_code == 403
    assert not Vote.objects.exists()


def test_api_admin_sees_every_study(client: Client, admin_user) -> None:  # type: ignore[no-untyped-def]
    make_study()
    client.force_login(admin_user)
    assert client.get("/api/studies/example/votes/export/").status_code == 200


def test_base_columns_match_the_spec() -> None:
    from annotation.kinds.pairwise_reference import VOTES_BASE_COLUMNS

    assert VOTES_BASE_COLUMNS == BASE_COLUMNS
