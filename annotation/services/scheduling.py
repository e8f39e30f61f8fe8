"""The human schedule: blocks, planned assignments and their trials
(docs/protocol.md "Planning the human study").

The whole plan is written before anyone starts: every block gets ``target_raters`` assignments in
state ``open`` (no rater yet), each with all of its trials, and every random choice comes from the
recorded seed, so an analysis can rebuild the plan from the export alone.

Decisions (written down here because the protocol is silent):

- Eligible comparisons: the study's ``human`` set whose two candidates are rendered with an image.
- Too few comparisons for ``blocks × block_size`` is refused (no smaller last block: blocks of
  unequal size would make per-block rater targets and agreement figures incomparable); the
  message gives the largest block size that fits. Extra comparisons stay unscheduled and are
  counted in the command's output.
- A page's comparisons stay in one block whenever they fit (first fit over shuffled pages), so the
  page-block bootstrap of docs/protocol.md "Human reference and agreement" resamples whole pages within a
  block.
- Display order: ``swapped = (slot + side of the comparison) % 2``, where the side
  (``display_sides``) is the comparison's rank among the comparisons of its pair of systems in the
  schedule (running over the blocks), plus one when its canonical A is the pair's second system
  (systems by position). Across a block's slots each comparison's sides alternate (±1); in each
  assignment the pair's comparisons alternate which system is on the left, and over the slots so
  does the one extra of an odd rater target, so each pair of systems is shown each way equally
  often (±1) even when the bundle lists every pair in the same A/B order.
- Trial order: an independent permutation per assignment from ``default_rng(assignment.seed)``,
  where ``assignment.seed`` is derived from (study seed, block position, slot) and exported.
- Hidden repeats: per assignment, ``repeats`` comparisons drawn at random among those whose
  main-order index ``i`` leaves room (``i ≤ n − min_gap``); each is inserted after a random main
  index ``j ∈ [i + min_gap − 1, n − 1]`` so it lands at least ``min_gap`` trials after its original,
  with the original's orientation.

The other kinds (docs/study-kinds.md "Scheduling": counterbalanced order, hidden repeats, attention checks;
the design's ``counterbalanced``) run on the same blocks, planned open assignments and trials; what differs is
the unit a trial shows (``design_of(study).schedule_units``) and the order. Decisions (the protocol says
"item order and block order counterbalanced per participant"):

- A block's units are grouped into **sections** — the questionnaire's blocks: the comparisons of
  one brief (``pairwise``), the predicates about one image (``checklist``), the items of one brief
  (``rating``). Sections are kept whole inside a schedule block where they fit (first fit, as the
  pairwise_reference scheduler keeps pages whole).
- **Section order** and **item order inside each section** follow a Williams balanced Latin square
  (Williams 1949): slot ``s`` of a block takes row ``s mod p`` (``p`` = the number of sections, or
  twice that when it is odd, the second half being the mirrored rows). Over ``p`` consecutive
  slots every section is shown in every position equally often and follows every other section
  equally often (first-order carry-over balance); the same holds for the items of a section. The
  sections and items are shuffled once per block from the schedule seed, so the design does not
  follow the bundle's file order.
- Display sides of a ``pairwise`` comparison alternate across slots exactly as in
docs/protocol.md "Planning the human study":
  ``swapped = (slot + index of the comparison in its block) % 2``.
- Hidden repeats are placed as in docs/protocol.md "Planning the human study" (at least ``min_gap`` trials
after their original, same
  orientation).
- ``checks`` instructed-response attention checks per assignment: the sequence is cut into
  ``checks`` equal segments and one check goes to a random place inside each (never the first
  trial). A check shows a unit of the block drawn at random and tells the rater which answer to
  give: ``A``/``B``/``TIE`` (pairwise, as displayed), ``YES``/``NO``/``UNCLEAR`` (checklist), or
  one value of the scale for every dimension (rating). Checks are never data.

Gold trials (issue 30; ``pairwise_reference``, ``--gold N`` per assignment, stored as
``Study.options["gold_trials"]``): placed like attention checks (``N`` equal segments, a random
place in each, never the first trial; their own generator, so the rest of the plan is unchanged),
each shows the page of a random comparison of the block with the reference itself against a
degraded copy (``annotation.services.gold``). When the bundle supplies gold entries (``gold`` in
``study.json``), a block holding comparisons of their pages draws its gold trials among those
pages only and shows their entries in turn, the entry's right image as canonical A. ``attention_expected``
is ``GOLD`` (never data, nothing told to the rater); the right side alternates: left when
``(slot + g) % 2 == 0``.
"""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from django.db import transaction

from annotation import csv_cells
from annotation.errors import ArbiterError, ValidationFailed
from annotation.kinds import design_of
from annotation.kinds.base import ScheduleUnit
from annotation.models import (
    GOLD_EXPECTED,
    Assignment,
    Block,
    BlockItem,
    Comparison,
    StoredImage,
    Study,
    SuppliedGold,
    System,
    Trial,
)
from annotation.services.audit import audit_record
from annotation.services.gold import study_gold_images
from annotation.services.trial_screens import trial_screens_fill

# Instructed-response attention checks per assignment of a docs/study-kinds.md "Scheduling" kind when none is
# given.
DEFAULT_CHECKS = 2

SCHEDULE_CSV_COLUMNS = (
    "block",
    "block_position",
    "block_seed",
    "target_raters",
    "slot",
    "assignment_seed",
    "assignment_state",
    "rater",
    "position",
    "comparison",
    "page",
    "system_a",
    "system_b",
    "block_index",
    "swapped",
    "repeat",
    "repeat_of_position",
    "item",
    "predicate",
    "attention",
)


@dataclass(frozen=True)
class PlannedTrial:
    """One trial of a planned assignment: ``index`` is the comparison's position in its block;
    ``gold``: a gold trial showing that comparison's page (issue 30)."""

    position: int
    index: int
    swapped: bool
    repeat_of_position: int | None
    gold: bool = False


@dataclass(frozen=True)
class CounterbalancedTrial:
    """One planned trial of a counterbalanced kind: ``index`` is the unit's position in its block."""

    position: int
    index: int
    swapped: bool
    repeat_of_position: int | None
    attention: str = ""


def schedule_units(study: Study) -> list[ScheduleUnit]:
    """The study's schedulable units in file order, with their section."""
    return design_of(study).schedule_units(study)


def unit_noun(study: Study) -> str:
    """What a study's blocks are made of, for messages: comparisons, predicates or items."""
    return design_of(study).unit_plural


def schedulable_count(study: Study) -> int:
    """How many units the scheduler could place (docs/protocol.md "Planning the human study" eligible
    comparisons, docs/study-kinds.md "Scheduling" units)."""
    return len(schedule_units(study))


def default_rater_targets(study: Study, blocks: int) -> list[int]:
    """Rater targets when none are given: docs/protocol.md "Commands"'s list; a checklist's k; 3 for pairwise
    and rating."""
    return design_of(study).default_rater_targets(study, blocks)


def schedule_proposal(study: Study, eligible: int) -> dict[str, Any]:
    """Form defaults that fit the study: the paper's 8 blocks when there are enough units, each of
    the largest size that fits, repeats and gap the block can hold."""
    if eligible <= 0:
        return {"blocks": 1, "block_size": 1, "repeats": 0, "min_gap": 1, "raters": "5"}
    blocks = 8 if eligible >= 8 * 40 else max(1, min(8, eligible // 20)) if eligible >= 20 else 1
    size = max(1, eligible // blocks)
    min_gap = max(1, min(study.min_gap, size // 2))
    repeats = max(0, min(study.hidden_repeats, size - min_gap + 1))
    raters = "5,5,5,5,5,4,2,2" if blocks == 8 else ",".join(["5"] * blocks)  # the paper's targets for 8
    return {"blocks": blocks, "block_size": size, "repeats": repeats, "min_gap": min_gap, "raters": raters}


def schedule_command(study: Study, proposal: dict[str, Any] | None = None) -> str:
    """The ``schedule_blocks`` command that schedules ``proposal`` (the form's defaults) for this
    study: every flag whose command default (8 × 234, the study's repeats and gap, its kind's
    raters) would differ, so the suggestion runs as shown. Without ``proposal``: the study's own."""
    proposal = proposal or schedule_proposal(study, schedulable_count(study))
    words = ["manage.py", "schedule_blocks", study.slug, "--blocks", str(proposal["blocks"]),
             "--block-size", str(proposal["block_size"])]
    if proposal["repeats"] != study.hidden_repeats:
        words += ["--repeats", str(proposal["repeats"])]
    if proposal["min_gap"] != study.min_gap:
        words += ["--min-gap", str(proposal["min_gap"])]
    if design_of(study).has_reference:
        raters = [int(x) for x in str(proposal["raters"]).split(",")]
        if raters != default_rater_targets(study, proposal["blocks"]):
            words += ["--raters", ",".join(map(str, raters))]
    return " ".join(words)


def assignment_seed(seed: int, block_position: int, slot: int) -> int:
    """The seed of one assignment's trial order, derived from the schedule seed (exported)."""
    import numpy as np

    state = np.random.SeedSequence([seed, block_position, slot]).generate_state(1, dtype=np.uint32)
    return int(state[0])


def split_sections(units: Sequence[ScheduleUnit], *, blocks: int, block_size: int, seed: int) -> list[list[ScheduleUnit]]:
    """Disjoint blocks of exactly ``block_size`` units; sections kept whole where they fit.

    Sections are taken in a seeded random order (their members shuffled too) and each goes whole
    into the first block with room; sections that fit nowhere whole fill the remaining room.
    """
    import numpy as np

    rng = np.random.default_rng([seed, 0])
    by_section: dict[int, list[ScheduleUnit]] = defaultdict(list)
    for unit in units:
        by_section[unit.section].append(unit)
    keys = sorted(by_section)
    filled: list[list[ScheduleUnit]] = [[] for _ in range(blocks)]
    leftovers: list[ScheduleUnit] = []
    for k in rng.permutation(len(keys)):
        group = by_section[keys[int(k)]]
        group = [group[int(i)] for i in rng.permutation(len(group))]
        home = next((b for b in filled if len(b) + len(group) <= block_size), None)
        if home is not None:
            home.extend(group)
        else:
            leftovers.extend(group)
    for block in filled:
        while len(block) < block_size and leftovers:
            block.append(leftovers.pop(0))
    return filled


def williams_row(m: int, row: int) -> list[int]:
    """Row ``row`` of a Williams balanced Latin square of order ``m`` (2m rows when m is odd)."""
    if m <= 0:
        return []
    first: list[int] = []
    low, high = 0, m - 1
    for j in range(m):
        if j % 2 == 0:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    period = m if m % 2 == 0 else 2 * m
    r = row % period
    shifted = [(v + r) % m for v in first]
    return shifted if r < m else shifted[::-1]


def counterbalanced_order(sections: Sequence[Sequence[int]], *, slot: int) -> list[int]:
    """Unit indices in the slot's order: sections by a Williams row, items inside likewise."""
    order: list[int] = []
    for s in williams_row(len(sections), slot):
        members = list(sections[s])
        order.extend(members[i] for i in williams_row(len(members), slot))
    return order


def plan_counterbalanced_assignment(
    *,
    sections: Sequence[Sequence[int]],
    slot: int,
    seed: int,
    repeats: int,
    min_gap: int,
    checks: int,
    answers: Sequence[str],
    pairwise: bool,
) -> list[CounterbalancedTrial]:
    """Order, hidden repeats and attention checks of one assignment (module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    main = counterbalanced_order(sections, slot=slot)
    n = len(main)
    eligible = max(n - min_gap + 1, 0)
    if repeats > eligible:
        raise ArbiterError(
            f"cannot place {repeats} hidden repeats at least {min_gap} trials after their originals "
            f"in a block of {n}: at most {eligible} fit (lower --repeats or --min-gap)"
        )
    originals = sorted(int(i) for i in rng.choice(eligible, size=repeats, replace=False)) if repeats else []
    inserted_after: dict[int, list[int]] = defaultdict(list)
    for i in originals:
        inserted_after[int(rng.integers(i + min_gap - 1, n))].append(i)
    # (main position of the unit, main position of the original or None, attention answer)
    sequence: list[tuple[int, int | None, str]] = []
    for j in range(n):
        sequence.append((j, None, ""))
        sequence.extend((i, i, "") for i in inserted_after[j])
    if checks:
        length = len(sequence)
        places = []
        for c in range(checks):
            lo = max(1, (c * length) // checks)
            hi = max(lo + 1, ((c + 1) * length) // checks)
            places.append(int(rng.integers(lo, hi + 1)))
        for offset, place in enumerate(sorted(places)):
            unit = int(rng.integers(0, n))
            answer = str(answers[int(rng.integers(0, len(answers)))])
            sequence.insert(place + offset, (unit, -1, answer))
    main_position = {j: pos for pos, (j, orig, _) in enumerate(sequence) if orig is None}
    planned: list[CounterbalancedTrial] = []
    for pos, (j, orig, answer) in enumerate(sequence):
        index = main[j]
        repeat_of = main_position[orig] + 1 if orig is not None and orig >= 0 else None
        swapped = pairwise and (slot + index) % 2 == 1
        if answer:
            swapped = pairwise and bool(rng.integers(0, 2))
        planned.append(CounterbalancedTrial(pos + 1, index, swapped, repeat_of, answer))
    return planned


def split_blocks(
    comparisons: list[Comparison], *, blocks: int, block_size: int, seed: int
) -> list[list[Comparison]]:
    """Disjoint blocks of exactly ``block_size``; pages kept whole where they fit (first fit)."""
    units = [ScheduleUnit(c, c.page_id) for c in comparisons]
    return [
        [u.obj for u in block]  # type: ignore[misc]
        for block in split_sections(units, blocks=blocks, block_size=block_size, seed=seed)
    ]


def display_sides(
    *, study: Study, comparison_ids: Sequence[int], ranks: MutableMapping[tuple[int, int], int] | None = None
) -> dict[int, int]:
    """Each comparison's display parity (module docstring, "Display order"; docs/protocol.md
    "Serve-time choice"): its rank among the comparisons of its pair of systems, in the order given
    (continuing ``ranks``, which it advances, when given), plus one when its canonical A is the
    pair's second system, mod 2. Shown with ``swapped = (turn + side) % 2 == 1`` for its successive
    turns, the pair's first system is on the left for the pair's comparisons in alternation."""
    index = {pk: i for i, pk in enumerate(
        System.objects.filter(study=study).order_by("position", "external_id").values_list("pk", flat=True))}
    systems = {pk: (a, b) for pk, a, b in Comparison.objects.filter(pk__in=comparison_ids).values_list(
        "pk", "candidate_a__system_id", "candidate_b__system_id")}
    counted: MutableMapping[tuple[int, int], int] = Counter() if ranks is None else ranks
    sides: dict[int, int] = {}
    for pk in comparison_ids:
        a, b = index[systems[pk][0]], index[systems[pk][1]]
        pair = (min(a, b), max(a, b))
        rank = counted.get(pair, 0)
        counted[pair] = rank + 1
        sides[pk] = (rank + (0 if a < b else 1)) % 2
    return sides


def plan_assignment(
    *, n: int, repeats: int, min_gap: int, slot: int, seed: int, sides: Sequence[int] | None = None
) -> list[PlannedTrial]:
    """Trial order, orientation and hidden repeats of one assignment
    (docs/protocol.md "Planning the human study"). ``sides``: each block index's display parity
    (``display_sides``; default the index itself)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    main = [int(i) for i in rng.permutation(n)]
    eligible = n - min_gap + 1 if min_gap >= 1 else n
    if repeats > max(eligible, 0):
        raise ArbiterError(
            f"cannot place {repeats} hidden repeats at least {min_gap} trials after their originals "
            f"in a block of {n}: at most {max(eligible, 0)} fit (lower --repeats or --min-gap)"
        )
    originals = sorted(int(i) for i in rng.choice(max(eligible, 0), size=repeats, replace=False)) if repeats else []
    inserted_after: dict[int, list[int]] = defaultdict(list)
    for i in originals:
        j = int(rng.integers(i + max(min_gap, 1) - 1, n))
        inserted_after[j].append(i)
    sequence: list[tuple[int, int | None]] = []  # (main index, main index of the original or None)
    for j in range(n):
        sequence.append((j, None))
        sequence.extend((i, i) for i in inserted_after[j])
    main_position = {j: pos for pos, (j, orig) in enumerate(sequence) if orig is None}
    planned: list[PlannedTrial] = []
    for pos, (j, orig) in enumerate(sequence):
        index = main[j]
        repeat_of = main_position[orig] if orig is not None else None
        if repeat_of is not None and pos - repeat_of < min_gap:  # pragma: no cover - by construction
            raise AssertionError("hidden repeat placed too close to its original")
        planned.append(
            PlannedTrial(
                position=pos + 1,
                index=index,
                swapped=(slot + (index if sides is None else sides[index])) % 2 == 1,
                repeat_of_position=None if repeat_of is None else repeat_of + 1,
            )
        )
    return planned


def plan_with_gold(
    plan: list[PlannedTrial], *, gold: int, n: int, slot: int, seed: int, allowed: list[int] | None = None
) -> list[PlannedTrial]:
    """``plan`` with ``gold`` gold trials inserted (module docstring, "Gold trials").

    The sequence is cut into ``gold`` equal segments and one gold trial goes to a random place in
    each (never the first trial), showing the page of a comparison of the block drawn at random.
    Its side is counterbalanced: the identical candidate is on the left when ``(slot + g) % 2 == 0``
    for the ``g``-th gold trial of the assignment, so over an assignment and over consecutive
    slots each side holds the answer equally often (±1). Its own generator, so a plan without
    gold trials is exactly the plan of before. ``allowed``: the block positions a gold trial may
    show the page of (those with gold supplied in the bundle; default all).
    """
    import numpy as np

    if not gold:
        return plan
    rng = np.random.default_rng([seed, 30])
    length = len(plan)
    places = []
    for g in range(gold):
        lo = max(1, (g * length) // gold)
        hi = max(lo + 1, ((g + 1) * length) // gold)
        places.append(int(rng.integers(lo, hi + 1)))
    entries: list[PlannedTrial | tuple[int, bool]] = list(plan)
    for g, place in enumerate(sorted(places)):
        pool = allowed if allowed else range(n)
        entries.insert(place + g, (pool[int(rng.integers(0, len(pool)))], (slot + g) % 2 == 1))
    renumber = {}
    for pos, e in enumerate(entries):
        if isinstance(e, PlannedTrial):
            renumber[e.position] = pos + 1
    out: list[PlannedTrial] = []
    for pos, e in enumerate(entries):
        if isinstance(e, PlannedTrial):
            out.append(PlannedTrial(
                position=pos + 1, index=e.index, swapped=e.swapped,
                repeat_of_position=None if e.repeat_of_position is None else renumber[e.repeat_of_position],
            ))
        else:
            out.append(PlannedTrial(position=pos + 1, index=e[0], swapped=e[1], repeat_of_position=None, gold=True))
    return out


def _unit_ids(item: BlockItem | Trial) -> dict[str, int | None]:
    return {"comparison_id": item.comparison_id, "candidate_id": item.candidate_id, "predicate_id": item.predicate_id}


def _trials_create(
    assignment: Assignment, items: list[BlockItem], plan: Iterable[PlannedTrial | CounterbalancedTrial],
    gold_images: dict[int, tuple[StoredImage, StoredImage]] | None = None,
    supplied: dict[int, list[SuppliedGold]] | None = None,
) -> None:
    plan = list(plan)

    shown: Counter[int] = Counter()

    def gold_of(p: PlannedTrial | CounterbalancedTrial) -> dict[str, object]:
        if not getattr(p, "gold", False) or gold_images is None:
            return {"attention_expected": getattr(p, "attention", "")}
        comparison = items[p.index].comparison_id or 0
        fields = gold_trial_fields(comparison, gold_images, supplied, turn=assignment.slot + shown[comparison])
        shown[comparison] += 1
        return fields

    Trial.objects.bulk_create(
        [
            Trial(assignment=assignment, position=p.position, swapped=p.swapped, **gold_of(p),
                  **_unit_ids(items[p.index]))
            for p in plan
            if p.repeat_of_position is None
        ]
    )
    by_position = {t.position: t for t in Trial.objects.filter(assignment=assignment).only("id", "position")}
    Trial.objects.bulk_create(
        [
            Trial(assignment=assignment, position=p.position, swapped=p.swapped, is_repeat=True,
                  repeat_of=by_position[p.repeat_of_position], **_unit_ids(items[p.index]))
            for p in plan
            if p.repeat_of_position is not None
        ]
    )


def gold_trial_fields(
    comparison_id: int, gold_images: dict[int, tuple[StoredImage, StoredImage]],
    supplied: dict[int, list[SuppliedGold]] | None, *, turn: int,
) -> dict[str, object]:
    """A gold trial's fields on that comparison's page: the bundle's supplied entries of the page
    in turn (``turn``; the right image is canonical A), else its reference copy and degraded copy."""
    entries = (supplied or {}).get(comparison_id)
    if entries:
        entry = entries[turn % len(entries)]
        right, other = (entry.image_a, entry.image_b) if entry.answer == "A" else (entry.image_b, entry.image_a)
        return {"attention_expected": GOLD_EXPECTED, "gold_match_image": right, "gold_image": other,
                "supplied_gold": entry}
    match, degraded = gold_images[comparison_id]
    return {"attention_expected": GOLD_EXPECTED, "gold_match_image": match, "gold_image": degraded}


def gold_sources(
    *, study: Study, comparisons: Sequence[Comparison]
) -> tuple[dict[int, tuple[StoredImage, StoredImage]], dict[int, list[SuppliedGold]]]:
    """For gold trials over ``comparisons``: comparison id → its page's (reference copy, degraded
    copy), and comparison id → the bundle's supplied gold entries of its page (when any).

    Call inside the caller's ``transaction.atomic()`` (``study_gold_images`` publishes files)."""
    page_of = {c.pk: c.page_id for c in comparisons}
    by_page = study_gold_images(study=study, page_ids=set(page_of.values()))
    supplied_by_page: dict[int, list[SuppliedGold]] = {}
    for entry in SuppliedGold.objects.filter(study=study).select_related("image_a", "image_b"):
        supplied_by_page.setdefault(entry.page_id, []).append(entry)
    return (
        {pk: by_page[page] for pk, page in page_of.items()},
        {pk: supplied_by_page[page] for pk, page in page_of.items() if page in supplied_by_page},
    )


def shuffled_block_create(
    *, study: Study, position: int, comparisons: Sequence[Comparison], target_raters: int, seed: int, repeats: int,
    min_gap: int, gold: int = 0, gold_images: dict[int, tuple[StoredImage, StoredImage]] | None = None,
    supplied: dict[int, list[SuppliedGold]] | None = None, ranks: MutableMapping[tuple[int, int], int] | None = None,
) -> Block:
    """One ``pairwise_reference`` block (docs/protocol.md "Planning the human study") and its planned open
    assignments: a seeded trial order per assignment, display sides alternating over the slots and over
    each pair's comparisons (``display_sides``; ``ranks``: the pairs' counts in the blocks before it),
    hidden repeats, gold trials."""
    block = Block.objects.create(
        study=study, name=f"block-{position}", position=position, target_raters=target_raters, seed=seed
    )
    BlockItem.objects.bulk_create([BlockItem(block=block, position=i, comparison=c) for i, c in enumerate(comparisons)])
    items = list(block.items.order_by("position"))
    by_item = display_sides(study=study, comparison_ids=[int(item.comparison_id or 0) for item in items], ranks=ranks)
    sides = [by_item[int(item.comparison_id or 0)] for item in items]
    for slot in range(target_raters):
        a_seed = assignment_seed(seed, position, slot)
        assignment = Assignment.objects.create(block=block, slot=slot, seed=a_seed)
        plan = plan_assignment(n=len(items), repeats=repeats, min_gap=min_gap, slot=slot, seed=a_seed, sides=sides)
        # Supplied gold (the bundle's ``gold`` entries) is drawn only for the items of its pages.
        allowed = [i for i, item in enumerate(items) if gold and supplied and item.comparison_id in supplied]
        plan = plan_with_gold(plan, gold=gold, n=len(items), slot=slot, seed=a_seed, allowed=allowed)
        _trials_create(assignment, items, plan, gold_images, supplied)
    trial_screens_fill(block_id=block.pk)  # what each trial's screen reads, stored now (decision 0079)
    return block


def counterbalanced_block_create(
    *, study: Study, position: int, units: Sequence[ScheduleUnit], target_raters: int, seed: int, repeats: int,
    min_gap: int, checks: int,
) -> Block:
    """One block of a docs/study-kinds.md "Running the other study kinds" kind and its planned open
    assignments (module docstring): sections and their items in Williams order per slot, display sides
    alternating, hidden repeats, checks."""
    import numpy as np

    design = design_of(study)
    block = Block.objects.create(
        study=study, name=f"block-{position}", position=position, target_raters=target_raters, seed=seed
    )
    # Shuffle sections and their members once per block, so the Latin square does not follow the
    # bundle's file order.
    rng = np.random.default_rng([seed, position, 1])
    by_section: dict[int, list[int]] = defaultdict(list)
    for i, unit in enumerate(units):
        by_section[unit.section].append(i)
    keys = list(by_section)
    sections = [
        [by_section[keys[int(k)]][int(m)] for m in rng.permutation(len(by_section[keys[int(k)]]))]
        for k in rng.permutation(len(keys))
    ]
    BlockItem.objects.bulk_create(
        [BlockItem(block=block, position=i, **{f"{design.unit_field}_id": u.obj.pk}) for i, u in enumerate(units)]
    )
    items = list(block.items.order_by("position"))
    answers = design.attention_answers(study)
    for slot in range(target_raters):
        a_seed = assignment_seed(seed, position, slot)
        assignment = Assignment.objects.create(block=block, slot=slot, seed=a_seed)
        plan = plan_counterbalanced_assignment(
            sections=sections, slot=slot, seed=a_seed, repeats=repeats, min_gap=min_gap, checks=checks,
            answers=answers, pairwise=design.pairwise,
        )
        _trials_create(assignment, items, plan)
    trial_screens_fill(block_id=block.pk)  # what each trial's screen reads, stored now (decision 0079)
    return block


def _check_arguments(*, blocks: int, block_size: int, repeats: int, min_gap: int, raters: list[int], seed: int) -> None:
    if blocks < 1:
        raise ValidationFailed("must be at least 1", field="blocks")
    if block_size < 1:
        raise ValidationFailed("must be at least 1", field="block_size")
    if repeats < 0:
        raise ValidationFailed("must be 0 or more", field="repeats")
    if min_gap < 1:
        raise ValidationFailed("must be at least 1", field="min_gap")
    if seed < 0:
        raise ValidationFailed("must be a non-negative integer", field="seed")
    if len(raters) != blocks:
        raise ValidationFailed(
            f"gives {len(raters)} rater targets for {blocks} blocks; give one per block (e.g. 5,5,4)",
            field="raters",
        )
    if any(r < 1 for r in raters):
        raise ValidationFailed("every block needs a rater target of at least 1", field="raters")


def blocks_schedule(
    *,
    study: Study,
    blocks: int,
    block_size: int,
    repeats: int,
    min_gap: int,
    raters: list[int],
    seed: int,
    checks: int | None = None,
    gold: int = 0,
    actor: object | None = None,
) -> list[Block]:
    """Create the study's blocks and their full plan of open assignments and trials
    (docs/protocol.md "Planning the human study", docs/study-kinds.md "Running the other study kinds").

    ``gold``: gold trials per assignment (``pairwise_reference`` only; module docstring)."""
    _check_arguments(blocks=blocks, block_size=block_size, repeats=repeats, min_gap=min_gap, raters=raters, seed=seed)
    if not 0 <= gold <= block_size:
        raise ValidationFailed(f"must be between 0 and the block size ({block_size})", field="gold")
    if gold and design_of(study).counterbalanced:
        raise ArbiterError(
            "gold trials are part of the pairwise_reference kind; the crowd questionnaire designs "
            "(pairwise, checklist, rating) use attention checks (--checks)"
        )
    if checks is not None and not 0 <= checks <= block_size:
        raise ValidationFailed(f"must be between 0 and the block size ({block_size})", field="checks")
    design = design_of(study)
    if not design.has_attention_checks and checks:
        raise ArbiterError(
            "attention checks are part of the crowd questionnaire designs (pairwise, checklist, rating); "
            "a pairwise_reference study measures consistency with hidden repeats instead"
        )
    if study.blocks.exists():
        raise ArbiterError(
            f"study '{study.slug}' already has {study.blocks.count()} blocks; a study is scheduled once "
            "(export the plan with export_schedule)"
        )
    if design.counterbalanced:
        return _counterbalanced_blocks_schedule(
            study=study, blocks=blocks, block_size=block_size, repeats=repeats, min_gap=min_gap, raters=raters,
            seed=seed, checks=DEFAULT_CHECKS if checks is None else checks, actor=actor,
        )
    comparisons: list[Comparison] = [u.obj for u in schedule_units(study)]  # type: ignore[misc]
    needed = blocks * block_size
    if len(comparisons) < needed:
        fit = len(comparisons) // blocks
        raise ArbiterError(
            f"study '{study.slug}' has {len(comparisons)} human comparisons with both candidates rendered, "
            f"fewer than {blocks} blocks × {block_size} = {needed}"
            + (f" (at most --block-size {fit} fits {blocks} blocks)" if fit else "")
        )
    _check_repeats_fit(repeats=repeats, min_gap=min_gap, block_size=block_size)
    groups = split_blocks(comparisons, blocks=blocks, block_size=block_size, seed=seed)
    created: list[Block] = []
    with transaction.atomic():
        gold_by_comparison: dict[int, tuple[StoredImage, StoredImage]] | None = None
        supplied: dict[int, list[SuppliedGold]] = {}
        if gold:
            gold_by_comparison, supplied = gold_sources(
                study=study, comparisons=[c for group in groups for c in group]
            )
        ranks: Counter[tuple[int, int]] = Counter()  # each pair's comparisons in the blocks so far
        for b, (group, target) in enumerate(zip(groups, raters, strict=True)):
            created.append(shuffled_block_create(
                study=study, position=b + 1, comparisons=group, target_raters=target, seed=seed, repeats=repeats,
                min_gap=min_gap, gold=gold, gold_images=gold_by_comparison, supplied=supplied, ranks=ranks,
            ))
        update: dict[str, object] = {"seed": seed, "hidden_repeats": repeats, "min_gap": min_gap}
        if gold:
            locked = Study.objects.select_for_update().get(pk=study.pk)  # merge into the stored options
            update["options"] = study.options = {**(locked.options or {}), "gold_trials": gold}
        Study.objects.filter(pk=study.pk).update(**update)
        audit_record(
            action="schedule_blocks", user=actor, study=study, target=study.slug,
            blocks=blocks, block_size=block_size, repeats=repeats, min_gap=min_gap, raters=raters, seed=seed,
            unscheduled=len(comparisons) - needed, **({"gold": gold} if gold else {}),
        )
    return created


def _check_repeats_fit(*, repeats: int, min_gap: int, block_size: int) -> None:
    if repeats > max(block_size - min_gap + 1, 0):  # no repeats always fit, whatever the gap
        raise ArbiterError(
            f"cannot place {repeats} hidden repeats at least {min_gap} trials after their originals in a block "
            f"of {block_size}: at most {max(block_size - min_gap + 1, 0)} fit (lower --repeats or --min-gap)"
        )


def _counterbalanced_blocks_schedule(
    *, study: Study, blocks: int, block_size: int, repeats: int, min_gap: int, raters: list[int], seed: int,
    checks: int, actor: object | None,
) -> list[Block]:
    """other study kinds (docs/study-kinds.md "Scheduling"): counterbalanced sections, hidden repeats and
    attention checks (module docstring)."""
    design = design_of(study)
    units = design.schedule_units(study)
    noun = design.unit_plural
    needed = blocks * block_size
    if len(units) < needed:
        fit = len(units) // blocks
        raise ArbiterError(
            f"study '{study.slug}' has {len(units)} {noun} with an image, fewer than {blocks} blocks × "
            f"{block_size} = {needed}" + (f" (at most --block-size {fit} fits {blocks} blocks)" if fit else "")
        )
    _check_repeats_fit(repeats=repeats, min_gap=min_gap, block_size=block_size)
    groups = split_sections(units, blocks=blocks, block_size=block_size, seed=seed)
    created: list[Block] = []
    with transaction.atomic():
        for b, (group, target) in enumerate(zip(groups, raters, strict=True)):
            created.append(counterbalanced_block_create(
                study=study, position=b + 1, units=group, target_raters=target, seed=seed, repeats=repeats,
                min_gap=min_gap, checks=checks,
            ))
        locked = Study.objects.select_for_update().get(pk=study.pk)  # merge into the stored options
        options = {**(locked.options or {}), "attention_checks": checks}
        Study.objects.filter(pk=study.pk).update(seed=seed, hidden_repeats=repeats, min_gap=min_gap, options=options)
        study.options = options
        audit_record(
            action="schedule_blocks", user=actor, study=study, target=study.slug,
            blocks=blocks, block_size=block_size, repeats=repeats, min_gap=min_gap, raters=raters, seed=seed,
            checks=checks, unscheduled=len(units) - needed,
        )
    return created


def assignment_plan_copy(*, source: Assignment) -> Assignment:
    """A new open assignment for the same block slot with the same plan (fresh trial tokens)."""
    copy = Assignment.objects.create(block=source.block, slot=source.slot, seed=source.seed)
    trials = list(source.trials.order_by("position"))
    if source.block.serve_time:  # the copy's data trials are chosen when reached, as the source's were
        for t in trials:
            if not t.attention_expected:
                t.comparison_id, t.swapped = None, False
    Trial.objects.bulk_create(
        [
            Trial(assignment=copy, position=t.position, comparison_id=t.comparison_id,
                  candidate_id=t.candidate_id, predicate_id=t.predicate_id, swapped=t.swapped,
                  attention_expected=t.attention_expected, gold_image_id=t.gold_image_id,
                  gold_match_image_id=t.gold_match_image_id, supplied_gold_id=t.supplied_gold_id,
                  screen=_screen_copied(t, serve_time=source.block.serve_time))
            for t in trials
            if not t.is_repeat
        ]
    )
    by_position = {t.position: t for t in Trial.objects.filter(assignment=copy)}
    original_position = {t.pk: t.position for t in trials}
    Trial.objects.bulk_create(
        [
            Trial(assignment=copy, position=t.position, comparison_id=t.comparison_id,
                  candidate_id=t.candidate_id, predicate_id=t.predicate_id, swapped=t.swapped, is_repeat=True,
                  repeat_of=by_position[original_position[int(t.repeat_of_id or 0)]], screen=_screen_copied(t, serve_time=source.block.serve_time))
            for t in trials
            if t.is_repeat
        ]
    )
    return copy


def _screen_copied(trial: Trial, *, serve_time: bool) -> Any:
    """A copied trial's screen: its source's while the source was never shown (what a shown trial
    stored may have changed since; it is made again when the copy is shown). A serve-time block's
    trials make theirs when reached, as the source's did."""
    has_unit = trial.comparison_id or trial.candidate_id or trial.predicate_id
    return trial.screen if trial.shown_at is None and has_unit and not serve_time else None


def schedule_rows(study: Study) -> Iterator[dict[str, object]]:
    """Every planned trial of every assignment (voided ones included, with their state).

    ``comparison``/``system_a``/``system_b`` name a pairwise unit; ``item`` the rated item or the
    item a predicate asks about (``system_a`` is then its system); ``attention`` the answer an
    attention check asks for (docs/study-kinds.md "Scheduling").
    """
    index_of: dict[tuple[str, int], int] = {}
    for member in BlockItem.objects.filter(block__study=study).order_by():
        for field, value in _unit_ids(member).items():
            if value is not None:
                index_of[(field, value)] = member.position
    trials = (
        Trial.objects.filter(assignment__block__study=study)
        .select_related(
            "assignment__block", "assignment__rater", "comparison__page",
            "comparison__candidate_a__system", "comparison__candidate_b__system", "repeat_of",
            "candidate__page", "candidate__system", "predicate__candidate__page", "predicate__candidate__system",
        )
        .order_by("assignment__block__position", "assignment__slot", "assignment_id", "position")
    )
    for t in trials.iterator(chunk_size=2000):
        a = t.assignment
        c = t.comparison
        item = t.predicate.candidate if t.predicate else t.candidate
        field, value = next(((f, v) for f, v in _unit_ids(t).items() if v is not None), ("", None))
        yield {
            "block": a.block.name,
            "block_position": a.block.position,
            "block_seed": a.block.seed if a.block.seed is not None else "",
            "target_raters": a.block.target_raters,
            "slot": a.slot,
            "assignment_seed": a.seed if a.seed is not None else "",
            "assignment_state": a.state,
            "rater": a.rater.external_id if a.rater else "",
            "position": t.position,
            "comparison": c.external_id if c else "",
            "page": c.page.external_id if c else (item.page.external_id if item else ""),
            "system_a": c.candidate_a.system.external_id if c else (item.system.external_id if item else ""),
            "system_b": c.candidate_b.system.external_id if c else "",
            "block_index": index_of.get((field, value), "") if value is not None else "",
            "swapped": int(t.swapped),
            "repeat": int(t.is_repeat),
            "repeat_of_position": t.repeat_of.position if t.repeat_of else "",
            "item": item.external_id if item else "",
            "predicate": t.predicate.external_id if t.predicate else "",
            "attention": t.attention_expected,
        }


def schedule_csv_write(*, study: Study, stream: TextIO) -> int:
    """Write the schedule CSV to a text stream; returns the number of trial rows."""
    writer = csv_cells.DictWriter(stream, fieldnames=SCHEDULE_CSV_COLUMNS)
    writer.writeheader()
    n = 0
    for row in schedule_rows(study):
        writer.writerow(row)
        n += 1
    return n


def schedule_csv_text(*, study: Study) -> str:
    buffer = io.StringIO()
    schedule_csv_write(study=study, stream=buffer)
    return buffer.getvalue()


def schedule_export_csv(*, study: Study, path: str | Path) -> int:
    """Export the full plan (every trial of every assignment, with seeds) as CSV; returns rows."""
    if not study.blocks.exists():
        raise ArbiterError(f"study '{study.slug}' has no blocks yet; run schedule_blocks {study.slug} first")
    target = Path(path)
    if target.parent and not target.parent.exists():
        raise ValidationFailed("the folder does not exist", where=str(target))
    tmp = target.with_name(target.name + ".part")
    with tmp.open("w", newline="", encoding="utf-8") as stream:
        n = schedule_csv_write(study=study, stream=stream)
    tmp.replace(target)
    return n
