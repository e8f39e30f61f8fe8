"""Schedules of the other study kinds (SPEC §11): counterbalanced order, hidden repeats, attention checks.

The same blocks, planned open assignments and trials as SPEC §4 serve every kind; what differs is
the unit a trial shows (a comparison, a predicate or an item, docs/study-kinds.md) and the order.

Decisions (the SPEC says "item order and block order counterbalanced per participant"):

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
- Display sides of a ``pairwise`` comparison alternate across slots exactly as in SPEC §4:
  ``swapped = (slot + index of the comparison in its block) % 2``.
- Hidden repeats are placed as in SPEC §4 (at least ``min_gap`` trials after their original, same
  orientation).
- ``checks`` instructed-response attention checks per assignment: the sequence is cut into
  ``checks`` equal segments and one check goes to a random place inside each (never the first
  trial). A check shows a unit of the block drawn at random and tells the rater which answer to
  give: ``A``/``B``/``TIE`` (pairwise, as displayed), ``YES``/``NO``/``UNCLEAR`` (checklist), or
  one value of the scale for every dimension (rating). Checks are never data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Model

from annotation.errors import ArbiterError
from annotation.models import Candidate, Comparison, ComparisonSet, Predicate, Study, StudyKind


@dataclass(frozen=True)
class Unit:
    """One schedulable unit: the object a trial shows and the section it belongs to."""

    obj: Model
    section: int


@dataclass(frozen=True)
class KindPlannedTrial:
    """One planned trial: ``index`` is the unit's position in its block."""

    position: int
    index: int
    swapped: bool
    repeat_of_position: int | None
    attention: str = ""


UNIT_NAMES = {
    StudyKind.PAIRWISE: "comparisons",
    StudyKind.CHECKLIST: "predicates",
    StudyKind.RATING: "items",
}


def kind_units(study: Study) -> list[Unit]:
    """The study's schedulable units in file order, with their section (docstring)."""
    if study.kind == StudyKind.PAIRWISE:
        comparisons = (
            Comparison.objects.filter(
                study=study, set=ComparisonSet.HUMAN,
                candidate_a__image__isnull=False, candidate_b__image__isnull=False,
            )
            .select_related("page")
            .order_by("page__position", "page__external_id", "id")
        )
        return [Unit(c, c.page_id) for c in comparisons]
    if study.kind == StudyKind.CHECKLIST:
        predicates = (
            Predicate.objects.filter(study=study, candidate__image__isnull=False)
            .select_related("candidate")
            .order_by("position", "external_id")
        )
        return [Unit(p, p.candidate_id) for p in predicates]
    if study.kind == StudyKind.RATING:
        items = (
            Candidate.objects.filter(page__study=study, rendered=True, image__isnull=False)
            .order_by("page__position", "page__external_id", "system__position", "system__external_id")
        )
        return [Unit(c, c.page_id) for c in items]
    raise ArbiterError(f"study '{study.slug}' is of kind '{study.kind}', not one of pairwise, checklist, rating")


def split_sections(units: Sequence[Unit], *, blocks: int, block_size: int, seed: int) -> list[list[Unit]]:
    """Disjoint blocks of exactly ``block_size`` units; sections kept whole where they fit.

    Sections are taken in a seeded random order (their members shuffled too) and each goes whole
    into the first block with room; sections that fit nowhere whole fill the remaining room.
    """
    rng = np.random.default_rng([seed, 0])
    by_section: dict[int, list[Unit]] = defaultdict(list)
    for unit in units:
        by_section[unit.section].append(unit)
    keys = sorted(by_section)
    filled: list[list[Unit]] = [[] for _ in range(blocks)]
    leftovers: list[Unit] = []
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


def williams_period(m: int) -> int:
    return m if m % 2 == 0 or m <= 1 else 2 * m


def counterbalanced_order(sections: Sequence[Sequence[int]], *, slot: int) -> list[int]:
    """Unit indices in the slot's order: sections by a Williams row, items inside likewise."""
    order: list[int] = []
    for s in williams_row(len(sections), slot):
        members = list(sections[s])
        order.extend(members[i] for i in williams_row(len(members), slot))
    return order


def attention_answers(study: Study) -> tuple[str, ...]:
    """The answers an attention check may ask for (as displayed)."""
    if study.kind == StudyKind.PAIRWISE:
        return ("A", "B", "TIE")
    if study.kind == StudyKind.CHECKLIST:
        return ("YES", "NO", "UNCLEAR")
    if study.kind == StudyKind.RATING:
        low, high = rating_scale(study)
        return tuple(str(v) for v in range(low, high + 1))
    return ("A", "B", "TIE")


def rating_scale(study: Study) -> tuple[int, int]:
    scale = (study.options or {}).get("scale") or [1, 5]
    return int(scale[0]), int(scale[1])


def plan_kind_assignment(
    *,
    sections: Sequence[Sequence[int]],
    slot: int,
    seed: int,
    repeats: int,
    min_gap: int,
    checks: int,
    answers: Sequence[str],
    pairwise: bool,
) -> list[KindPlannedTrial]:
    """Order, hidden repeats and attention checks of one assignment (module docstring)."""
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
    planned: list[KindPlannedTrial] = []
    for pos, (j, orig, answer) in enumerate(sequence):
        index = main[j]
        repeat_of = main_position[orig] + 1 if orig is not None and orig >= 0 else None
        swapped = pairwise and (slot + index) % 2 == 1
        if answer:
            swapped = pairwise and bool(rng.integers(0, 2))
        planned.append(KindPlannedTrial(pos + 1, index, swapped, repeat_of, answer))
    return planned


def unit_fields(kind: str, obj: Any) -> dict[str, int]:
    """The BlockItem / Trial foreign key naming a unit of this kind."""
    field = {StudyKind.PAIRWISE: "comparison_id", StudyKind.CHECKLIST: "predicate_id",
             StudyKind.RATING: "candidate_id"}[StudyKind(kind)]
    return {field: obj.pk}
