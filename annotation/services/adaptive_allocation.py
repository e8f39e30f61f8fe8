"""Adaptive allocation of a pairwise study's next block (docs/protocol.md "Adaptive allocation and stopping").

Both pairwise kinds take it: ``pairwise_reference`` and ``pairwise`` (no reference: A/B/TIE between
the items of two systems on a brief); ``checklist`` and ``rating`` ask no winner and are refused.

With ``options["allocation"] = "adaptive"`` a study is scheduled as today (``blocks_schedule``: its
first blocks are the uniform start), and when every place of every block is taken, the next
participant's arrival builds one more block from the comparisons not yet in any block:
``ceil(UNIFORM_FLOOR × size)`` of them drawn uniformly over the system pairs (the floor, drawn
first and recorded by name in the ``adaptive_block`` audit event), the rest over the pairs the
allocator favours in the current fit (``annotation.selectors.allocation``). The block then gets its
assignments and trials from the same planner as the kind's every block:
docs/protocol.md "Planning the human study"'s for ``pairwise_reference`` (seeded trial order),
docs/study-kinds.md "Scheduling"'s counterbalanced one for ``pairwise`` (the chosen comparisons' briefs as
sections in Williams order per slot, the study's attention checks); both alternate display sides over the
raters and place the study's hidden repeats at its gap, so the protocol's guarantees hold per block exactly as
for a uniform study; blocks stay disjoint, so no rater sees a comparison twice except as a designed repeat. No
new block is built once the stopping rule has declared the target (the study then fills up and reports that it
can be closed).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from django.db import transaction

from annotation.errors import ArbiterError, ValidationFailed
from annotation.kinds import design_of
from annotation.kinds.base import ScheduleUnit
from annotation.models import Assignment, AssignmentState, Block, BlockItem, Comparison, Study, System
from annotation.selectors.allocation import (
    ALLOCATIONS,
    AllocationState,
    allocation_state,
    serves_at_request,
    study_allocation,
)
from annotation.services.audit import audit_record
from annotation.services.scheduling import (
    DEFAULT_CHECKS,
    blocks_schedule,
    counterbalanced_block_create,
    display_sides,
    gold_sources,
    schedule_units,
    shuffled_block_create,
)
from annotation.services.serve_time import serve_block_create, serve_pool

if TYPE_CHECKING:
    import numpy as np


def allocation_check(*, study: Study, allocation: str) -> None:
    """Refuse an allocation the study cannot have (one line), before anything is written."""
    if allocation not in ALLOCATIONS:
        raise ValidationFailed(
            f"must be one of {', '.join(ALLOCATIONS)}, got {allocation!r}", field="allocation"
        )
    if allocation == "adaptive" and not design_of(study).pairwise:
        raise ArbiterError(
            f"adaptive allocation needs a pairwise kind (pairwise_reference or pairwise); "
            f"study '{study.slug}' is a {study.kind} study"
        )


ADAPTATIONS = ("serve", "block")


def study_allocation_set(
    *, study: Study, allocation: str, target: dict | None = None, actor: object | None = None,
    adaptation: str = "serve",
) -> None:
    """Set the study's allocation (``uniform`` or ``adaptive``) and, for adaptive, its target and
    how it adapts: ``serve`` (each later trial of a ``pairwise_reference`` study chosen when the
    rater reaches it, annotation.services.serve_time) or ``block`` (each later block built whole)."""
    from stats.allocation import TARGET_KINDS

    allocation_check(study=study, allocation=allocation)
    if adaptation not in ADAPTATIONS:
        raise ValidationFailed(f"must be one of {', '.join(ADAPTATIONS)}, got {adaptation!r}", field="adaptation")
    target = dict(target or {})
    if target.get("kind", "top_k") not in TARGET_KINDS:
        raise ValidationFailed(f"must be one of {', '.join(TARGET_KINDS)}", field="allocation_target.kind")
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        options = {**(locked.options or {}), "allocation": allocation}
        if allocation == "adaptive":
            options["adaptation"] = adaptation
            options["allocation_target"] = {
                "kind": target.get("kind", "top_k"),
                "k": int(target.get("k", 3)),
                "width_elo": float(target.get("width_elo", 50.0)),
            }
        Study.objects.filter(pk=study.pk).update(options=options)
        study.options = options
        audit_record(
            action="allocation_set",
            user=actor,
            study=study,
            target=study.slug,
            allocation=allocation,
            allocation_target=options.get("allocation_target"),
        )


def adaptive_start_check(*, study: Study, blocks: int, block_size: int, raters: list[int]) -> None:
    """Refuse, in one line, a uniform start too small for the debiased scores of docs/protocol.md
    "Scores of an adaptive study": fewer than ``MIN_START_VOTES_PER_PAIR`` votes per system pair
    (the start's blocks × block size × rater target, over the study's system pairs)."""
    from stats.planning import MIN_START_VOTES_PER_PAIR

    m = System.objects.filter(study=study).count()
    k_pairs = m * (m - 1) // 2
    if len(raters) != blocks or min(raters, default=0) < 1 or block_size < 1:
        return  # malformed: ``blocks_schedule`` refuses it with its own message
    start = block_size * sum(raters)
    if k_pairs and start < MIN_START_VOTES_PER_PAIR * k_pairs:
        raise ValidationFailed(
            f"an adaptive study's uniform start ({blocks} block(s) of {block_size}, rater targets "
            f"{','.join(str(r) for r in raters)}: {start} votes) holds {start / k_pairs:.1f} votes per system pair; its scores are measured unbiased "
            f"from {MIN_START_VOTES_PER_PAIR} per pair ({MIN_START_VOTES_PER_PAIR * k_pairs} votes for {m} systems; "
            "docs/protocol.md 'Scores of an adaptive study'): give more blocks, raters or a larger block size",
            field="blocks",
        )


def study_schedule(
    *,
    study: Study,
    allocation: str = "uniform",
    target_k: int = 3,
    actor: object | None = None,
    adaptation: str = "serve",
    **schedule: Any,
) -> list[Block]:
    """Schedule a study (``blocks_schedule``) with its gold trials and allocation, all or nothing.

    The one way in of the ``schedule_blocks`` command, the raters page's schedule form and the
    schedule endpoint; ``schedule`` holds ``blocks_schedule``'s arguments (blocks, block_size,
    repeats, min_gap, raters, seed, checks, gold). ``allocation="adaptive"``: the blocks made here
    are the uniform start, and the allocator targets the top ``target_k`` (an allocation the
    study's kind cannot have is refused before anything is written).
    """
    allocation_check(study=study, allocation=allocation)
    if allocation == "adaptive" and target_k < 1:
        raise ValidationFailed(f"must be at least 1, got {target_k}", field="target_k")
    if allocation == "adaptive":
        adaptive_start_check(study=study, blocks=int(schedule.get("blocks", 0)),
                             block_size=int(schedule.get("block_size", 0)), raters=list(schedule.get("raters") or []))
    with transaction.atomic():
        made = blocks_schedule(study=study, actor=actor, **schedule)
        if allocation == "adaptive":
            study_allocation_set(
                study=study, allocation="adaptive", target={"kind": "top_k", "k": target_k}, actor=actor,
                adaptation=adaptation,
            )
    return made


def adaptive_block_extend(*, study: Study) -> Block | None:
    """Build the adaptive study's next block, or None (not adaptive, places still open, the target
    declared, or fewer unscheduled comparisons left than a block holds)."""
    import numpy as np

    from stats.allocation import UNIFORM_FLOOR

    if study_allocation(study) != "adaptive":
        return None
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        if Assignment.objects.filter(block__study=locked, state=AssignmentState.OPEN).exists():
            return None  # another arrival has just built one
        last = Block.objects.filter(study=locked).order_by("-position").first()
        if last is None:
            return None  # not scheduled yet: the first blocks come from blocks_schedule
        scheduled = Block.objects.filter(study=locked, serve_time=False).order_by("-position").first()
        size = scheduled.items.count() if scheduled is not None else 0
        state = allocation_state(study=locked)
        if state is None or state.declared:
            return None
        if serves_at_request(locked):
            return _serve_block_extend(locked, last, size, state)
        used = set(BlockItem.objects.filter(block__study=locked).values_list("comparison_id", flat=True))
        pool = [u for u in schedule_units(locked) if u.obj.pk not in used]
        if len(pool) < size:
            return None
        position = last.position + 1
        seed = int(locked.seed) + 7919 * position
        chosen, floor = _block_draw(
            state=state, pool=pool, size=size, rng=np.random.default_rng([seed, state.votes])
        )
        design = design_of(locked)
        if design.counterbalanced:
            # The pairwise kind's crowd design: the chosen comparisons' briefs are the sections, in
            # Williams order per slot, with the study's attention checks (docs/study-kinds.md "Scheduling").
            block = counterbalanced_block_create(
                study=locked,
                position=position,
                units=chosen,
                target_raters=last.target_raters,
                seed=seed,
                repeats=locked.hidden_repeats,
                min_gap=locked.min_gap,
                checks=int((locked.options or {}).get("attention_checks", DEFAULT_CHECKS)),
            )
        else:
            comparisons = [u.obj for u in chosen]
            # Later blocks keep the study's gold rate (the first blocks' ``schedule_blocks --gold``).
            gold = int((locked.options or {}).get("gold_trials", 0))
            gold_images, supplied = (
                gold_sources(study=locked, comparisons=comparisons) if gold else (None, None)  # type: ignore[arg-type]
            )
            # Each pair's display sides continue from its comparisons in the blocks before.
            ranks: Counter[tuple[int, int]] = Counter()
            display_sides(study=locked, comparison_ids=list(
                BlockItem.objects.filter(block__study=locked).order_by("block__position", "position")
                .values_list("comparison_id", flat=True)), ranks=ranks)
            block = shuffled_block_create(
                study=locked,
                position=position,
                comparisons=comparisons,  # type: ignore[arg-type]
                target_raters=last.target_raters,
                seed=seed,
                repeats=locked.hidden_repeats,
                min_gap=locked.min_gap,
                ranks=ranks,
                gold=gold,
                gold_images=gold_images,
                supplied=supplied,
            )
        audit_record(
            action="adaptive_block",
            user=None,
            study=locked,
            target=locked.slug,
            block=position,
            size=size,
            raters=last.target_raters,
            votes_so_far=state.votes,
            rule=state.rule,
            floor=UNIFORM_FLOOR,
            floor_comparisons=len(floor),
            floor_items=sorted(str(u.obj.external_id) for u in floor),  # type: ignore[attr-defined]
        )
    return block


def _serve_block_extend(study: Study, last: Block, size: int, state: AllocationState) -> Block | None:
    """The next serve-time block (annotation.services.serve_time), when the pool still has places
    for ``size`` distinct comparisons."""
    if size < 1 or serve_pool(study).filter(served__lt=last.target_raters).count() < size:
        return None
    position = last.position + 1
    block = serve_block_create(
        study=study, position=position, size=size, target_raters=last.target_raters,
        seed=int(study.seed) + 7919 * position, repeats=study.hidden_repeats, min_gap=study.min_gap,
        gold=int((study.options or {}).get("gold_trials", 0)),
    )
    audit_record(action="adaptive_block", user=None, study=study, target=study.slug, block=position, size=size,
                 raters=last.target_raters, votes_so_far=state.votes, rule=state.rule, floor=state.floor,
                 serve_time=True)
    return block


def _block_draw(
    *, state: AllocationState, pool: list[ScheduleUnit], size: int, rng: np.random.Generator
) -> tuple[list[ScheduleUnit], list[ScheduleUnit]]:
    """(the block's comparisons in a random order, those of them drawn for the uniform floor).

    ``ceil(UNIFORM_FLOOR × size)`` comparisons are drawn uniformly over the system pairs, the rest
    over the pairs the rule favours (``round_counts``); a pair with too few unscheduled comparisons
    leaves its share to a uniform draw over the rest of the pool.
    """
    import numpy as np

    from stats.allocation import UNIFORM_FLOOR, pair_column, round_counts

    index = {s: i for i, s in enumerate(state.systems)}
    m = len(state.systems)
    by_pk = {u.obj.pk: u for u in pool}
    rows = Comparison.objects.filter(pk__in=list(by_pk)).values_list(
        "pk", "candidate_a__system__external_id", "candidate_b__system__external_id"
    )
    column_of = {pk: int(pair_column(np.array(index[a]), np.array(index[b]), m)) for pk, a, b in rows}
    by_pair: dict[int, list[ScheduleUnit]] = defaultdict(list)
    for pk in sorted(by_pk):
        by_pair[column_of[pk]].append(by_pk[pk])
    rule_shares = np.clip(
        (state.shares - UNIFORM_FLOOR / len(state.shares)) / (1.0 - UNIFORM_FLOOR), 0.0, None
    )
    weights = rule_shares[None, :] / max(rule_shares.sum(), 1e-300)
    n_floor = min(size, math.ceil(UNIFORM_FLOOR * size))
    # The floor first, from its own draw, so it never depends on the fit (docs/protocol.md "Uniform floor").
    floor_counts = round_counts(n_floor, weights, floor=1.0, rng=rng)[0]
    rule_counts = round_counts(size - n_floor, weights, floor=0.0, rng=rng)[0]
    taken: set[int] = set()
    floor: list[ScheduleUnit] = []
    chosen: list[ScheduleUnit] = []
    for counts, into in ((floor_counts, floor), (rule_counts, chosen)):
        for column in np.flatnonzero(counts):
            available = [u for u in by_pair.get(int(column), []) if u.obj.pk not in taken]
            take = min(int(counts[column]), len(available))
            for i in sorted(rng.choice(len(available), size=take, replace=False)) if take else []:
                into.append(available[int(i)])
                taken.add(available[int(i)].obj.pk)
    # A pair with too few unscheduled comparisons: the rest is drawn uniformly from the pool (and
    # counts for the floor while the floor is short, so the floor share holds in every block).
    rest = [by_pk[pk] for pk in sorted(by_pk) if pk not in taken]
    missing = size - len(floor) - len(chosen)
    extra = (
        [rest[int(i)] for i in sorted(rng.choice(len(rest), size=missing, replace=False))] if missing else []
    )
    top_up = max(n_floor - len(floor), 0)
    floor.extend(extra[:top_up])
    block = floor + chosen + extra[top_up:]
    rng.shuffle(block)  # type: ignore[arg-type]
    return block, floor
