"""Serve-time adaptive allocation of a ``pairwise_reference`` study (docs/protocol.md "Adaptive
allocation and stopping", "Serve-time choice").

An adaptive study starts with its uniform blocks (``blocks_schedule``). Each block built after
them (``adaptive_block_extend``) is a *serve-time* block: its assignments hold the study's trial
plan (positions, hidden repeats at their gap, gold trials at the study's rate), but a data trial
gets its comparison only when the rater reaches it (``serve_next``), chosen from the votes stored
so far:

- the pair of systems is drawn with probability ``floor / K' + (1 − floor) · w_k / Σ w`` over the
  K' pairs that still have a comparison this rater may be shown (``w``: the allocation rule's
  shares in the current fit, ``ServeWeights``), so the uniform floor holds for every served trial
  and the probability is known exactly; it is stored on the trial (``allocation_probability``)
  for the debiased leaderboard;
- the comparison is the pair's least-served one this rater has not seen, taken from its quota
  (``serve_quota``: the blocks' rater target) by one conditional UPDATE, so no comparison is served past it
  whatever the concurrency, and never twice to a rater (the trial's unique constraint backs it);
- its display side alternates with the comparison's serve count (counterbalanced per comparison);
- a hidden repeat shows its original's comparison on the same side.

The pool is the study's human comparisons that no scheduled block holds. The weights are refitted
once every ``ARBITER_SERVE_REFIT_VOTES`` serves on average (a serve asks for it at random; a task
queued after the serving request's commit, a thread of the web process without a broker), so a
rater's request never fits, and no row is written by every serve.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import router, transaction
from django.db.models import F

from annotation.models import (
    GOLD_EXPECTED,
    Assignment,
    Block,
    BlockItem,
    Comparison,
    ServeWeights,
    Study,
    Trial,
)

logger = logging.getLogger(__name__)

FILL_ATTEMPTS = 8
DEFAULT_REFIT_VOTES = 50


def refit_votes() -> int:
    return max(int(getattr(settings, "ARBITER_SERVE_REFIT_VOTES", DEFAULT_REFIT_VOTES)), 1)


def pair_column(i: int, j: int, m: int) -> int:
    """Column of the unordered pair {i, j} in row-major order (``stats.allocation.pair_column``)."""
    low, high = min(i, j), max(i, j)
    return low * m - low * (low + 1) // 2 + (high - low - 1)


# --- the block ----------------------------------------------------------------------------------


def serve_pool(study: Study) -> Any:
    """The comparisons a serve-time block may show: the study's scheduled kind's units that no
    scheduled block holds."""
    from annotation.services.scheduling import schedule_units

    held = set(BlockItem.objects.filter(block__study=study).values_list("comparison_id", flat=True))
    ids = [u.obj.pk for u in schedule_units(study) if u.obj.pk not in held]
    return Comparison.objects.filter(pk__in=ids)


def serve_block_create(
    *, study: Study, position: int, size: int, target_raters: int, seed: int, repeats: int, min_gap: int,
    gold: int = 0,
) -> Block:
    """A serve-time block: ``target_raters`` open assignments of ``size`` data trials each, planned
    like a scheduled block (``plan_assignment``, ``plan_with_gold``) but with no comparison yet."""
    from annotation.services.scheduling import assignment_seed, gold_sources, plan_assignment, plan_with_gold

    block = Block.objects.create(
        study=study, name=f"block-{position}", position=position, target_raters=target_raters, seed=seed,
        serve_time=True,
    )
    pool = list(serve_pool(study).order_by("pk"))
    # The pool's places: the block's rater target per comparison (kept when a block gave more).
    Comparison.objects.filter(pk__in=[c.pk for c in pool], serve_quota__lt=target_raters).update(
        serve_quota=target_raters
    )
    # Gold trials show a page of the pool (they are never data): the first ``size`` in a seeded order.
    rng = random.Random(seed)
    gold_pages = rng.sample(pool, min(size, len(pool))) if gold else []
    gold_images, supplied = gold_sources(study=study, comparisons=gold_pages) if gold else ({}, {})
    for slot in range(target_raters):
        a_seed = assignment_seed(seed, position, slot)
        assignment = Assignment.objects.create(block=block, slot=slot, seed=a_seed)
        plan = plan_assignment(n=size, repeats=repeats, min_gap=min_gap, slot=slot, seed=a_seed)
        plan = plan_with_gold(plan, gold=gold, n=len(gold_pages) or size, slot=slot, seed=a_seed)
        main = [
            Trial(assignment=assignment, position=p.position, swapped=p.swapped if p.gold else False,
                  **(_gold_fields(gold_pages[p.index], gold_images, supplied, slot) if p.gold else {}))
            for p in plan
            if p.repeat_of_position is None
        ]
        Trial.objects.bulk_create(main)
        by_position = {t.position: t for t in Trial.objects.filter(assignment=assignment).only("id", "position")}
        Trial.objects.bulk_create(
            [
                Trial(assignment=assignment, position=p.position, is_repeat=True,
                      repeat_of=by_position[p.repeat_of_position])
                for p in plan
                if p.repeat_of_position is not None
            ]
        )
    return block


def _gold_fields(comparison: Comparison, gold_images: dict, supplied: dict, slot: int) -> dict[str, Any]:
    entries = supplied.get(comparison.pk)
    if entries:  # the bundle's entries of that page; the right image is canonical A
        entry = entries[slot % len(entries)]
        right, other = (entry.image_a, entry.image_b) if entry.answer == "A" else (entry.image_b, entry.image_a)
        return {"comparison": comparison, "attention_expected": GOLD_EXPECTED, "gold_match_image": right,
                "gold_image": other, "supplied_gold": entry}
    match, degraded = gold_images[comparison.pk]
    return {"comparison": comparison, "attention_expected": GOLD_EXPECTED, "gold_match_image": match,
            "gold_image": degraded}


# --- the weights --------------------------------------------------------------------------------


def _weights(study: Study) -> ServeWeights | None:
    from annotation.services.serve_weights import serve_weights_refit

    found = ServeWeights.objects.filter(study=study).first()
    return found if found is not None else serve_weights_refit(study_id=study.pk)


# --- serving ------------------------------------------------------------------------------------


def serve_next(*, study: Study, assignment_id: int, trial_ids: Sequence[int]) -> int | None:
    """The first of ``trial_ids`` (an assignment's unanswered trials, in order) that can be shown,
    filling open ones; an open trial with nothing left to serve is removed (with its repeats).
    Call under the assignment's row lock, inside the caller's transaction."""
    if not trial_ids:
        return None
    open_ids = set(
        Trial.objects.filter(pk__in=list(trial_ids), comparison__isnull=True, candidate__isnull=True,
                             predicate__isnull=True).values_list("pk", flat=True)
    )
    for trial_id in trial_ids:
        if trial_id not in open_ids:
            return trial_id
        if _fill(study=study, assignment_id=assignment_id, trial_id=trial_id):
            return trial_id
    return None


def _fill(*, study: Study, assignment_id: int, trial_id: int) -> bool:
    trial = Trial.objects.filter(pk=trial_id).values("is_repeat", "repeat_of_id", "comparison_id").first()
    if trial is None:
        return False
    if trial["comparison_id"] is not None:
        return True  # filled by a concurrent request of the same rater
    if trial["is_repeat"]:
        original = Trial.objects.filter(pk=trial["repeat_of_id"]).values("comparison_id", "swapped").first()
        if original is None or original["comparison_id"] is None:
            Trial.objects.filter(pk=trial_id).delete()
            return False
        Trial.objects.filter(pk=trial_id, comparison__isnull=True).update(
            comparison_id=original["comparison_id"], swapped=original["swapped"]
        )
        return True
    chosen = _choose(study=study, assignment_id=assignment_id, trial_id=trial_id)
    if chosen is None:
        Trial.objects.filter(pk=trial_id).delete()  # its hidden repeats go with it (CASCADE)
        return False
    return True


def _choose(*, study: Study, assignment_id: int, trial_id: int) -> int | None:
    """Take a comparison's place for the trial and fill it; the comparison's id, or None."""
    weights = _weights(study)
    if weights is None:
        return None
    index = {s: i for i, s in enumerate(weights.systems)}
    m = len(weights.systems)
    k_pairs = len(weights.rule_shares)
    seen = Trial.objects.filter(assignment_id=assignment_id, comparison__isnull=False, attention_expected="",
                                is_repeat=False).values("comparison_id")
    rows = list(
        Comparison.objects.filter(study=study, served__lt=F("serve_quota")).exclude(pk__in=seen)
        .values_list("pk", "served", "candidate_a__system__external_id", "candidate_b__system__external_id")
    )
    by_pair: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for pk, served, a, b in rows:
        if a in index and b in index:
            by_pair[pair_column(index[a], index[b], m)].append((served, pk))
    rng = random.Random(f"{study.seed}-{trial_id}")
    for _attempt in range(FILL_ATTEMPTS):
        available = sorted(c for c, members in by_pair.items() if members and c < k_pairs)
        if not available:
            return None
        probabilities = _probabilities(weights, available)
        column = rng.choices(available, weights=[probabilities[c] for c in available])[0]
        # One of the pair's least-served comparisons, at random: concurrent raters spread over
        # them instead of queueing on one row's lock.
        fewest = min(by_pair[column])[0]
        served, pk = rng.choice([member for member in by_pair[column] if member[0] == fewest])
        taken = Comparison.objects.filter(pk=pk, served__lt=F("serve_quota")).update(served=F("served") + 1)
        if not taken:  # another rater took its last place: choose again without it
            by_pair[column].remove((served, pk))
            continue
        count = Comparison.objects.filter(pk=pk).values_list("served", flat=True)[0]
        filled = Trial.objects.filter(pk=trial_id, comparison__isnull=True).update(
            comparison_id=pk, swapped=count % 2 == 0, allocation_probability=probabilities[column]
        )
        if not filled:  # the same rater's other request filled it first: give the place back
            Comparison.objects.filter(pk=pk).update(served=F("served") - 1)
            return pk
        if rng.random() < 1.0 / refit_votes():
            _refit_after_commit(weights.study_id)
        return pk
    return None


def _refit_after_commit(study_id: int) -> None:
    """Queue a refit of the weights once this request commits.

    One serve in ``refit_votes()`` asks for it, at random: no row is written by every serve
    (a shared counter would make every rater's vote wait for the others' commits).
    """
    from annotation.task_queue import task_queue
    from annotation.tasks import refit_serve_weights

    # On the connection the serve wrote with (the rater path may route to its own alias), so the
    # refit is queued when the serving request commits, not before; without a broker it runs in a
    # thread of this process (annotation.task_queue), never inside the rater's request.
    transaction.on_commit(lambda: task_queue(refit_serve_weights, study_id), using=router.db_for_write(ServeWeights),
                          robust=True)


def _probabilities(weights: ServeWeights, available: Sequence[int]) -> dict[int, float]:
    """Each available pair's probability: the floor spread evenly, the rest by the rule's shares."""
    floor = float(weights.floor)
    shares = [float(weights.rule_shares[c]) for c in available]
    total = sum(shares)
    rule = [s / total for s in shares] if total > 0 else [1.0 / len(available)] * len(available)
    return {c: floor / len(available) + (1.0 - floor) * r for c, r in zip(available, rule, strict=True)}
