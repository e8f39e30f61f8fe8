"""Adaptive allocation of a pairwise study's next block (docs/protocol.md "Adaptive allocation and stopping").

With ``options["allocation"] = "adaptive"`` a study is scheduled as today (``blocks_schedule``: its
first blocks are the uniform start), and when every place of every block is taken, the next
participant's arrival builds one more block from the comparisons not yet in any block:
``ceil(UNIFORM_FLOOR × size)`` of them drawn uniformly over the system pairs, the rest over the
pairs the allocator favours in the current fit (``annotation.selectors.allocation``). The block then
gets its assignments and trials from the same SPEC §4 planner as every block (seeded trial order,
display sides alternating over the raters, hidden repeats at the study's count and gap), so the
protocol's guarantees hold per block exactly as for a uniform study; blocks stay disjoint, so no
rater sees a comparison twice except as a designed repeat. No new block is built once the stopping
rule has declared the target (the study then fills up and reports that it can be closed).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from django.db import transaction

from annotation.errors import ArbiterError, ValidationFailed
from annotation.kinds import design_of
from annotation.models import Assignment, AssignmentState, Block, BlockItem, Comparison, Study
from annotation.selectors.allocation import ALLOCATIONS, allocation_state, study_allocation
from annotation.services.audit import audit_record
from annotation.services.scheduling import _trials_create, assignment_seed, plan_assignment, schedule_units
from stats.allocation import TARGET_KINDS, UNIFORM_FLOOR, draw_from_pairs, pair_column, round_counts


def allocation_check(*, study: Study, allocation: str) -> None:
    """Refuse an allocation the study cannot have (one line), before anything is written."""
    if allocation not in ALLOCATIONS:
        raise ValidationFailed(f"must be one of {', '.join(ALLOCATIONS)}, got {allocation!r}", field="allocation")
    design = design_of(study)
    if allocation == "adaptive" and (not design.pairwise or design.counterbalanced):
        raise ArbiterError(
            f"adaptive allocation is available for pairwise_reference studies; '{study.slug}' is {study.kind}"
        )


def study_allocation_set(*, study: Study, allocation: str, target: dict | None = None, actor: object | None = None) -> None:
    """Set the study's allocation (``uniform`` or ``adaptive``) and, for adaptive, its target."""
    allocation_check(study=study, allocation=allocation)
    target = dict(target or {})
    if target.get("kind", "top_k") not in TARGET_KINDS:
        raise ValidationFailed(f"must be one of {', '.join(TARGET_KINDS)}", field="allocation_target.kind")
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        options = {**(locked.options or {}), "allocation": allocation}
        if allocation == "adaptive":
            options["allocation_target"] = {"kind": target.get("kind", "top_k"), "k": int(target.get("k", 3)),
                                            "width_elo": float(target.get("width_elo", 50.0))}
        Study.objects.filter(pk=study.pk).update(options=options)
        study.options = options
        audit_record(action="allocation_set", user=actor, study=study, target=study.slug, allocation=allocation,
                     allocation_target=options.get("allocation_target"))


def adaptive_block_extend(*, study: Study) -> Block | None:
    """Build the adaptive study's next block, or None (not adaptive, places still open, the target
    declared, or fewer unscheduled comparisons left than a block holds)."""
    if study_allocation(study) != "adaptive":
        return None
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        if Assignment.objects.filter(block__study=locked, state=AssignmentState.OPEN).exists():
            return None  # another arrival has just built one
        last = Block.objects.filter(study=locked).order_by("-position").first()
        if last is None:
            return None  # not scheduled yet: the first blocks come from blocks_schedule
        size = last.items.count()
        state = allocation_state(study=locked)
        if state is None or state.declared:
            return None
        used = set(BlockItem.objects.filter(block__study=locked).values_list("comparison_id", flat=True))
        pool: list[Comparison] = [u.obj for u in schedule_units(locked) if u.obj.pk not in used]  # type: ignore[misc]
        if len(pool) < size:
            return None
        index = {s: i for i, s in enumerate(state.systems)}
        m = len(state.systems)
        by_pair: dict[int, list[Comparison]] = defaultdict(list)
        rows = Comparison.objects.filter(pk__in=[c.pk for c in pool]).values_list(
            "pk", "candidate_a__system__external_id", "candidate_b__system__external_id"
        )
        column_of = {pk: int(pair_column(np.array(index[a]), np.array(index[b]), m)) for pk, a, b in rows}
        for comparison in sorted(pool, key=lambda c: c.pk):
            by_pair[column_of[comparison.pk]].append(comparison)
        position = last.position + 1
        seed = int(locked.seed) + 7919 * position
        rng = np.random.default_rng([seed, state.votes])
        rule_shares = (state.shares - UNIFORM_FLOOR / len(state.shares)) / (1.0 - UNIFORM_FLOOR)
        counts = round_counts(size, np.clip(rule_shares, 0.0, None)[None, :] / max(rule_shares.clip(0).sum(), 1e-300),
                              floor=UNIFORM_FLOOR, rng=rng)[0]
        # A pair with too few unscheduled comparisons: the rest of the block is drawn uniformly.
        chosen: list[Comparison] = draw_from_pairs(counts, by_pair, sorted(pool, key=lambda c: c.pk), size, rng=rng)
        rng.shuffle(chosen)  # type: ignore[arg-type]
        block = Block.objects.create(
            study=locked, name=f"block-{position}", position=position, target_raters=last.target_raters, seed=seed
        )
        BlockItem.objects.bulk_create([BlockItem(block=block, position=i, comparison=c) for i, c in enumerate(chosen)])
        items = list(block.items.order_by("position"))
        for slot in range(last.target_raters):
            a_seed = assignment_seed(seed, position, slot)
            assignment = Assignment.objects.create(block=block, slot=slot, seed=a_seed)
            plan = plan_assignment(n=len(items), repeats=locked.hidden_repeats, min_gap=locked.min_gap, slot=slot, seed=a_seed)
            _trials_create(assignment, items, plan)
        audit_record(
            action="adaptive_block", user=None, study=locked, target=locked.slug, block=position, size=size,
            raters=last.target_raters, votes_so_far=state.votes, rule=state.rule, floor=UNIFORM_FLOOR,
            floor_comparisons=math.ceil(UNIFORM_FLOOR * size),
        )
    return block
