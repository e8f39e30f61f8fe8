"""Scheduling of the other study kinds (docs/study-kinds.md "Scheduling"): counterbalanced sections and items,
hidden repeats, attention checks."""

from __future__ import annotations

import io
import itertools
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.errors import ArbiterError, ValidationFailed
from annotation.models import Assignment, BlockItem, Study, Trial
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.scheduling import (
    assignment_plan_copy,
    blocks_schedule,
    counterbalanced_order,
    plan_counterbalanced_assignment,
    schedule_csv_text,
    schedule_units,
    williams_row,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def williams_square(m: int) -> list[list[int]]:
    period = m if m % 2 == 0 else 2 * m
    return [williams_row(m, r) for r in range(period)]


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 6, 7, 8])
def test_williams_rows_are_permutations_balanced_for_position_and_carry_over(m: int) -> None:
    rows = williams_square(m)
    for row in rows:
        assert sorted(row) == list(range(m))
    # Every unit in every position equally often.
    per_position = [Counter(row[p] for row in rows) for p in range(m)]
    assert all(set(c.values()) == {len(rows) // m} for c in per_position)
    # Every ordered pair (i then j, i != j) adjacent equally often: first-order carry-over balance.
    if m > 1:
        pairs = Counter((row[p], row[p + 1]) for row in rows for p in range(m - 1))
        assert set(pairs) == {(i, j) for i in range(m) for j in range(m) if i != j}
        assert len(set(pairs.values())) == 1


def test_counterbalanced_order_keeps_sections_together_and_varies_by_slot() -> None:
    sections = [[0, 1, 2], [3, 4], [5, 6, 7, 8]]
    orders = [counterbalanced_order(sections, slot=s) for s in range(6)]
    for order in orders:
        assert sorted(order) == list(range(9))
        # Members of a section are contiguous.
        section_of = {u: k for k, members in enumerate(sections) for u in members}
        runs = [section_of[u] for u in order]
        assert [k for k, _ in itertools.groupby(runs)] == sorted(set(runs), key=runs.index)
    # Over the Williams period (6 rows for 3 sections) every section opens the assignment twice.
    section_of = {u: k for k, members in enumerate(sections) for u in members}
    assert Counter(section_of[o[0]] for o in orders) == {0: 2, 1: 2, 2: 2}


@pytest.mark.parametrize("seed", range(8))
def test_plan_places_repeats_after_min_gap_and_checks_apart(seed: int) -> None:
    sections = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11]]
    plan = plan_counterbalanced_assignment(sections=sections, slot=seed, seed=seed, repeats=2, min_gap=4, checks=3,
                                answers=("A", "B", "TIE"), pairwise=True)
    assert [p.position for p in plan] == list(range(1, len(plan) + 1))
    main = [p for p in plan if p.repeat_of_position is None and not p.attention]
    checks = [p for p in plan if p.attention]
    repeats = [p for p in plan if p.repeat_of_position is not None]
    assert sorted(p.index for p in main) == list(range(12))
    assert len(checks) == 3 and all(p.attention in ("A", "B", "TIE") for p in checks)
    assert all(p.repeat_of_position is None for p in checks)
    assert plan[0].attention == ""  # never the first trial
    by_position = {p.position: p for p in plan}
    for r in repeats:
        original = by_position[r.repeat_of_position]  # type: ignore[index]
        assert original.index == r.index and original.swapped == r.swapped and not original.attention
        assert r.position - original.position >= 4
    # Display sides alternate across slots for the same unit (docs/protocol.md "Planning the human study"
    # rule).
    other = plan_counterbalanced_assignment(sections=sections, slot=seed + 1, seed=seed, repeats=0, min_gap=4, checks=0,
                                 answers=("A",), pairwise=True)
    side = {p.index: p.swapped for p in main}
    assert all(side[p.index] != p.swapped for p in other)


def test_plan_refuses_repeats_that_cannot_be_placed() -> None:
    with pytest.raises(ArbiterError, match="at most 2 fit"):
        plan_counterbalanced_assignment(sections=[[0, 1, 2]], slot=0, seed=1, repeats=3, min_gap=2, checks=0,
                             answers=("YES",), pairwise=False)


def _schedule(kind: str, *, checks: int = 1, repeats: int = 1, raters: list[int] | None = None) -> Study:
    study = study_import_bundle(path=FIXTURES / kind)
    n = len(schedule_units(study))
    blocks_schedule(study=study, blocks=1, block_size=n, repeats=repeats, min_gap=2, raters=raters or [2],
                    seed=11, checks=checks)
    study.refresh_from_db()
    return study


@pytest.mark.django_db
@pytest.mark.parametrize(("kind", "field"), [("pairwise", "comparison"), ("checklist", "predicate"),
                                             ("rating", "candidate")])
def test_schedule_creates_units_of_the_kind_with_checks_and_repeats(kind: str, field: str) -> None:
    study = _schedule(kind, checks=2)
    n = len(schedule_units(study))
    items = BlockItem.objects.filter(block__study=study)
    assert items.count() == n and all(getattr(i, f"{field}_id") for i in items)
    for assignment in Assignment.objects.filter(block__study=study):
        trials = list(assignment.trials.order_by("position"))
        assert len(trials) == n + 1 + 2
        data = [t for t in trials if not t.is_repeat and not t.attention_expected]
        assert sorted(getattr(t, f"{field}_id") for t in data) == sorted(getattr(i, f"{field}_id") for i in items)
        checks = [t for t in trials if t.attention_expected]
        assert len(checks) == 2 and not any(t.is_repeat for t in checks)
        if kind != "pairwise":
            assert not any(t.swapped for t in trials)
    assert study.options["attention_checks"] == 2
    if kind == "rating":
        allowed = {str(v) for v in range(1, 6)}
        assert {t.attention_expected for t in Trial.objects.filter(assignment__block__study=study)} - {""} <= allowed


@pytest.mark.django_db
def test_checklist_sections_are_the_predicates_of_one_image() -> None:
    study = _schedule("checklist", checks=0, repeats=0, raters=[4])
    for assignment in Assignment.objects.filter(block__study=study):
        items = [t.predicate.candidate_id for t in assignment.trials.order_by("position").select_related("predicate")
                 if t.predicate is not None]
        # Each image's predicates are asked one after another.
        assert len([k for k, _ in itertools.groupby(items)]) == len(set(items))
    first_items = {a.trials.order_by("position").first().predicate.candidate_id  # type: ignore[union-attr]
                   for a in Assignment.objects.filter(block__study=study)}
    assert len(first_items) > 1  # section order differs between slots


@pytest.mark.django_db
def test_schedule_csv_names_items_predicates_and_checks() -> None:
    study = _schedule("checklist", checks=1, repeats=0)
    text = schedule_csv_text(study=study)
    header, *rows = text.strip().splitlines()
    assert header.endswith(",item,predicate,attention")
    assert any(r.endswith((",YES", ",NO", ",UNCLEAR")) for r in rows)
    assert all(",p" in r for r in rows)


@pytest.mark.django_db
def test_reopened_slot_copies_units_and_checks() -> None:
    study = _schedule("checklist", checks=2)
    source = Assignment.objects.filter(block__study=study).first()
    assert source is not None
    Assignment.objects.filter(pk=source.pk).update(state="voided")
    copy = assignment_plan_copy(source=source)

    def shape(a: Assignment) -> list[tuple[object, ...]]:
        return [(t.position, t.predicate_id, t.attention_expected, t.is_repeat,
                 t.repeat_of.position if t.repeat_of else None)
                for t in a.trials.order_by("position").select_related("repeat_of")]

    assert shape(copy) == shape(source)


@pytest.mark.django_db
def test_too_few_units_and_reference_checks_are_refused() -> None:
    study = study_import_bundle(path=FIXTURES / "rating")
    with pytest.raises(ArbiterError, match=r"has 6 items with an image, fewer than 2 blocks × 4 = 8 \(at most --block-size 3"):
        blocks_schedule(study=study, blocks=2, block_size=4, repeats=0, min_gap=1, raters=[1, 1], seed=1)
    assert not study.blocks.exists()


@pytest.mark.django_db
def test_schedule_command_defaults_checklist_raters_to_k() -> None:
    study = study_import_bundle(path=FIXTURES / "checklist")
    n = len(schedule_units(study))
    out = io.StringIO()
    call_command("schedule_blocks", study.slug, "--blocks", "1", "--block-size", str(n), "--repeats", "0",
                 "--min-gap", "1", "--checks", "1", stdout=out)
    assert f"block-1: {n} predicates, 3 planned assignments, {n + 1} trials each" in out.getvalue()
    assert Assignment.objects.filter(block__study=study).count() == study.options["k"] == 3
    with pytest.raises(CommandError, match="already has 1 blocks"):
        call_command("schedule_blocks", study.slug, "--blocks", "1", "--block-size", "1")


@pytest.mark.django_db
def test_attention_checks_are_bounded_by_the_block_size() -> None:
    study = study_import_bundle(path=FIXTURES / "rating")
    with pytest.raises(ValidationFailed, match=r"field 'checks': must be between 0 and the block size \(6\)"):
        blocks_schedule(study=study, blocks=1, block_size=6, repeats=0, min_gap=1, raters=[1], seed=1, checks=7)
    assert not study.blocks.exists()
