"""The human schedule (docs/protocol.md "Planning the human study"): disjoint blocks, planned assignments,
alternation, repeats, export."""

from __future__ import annotations

import csv
import io
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ArbiterError, ValidationFailed
from annotation.kinds.pairwise_reference import eligible_comparisons
from annotation.models import (
    Assignment,
    AssignmentState,
    AuditEvent,
    Block,
    BlockItem,
    ComparisonSet,
    System,
    Trial,
)
from annotation.services.scheduling import (
    SCHEDULE_CSV_COLUMNS,
    blocks_schedule,
    plan_assignment,
    schedule_export_csv,
)
from tests.annotation.rater_factories import eligible_count, make_rater_study

pytestmark = pytest.mark.django_db

ARGS = {"blocks": 2, "block_size": 8, "repeats": 2, "min_gap": 3, "raters": [5, 2], "seed": 11}


@pytest.fixture
def rs():  # type: ignore[no-untyped-def]
    return make_rater_study(pages=6)


def test_eligible_comparisons_exclude_failed_renders_and_deployment(rs) -> None:  # type: ignore[no-untyped-def]
    eligible = eligible_comparisons(rs.study)
    assert len(eligible) == eligible_count(6) == 16
    assert all(c.set == ComparisonSet.HUMAN for c in eligible)
    assert all(c.candidate_a.rendered and c.candidate_b.rendered for c in eligible)


def test_blocks_are_disjoint_full_and_planned_before_anyone_starts(rs) -> None:  # type: ignore[no-untyped-def]
    blocks = blocks_schedule(study=rs.study, **ARGS)
    assert [b.name for b in blocks] == ["block-1", "block-2"]
    items = list(BlockItem.objects.filter(block__study=rs.study))
    assert len(items) == 16 and len({i.comparison_id for i in items}) == 16
    assert {i.comparison_id for i in items} <= {c.pk for c in eligible_comparisons(rs.study)}
    for block, target in zip(blocks, ARGS["raters"], strict=True):
        assignments = list(block.assignments.all())
        assert block.target_raters == target == len(assignments)
        assert {a.slot for a in assignments} == set(range(target))
        assert all(a.state == AssignmentState.OPEN and a.rater_id is None for a in assignments)
        for a in assignments:
            trials = list(a.trials.order_by("position"))
            assert [t.position for t in trials] == list(range(1, 8 + 2 + 1))
            main = [t for t in trials if not t.is_repeat]
            assert sorted(t.comparison_id for t in main) == sorted(i.comparison_id for i in block.items.all())
    event = AuditEvent.objects.get(action="schedule_blocks")
    assert event.details["seed"] == 11 and event.details["raters"] == [5, 2]


def test_display_sides_alternate_across_a_blocks_raters_and_a_pairs_comparisons(rs) -> None:  # type: ignore[no-untyped-def]
    """Module docstring of annotation.services.scheduling, "Display order": recomputed here from the
    blocks' items (each pair's rank over the blocks in order, plus one when canonical A is the pair's
    second system); each comparison's sides alternate over the slots, and each pair of systems is
    shown each way equally often (±1) over the schedule, an odd rater target (5) included."""
    blocks_schedule(study=rs.study, **ARGS)
    ranks: Counter[tuple[int, int]] = Counter()
    pair_left: dict[tuple[int, int], Counter[bool]] = defaultdict(Counter)
    for block in Block.objects.filter(study=rs.study).order_by("position"):
        side: dict[int, int] = {}
        pair_of: dict[int, tuple[int, int]] = {}
        a_first: dict[int, bool] = {}
        for item in block.items.order_by("position").select_related(
                "comparison__candidate_a__system", "comparison__candidate_b__system"):
            a = item.comparison.candidate_a.system.position
            b = item.comparison.candidate_b.system.position
            pair_of[item.comparison_id] = (min(a, b), max(a, b))
            a_first[item.comparison_id] = a < b
            side[item.comparison_id] = (ranks[pair_of[item.comparison_id]] + (0 if a < b else 1)) % 2
            ranks[pair_of[item.comparison_id]] += 1
        swapped_count: Counter[int] = Counter()
        for t in Trial.objects.filter(assignment__block=block, is_repeat=False).select_related("assignment"):
            assert t.swapped == ((t.assignment.slot + side[t.comparison_id]) % 2 == 1)
            swapped_count[t.comparison_id] += t.swapped
            pair_left[pair_of[t.comparison_id]][a_first[t.comparison_id] != t.swapped] += 1
        k = block.target_raters
        for comparison_id in side:
            # each side first for half the raters, ±1
            assert abs(2 * swapped_count[comparison_id] - k) <= 1
    assert len(pair_left) > 1
    assert all(abs(c[True] - c[False]) <= 1 for c in pair_left.values()), dict(pair_left)


def test_hidden_repeats_respect_min_gap_and_orientation(rs) -> None:  # type: ignore[no-untyped-def]
    blocks_schedule(study=rs.study, **ARGS)
    repeats = Trial.objects.filter(assignment__block__study=rs.study, is_repeat=True).select_related("repeat_of")
    assert repeats.count() == 2 * 7
    for r in repeats:
        assert r.repeat_of.assignment_id == r.assignment_id
        assert r.comparison_id == r.repeat_of.comparison_id
        assert r.swapped == r.repeat_of.swapped
        assert r.position - r.repeat_of.position >= ARGS["min_gap"]
        assert not r.repeat_of.is_repeat
    per_assignment = defaultdict(set)
    for r in repeats:
        per_assignment[r.assignment_id].add(r.comparison_id)
    assert all(len(s) == 2 for s in per_assignment.values())  # two different comparisons repeated


@pytest.mark.parametrize("seed", range(30))
def test_plan_assignment_properties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    min_gap = int(rng.integers(1, n))
    repeats = int(rng.integers(0, n - min_gap + 2))
    plan = plan_assignment(n=n, repeats=repeats, min_gap=min_gap, slot=seed % 3, seed=seed)
    assert [p.position for p in plan] == list(range(1, n + repeats + 1))
    main = [p for p in plan if p.repeat_of_position is None]
    assert sorted(p.index for p in main) == list(range(n))
    by_position = {p.position: p for p in plan}
    for p in plan:
        if p.repeat_of_position is not None:
            original = by_position[p.repeat_of_position]
            assert original.repeat_of_position is None and original.index == p.index
            assert original.swapped == p.swapped
            assert p.position - original.position >= min_gap


def test_orders_are_independent_per_assignment_and_reproducible(rs) -> None:  # type: ignore[no-untyped-def]
    blocks_schedule(study=rs.study, **ARGS)
    orders = [
        tuple(a.trials.order_by("position").values_list("comparison_id", flat=True))
        for a in Assignment.objects.filter(block__study=rs.study, block__position=1)
    ]
    assert len(set(orders)) == len(orders)  # five raters, five different orders
    other = make_rater_study(slug="rater-study-2", pages=6)
    blocks_schedule(study=other.study, **ARGS)

    def plan(study):  # type: ignore[no-untyped-def]
        return [
            (t.assignment.block.name, t.assignment.slot, t.assignment.seed, t.position, t.comparison.external_id,
             t.swapped, t.is_repeat, t.repeat_of.position if t.repeat_of else None)
            for t in Trial.objects.filter(assignment__block__study=study)
            .select_related("assignment__block", "comparison", "repeat_of")
            .order_by("assignment__block__position", "assignment__slot", "position")
        ]

    assert plan(rs.study) == plan(other.study)


def test_refuses_too_few_comparisons_with_a_hint(rs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ArbiterError, match=r"16 human comparisons.*fewer than 2 blocks × 9 = 18.*--block-size 8"):
        blocks_schedule(study=rs.study, **{**ARGS, "block_size": 9})
    assert not Block.objects.exists()


def test_refuses_unplaceable_repeats(rs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ArbiterError, match="cannot place 3 hidden repeats at least 7 trials"):
        blocks_schedule(study=rs.study, **{**ARGS, "repeats": 3, "min_gap": 7})
    assert not Trial.objects.exists()


def test_no_repeats_fit_a_block_shorter_than_the_gap(rs) -> None:  # type: ignore[no-untyped-def]
    # --repeats 0 with the default gap of 20 in a block of 8: nothing to place, nothing to refuse.
    call_command("schedule_blocks", rs.study.slug, "--blocks", "2", "--block-size", "8", "--repeats", "0",
                 "--min-gap", "20", "--raters", "5,2", stdout=io.StringIO())
    trials = Trial.objects.filter(assignment__block__study=rs.study)
    assert trials.count() == 7 * 8 and not trials.filter(repeat_of__isnull=False).exists()


def test_refuses_a_second_schedule(rs) -> None:  # type: ignore[no-untyped-def]
    blocks_schedule(study=rs.study, **ARGS)
    with pytest.raises(ArbiterError, match="already has 2 blocks"):
        blocks_schedule(study=rs.study, **ARGS)


@pytest.mark.parametrize(
    ("change", "field"),
    [({"raters": [5]}, "raters"), ({"raters": [5, 0]}, "raters"), ({"seed": -1}, "seed"), ({"min_gap": 0}, "min_gap")],
)
def test_refuses_bad_arguments(rs, change, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationFailed, match=field):
        blocks_schedule(study=rs.study, **{**ARGS, **change})


def test_pages_stay_in_one_block_when_they_fit() -> None:
    rs = make_rater_study(slug="whole-pages", pages=6, failed_render=False)  # 3 comparisons per page
    blocks_schedule(study=rs.study, blocks=2, block_size=9, repeats=0, min_gap=1, raters=[1, 1], seed=3)
    blocks_of_page = defaultdict(set)
    for item in BlockItem.objects.filter(block__study=rs.study).select_related("comparison"):
        blocks_of_page[item.comparison.page_id].add(item.block_id)
    assert all(len(b) == 1 for b in blocks_of_page.values())


def test_command_and_export_csv(rs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    call_command("schedule_blocks", rs.study.slug, "--blocks", "2", "--block-size", "8", "--repeats", "2",
                 "--min-gap", "3", "--raters", "2,1", "--seed", "5")
    out = tmp_path / "schedule.csv"
    call_command("export_schedule", rs.study.slug, str(out))
    rows = list(csv.DictReader(out.open()))
    assert tuple(rows[0].keys()) == SCHEDULE_CSV_COLUMNS
    assert len(rows) == 3 * 10
    assert {r["block_seed"] for r in rows} == {"5"}
    # The export (and the systems' order in the bundle) reproduces each assignment's plan.
    position = dict(System.objects.filter(study=rs.study).values_list("external_id", "position"))
    ranks: Counter[tuple[int, int]] = Counter()
    sides: dict[str, list[int]] = {}
    for block_position in sorted({r["block_position"] for r in rows}, key=int):
        systems = {int(r["block_index"]): (position[r["system_a"]], position[r["system_b"]])
                   for r in rows if r["block_position"] == block_position}
        sides[block_position] = []
        for index in range(len(systems)):
            a, b = systems[index]
            sides[block_position].append((ranks[min(a, b), max(a, b)] + (0 if a < b else 1)) % 2)
            ranks[min(a, b), max(a, b)] += 1
    for (block_position, slot), group in _group(rows).items():
        seed = int(group[0]["assignment_seed"])
        plan = plan_assignment(n=8, repeats=2, min_gap=3, slot=int(slot), seed=seed, sides=sides[block_position])
        assert [(p.index, p.swapped, p.repeat_of_position) for p in plan] == [
            (int(r["block_index"]), r["swapped"] == "1",
             int(r["repeat_of_position"]) if r["repeat_of_position"] else None)
            for r in group
        ]
    assert {r["system_a"] for r in rows} <= {"sysalpha", "sysbeta", "sysgamma"}


def _group(rows):  # type: ignore[no-untyped-def]
    grouped = defaultdict(list)
    for r in rows:
        grouped[(r["block_position"], r["slot"])].append(r)
    return grouped


def test_command_errors_are_one_line(rs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CommandError, match="give one per block"):
        call_command("schedule_blocks", rs.study.slug, "--blocks", "2", "--block-size", "8")
    with pytest.raises(CommandError, match="expected comma-separated integers"):
        call_command("schedule_blocks", rs.study.slug, "--blocks", "2", "--raters", "5,x")
    with pytest.raises(CommandError, match="no study with slug"):
        call_command("schedule_blocks", "nope")
    with pytest.raises(CommandError, match="no blocks yet"):
        schedule_export_csv_cmd(rs.study.slug, tmp_path / "x.csv")
    assert not Block.objects.exists()


def schedule_export_csv_cmd(slug: str, path: Path) -> None:
    call_command("export_schedule", slug, str(path))


def test_schedule_export_service_writes_atomically(rs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocks_schedule(study=rs.study, **ARGS)
    n = schedule_export_csv(study=rs.study, path=tmp_path / "plan.csv")
    assert n == 7 * 10
    assert not list(tmp_path.glob("*.part"))
