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
- the comparison is the pair's least-served one this rater has not seen and no other rater is
  being served (``SKIP LOCKED``: no rater waits for another), taken from its quota (``serve_quota``:
  the blocks' rater target) by an UPDATE conditional on the count read, so no comparison is served
  past it whatever the concurrency, and never twice to a rater (the trial's unique constraint backs it);
- its display side is counterbalanced by construction: the n-th serve of a comparison (from 0) shows
  canonical B on the left when ``(n + serve_side) % 2 == 1``, its side alternating with each serve;
  ``serve_side`` (``scheduling.display_sides`` over the pool) alternates over each pair's comparisons
  which system their first serve puts on the left, and a pair's least-served comparisons are taken
  in id order, so each round of a pair's serves alternates the pair's first system left and right
  (each pair and each comparison within one of half, whatever the bundle's A/B order);
- a hidden repeat shows its original's comparison on the same side.

The pool is the study's human comparisons that no scheduled block holds. The weights are refitted
once every ``ARBITER_SERVE_REFIT_VOTES`` serves on average (a serve asks for it at random; a task
queued after the serving request's commit, a thread of the web process without a broker), so a
rater's request never fits, and no row is written by every serve.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import F, Q, Subquery

from annotation.models import (
    Assignment,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    ServeWeights,
    Study,
    System,
    Trial,
)
from stats.serving import pair_column_of, served_pair_probabilities

logger = logging.getLogger(__name__)

FILL_ATTEMPTS = 40
BUSY_WAITS = 40
BUSY_PAUSE_SECONDS = 0.005
DEFAULT_REFIT_VOTES = 50


def refit_votes() -> int:
    return max(int(getattr(settings, "ARBITER_SERVE_REFIT_VOTES", DEFAULT_REFIT_VOTES)), 1)


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
    from annotation.services.scheduling import (
        assignment_seed,
        gold_sources,
        gold_trial_fields,
        plan_assignment,
        plan_with_gold,
    )

    block = Block.objects.create(
        study=study, name=f"block-{position}", position=position, target_raters=target_raters, seed=seed,
        serve_time=True,
    )
    pool = list(serve_pool(study).order_by("pk"))
    # The pool's places: the block's rater target per comparison (kept when a block gave more),
    # and each comparison's pair of systems.
    Comparison.objects.filter(pk__in=[c.pk for c in pool], serve_quota__lt=target_raters).update(
        serve_quota=target_raters
    )
    _pairs_mark(study, [c.pk for c in pool])
    # The weights its first serves read: fitted now, so no rater's request fits.
    from annotation.services.serve_weights import serve_weights_refit

    serve_weights_refit(study_id=study.pk)
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
                  **({"comparison": gold_pages[p.index],
                      **gold_trial_fields(gold_pages[p.index].pk, gold_images, supplied, turn=slot)} if p.gold else {}))
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
    # No trial of a serve-time block stores its screen before it is reached (decision 0079): a
    # data trial has no unit yet, and a gold trial is shown by the same steps as the others.
    return block


def _pairs_mark(study: Study, comparison_ids: list[int]) -> None:
    """Write each comparison's pair column (the systems in ``ServeWeights``' order: by position) and
    its display parity (``serve_side``: ``display_sides`` over the pool in id order, the order in
    which a pair's least-served comparisons are taken)."""
    from annotation.services.scheduling import display_sides

    sides = display_sides(study=study, comparison_ids=sorted(comparison_ids))
    index = {pk: i for i, pk in enumerate(
        System.objects.filter(study=study).order_by("position", "external_id").values_list("pk", flat=True))}
    m = len(index)
    by_column: dict[tuple[int, int], list[int]] = defaultdict(list)
    for pk, a, b in Comparison.objects.filter(pk__in=comparison_ids, serve_pair__isnull=True).values_list(
        "pk", "candidate_a__system_id", "candidate_b__system_id"
    ):
        by_column[pair_column_of(index[a], index[b], m), sides[pk]].append(pk)
    for (column, side), pks in by_column.items():
        Comparison.objects.filter(pk__in=pks).update(serve_pair=column, serve_side=side)


# --- the weights --------------------------------------------------------------------------------


def _weights(study: Study) -> ServeWeights | None:
    """The study's weights (one read; fitted now only if the study has none yet)."""
    from annotation.services.serve_weights import serve_weights_refit

    return ServeWeights.objects.filter(study=study).first() or serve_weights_refit(study_id=study.pk)


# --- serving ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """What serving needs of one trial of the assignment (read with the caller's progress rows:
    ``annotation.services.answers.SLOT_FIELDS``)."""

    comparison_id: int | None
    swapped: bool
    is_repeat: bool
    repeat_of_id: int | None
    attention: bool


def slot_of(row: Mapping[str, Any]) -> Slot:
    return Slot(row["comparison_id"], bool(row["swapped"]), bool(row["is_repeat"]), row["repeat_of_id"],
                bool(row["attention_expected"]))


def serve_next(
    *, study: Study, assignment_id: int, trial_ids: Sequence[int], slots: Mapping[int, Slot],
    shown_at: datetime | None = None,
) -> tuple[int | None, bool]:
    """The first of ``trial_ids`` (an assignment's unanswered trials, in order) that can be shown,
    filling open ones; an open trial with nothing left to serve is removed (with its repeats).
    ``slots``: every trial of the assignment (``slot_of`` its row, by id). Call under the
    assignment's row lock, inside the caller's transaction.

    ``shown_at``: the caller shows that trial now; a trial filled by the one statement is marked
    shown at that time, with its candidates' versions, in the same statement. Returns the trial's
    id (None: nothing left) and whether it was marked shown."""
    # The caller's transaction (no savepoint); one of its own when called outside one.
    with transaction.atomic(using=router.db_for_write(Trial), savepoint=False):
        for trial_id in trial_ids:
            slot = slots.get(trial_id)
            if slot is None or slot.comparison_id is not None or slot.attention:
                return trial_id, False
            filled = _fill(study=study, trial_id=trial_id, slot=slot, slots=slots, shown_at=shown_at)
            if filled is not None:
                return trial_id, filled
    return None, False


def _fill(
    *, study: Study, trial_id: int, slot: Slot, slots: Mapping[int, Slot], shown_at: datetime | None
) -> bool | None:
    """Fill the trial: None when nothing is left for it (it is removed), else whether it was
    marked shown."""
    if slot.is_repeat:
        original = slots.get(int(slot.repeat_of_id or 0))
        if original is None or original.comparison_id is None:
            Trial.objects.filter(pk=trial_id).delete()
            return None
        # Shown now: marked shown with its candidates' versions in the same UPDATE, as the one
        # statement does for a data trial, so the answer that shows a hidden repeat makes the same
        # queries as another (docs/decisions/0067-no-diagnostics-in-rater-responses.md).
        shown = {} if shown_at is None else {"shown_at": shown_at, **_versions_of(int(original.comparison_id))}
        filled = Trial.objects.filter(pk=trial_id, comparison__isnull=True).update(
            comparison_id=original.comparison_id, swapped=original.swapped, **shown
        )
        return bool(filled) and shown_at is not None
    seen = {s.comparison_id for s in slots.values() if s.comparison_id is not None and not s.is_repeat
            and not s.attention}
    chosen = _choose(study=study, trial_id=trial_id, seen=seen, shown_at=shown_at)
    if chosen is None:
        Trial.objects.filter(pk=trial_id).delete()  # its hidden repeats go with it (CASCADE)
        return None
    return chosen[1]


def _versions_of(comparison_id: int) -> dict[str, Subquery]:
    """The comparison's candidates' current versions, read inside the UPDATE that sets them (as
    ``annotation.services.answers._shown_now``, for a trial whose comparison the same
    UPDATE sets)."""
    comparison = Comparison.objects.filter(pk=comparison_id).order_by()
    return {"version_a": Subquery(comparison.values("candidate_a__version")[:1]),
            "version_b": Subquery(comparison.values("candidate_b__version")[:1])}


def _choose(
    *, study: Study, trial_id: int, seen: set[int], shown_at: datetime | None = None
) -> tuple[int, bool] | None:
    """Take a comparison's place for the trial and fill it: the comparison's id and whether the
    trial was marked shown (``serve_next``), or None.

    On PostgreSQL one statement draws the pair, takes the place and fills the trial
    (``_serve_in_one_statement``); the steps below run when it cannot (no weights fitted yet, every
    place of the drawn pair being served right now, or another backend). Reads that do not grow with
    the study: the pairs that still have a place this rater may take (``serve_pair``, no join), then
    the chosen pair's least-served comparison no one is serving."""
    rng = random.Random(f"{study.seed}-{trial_id}")
    drawn: tuple[int, float] | None = None
    if connections[router.db_for_write(Comparison)].vendor == "postgresql":
        one = _serve_in_one_statement(study_id=study.pk, trial_id=trial_id, seen=seen, u=rng.random(),
                                      shown_at=shown_at)
        if one is not None:
            if one.column is None:
                return None  # no pair has a place this rater may take
            if one.comparison_id is not None:
                _served(study_id=study.pk, rng=rng, comparison_id=one.comparison_id, filled=one.filled)
                return one.comparison_id, one.filled and shown_at is not None
            drawn = (one.column, float(one.probability or 0.0))  # its places are all being served right now
    weights = _weights(study)
    if weights is None:
        return None
    open_places = Comparison.objects.filter(study=study, served__lt=F("serve_quota")).exclude(pk__in=seen)
    # The pairs with a place this rater may take.
    open_columns = {
        int(column)
        for column in open_places.filter(serve_pair__lt=len(weights.rule_shares))
        .values_list("serve_pair", flat=True).order_by().distinct()
        if column is not None
    }
    for _attempt in range(FILL_ATTEMPTS):
        available = sorted(open_columns)
        if not available:
            return None
        if drawn is not None:
            (column, probability), drawn = drawn, None
        else:
            probabilities = _probabilities(weights, available)
            column = rng.choices(available, weights=[probabilities[c] for c in available])[0]
            probability = probabilities[column]
        orders = Q(serve_pair=column)
        # The pair's least-served comparison that no other rater is serving right now: a rater
        # never waits for another's row lock (no lock queue, no deadlock), and concurrent raters
        # spread over the pair's comparisons.
        # The drawn pair is kept while its places are only busy (a redraw would favour quiet pairs
        # over what the stored probability says). NO KEY UPDATE: a trial filled with the comparison
        # elsewhere (a hidden repeat) checks its foreign key with a key-share lock, which this one
        # does not block.
        locked: list[tuple[int, int, int]] = []
        for _wait in range(BUSY_WAITS):
            locked = list(
                open_places.filter(orders).select_for_update(skip_locked=True, no_key=True, of=("self",))
                .order_by("served", "pk").values_list("pk", "served", "serve_side")[:1]
            )
            if locked or not open_places.filter(orders).exists():
                break
            time.sleep(BUSY_PAUSE_SECONDS)  # each of them is being served: a vote commits in ms
        if not locked:
            open_columns.discard(column)  # the pair has no place left for this rater: draw again without it
            continue
        pk, served, side = locked[0]
        # Conditional on the count read, for backends without row locks (SQLite): the count is
        # exact, so the display side follows it (module docstring), and the quota is never passed.
        if not Comparison.objects.filter(pk=pk, served=served, served__lt=F("serve_quota")).update(served=served + 1):
            continue
        filled = Trial.objects.filter(pk=trial_id, comparison__isnull=True).update(
            comparison_id=pk, swapped=(served + side) % 2 == 1, allocation_probability=probability
        )
        _served(study_id=study.pk, rng=rng, comparison_id=pk, filled=bool(filled))
        return pk, False
    return None


def _served(*, study_id: int, rng: random.Random, comparison_id: int, filled: bool) -> None:
    """After a place was taken: give it back if the trial was filled meanwhile (by the same rater's
    other request), and ask for a refit once in ``refit_votes()`` serves."""
    if not filled:
        Comparison.objects.filter(pk=comparison_id).update(served=F("served") - 1)
        return
    if rng.random() < 1.0 / refit_votes():
        _refit_after_commit(study_id)


@dataclass(frozen=True)
class OneStatement:
    """What ``_serve_in_one_statement`` did: the pair drawn (None: none is open to the rater) and its
    probability, the comparison whose place it took (None: every place of the pair was being
    served), and whether the trial was filled."""

    column: int | None
    probability: float | None
    comparison_id: int | None
    filled: bool


# PostgreSQL: the serve in one round trip. The pairs open to the rater (a place left, none of it
# seen), each one's probability by the protocol's formula from the stored weights (as
# ``stats.serving.served_pair_probabilities``), the pair whose cumulative probability first passes
# ``u`` (the last one when rounding leaves none), its least-served comparison no other rater is
# serving (SKIP LOCKED; NO KEY UPDATE, as in ``_choose``; ties in id order), that place taken and the
# trial filled with it, the side from the count before and the comparison's parity (module docstring), and (``shown_at``) the trial marked shown with its candidates' versions, as
# ``annotation.services.answers._shown_now`` records them. Data-modifying CTEs run
# once, whether or not the final SELECT reads them.
_ONE_STATEMENT = """
WITH weights AS (
    SELECT rule_shares, floor, jsonb_array_length(rule_shares) AS k_pairs FROM {weights} WHERE study_id = %(study)s
), open_pairs AS (
    SELECT DISTINCT c.serve_pair AS k FROM {comparison} c, weights
    WHERE c.study_id = %(study)s AND c.served < c.serve_quota AND c.serve_pair < weights.k_pairs
      AND c.id <> ALL(%(seen)s::bigint[])
), shares AS (
    SELECT k, (weights.rule_shares ->> k)::float8 AS w FROM open_pairs, weights
), totals AS (
    SELECT k, w, count(*) OVER () AS n, sum(w) OVER () AS total FROM shares
), probabilities AS (
    SELECT k, weights.floor / n + (1 - weights.floor) * (CASE WHEN total > 0 THEN w / total ELSE 1.0::float8 / n END) AS p
    FROM totals, weights
), cumulative AS (
    SELECT k, p, sum(p) OVER (ORDER BY k) AS upto, sum(p) OVER () AS whole FROM probabilities
), chosen AS (
    SELECT k, p FROM cumulative
    WHERE upto > %(u)s * whole OR k = (SELECT max(k) FROM probabilities) ORDER BY k LIMIT 1
), place AS (
    SELECT c.id FROM {comparison} c, chosen
    WHERE c.study_id = %(study)s AND c.serve_pair = chosen.k AND c.served < c.serve_quota
      AND c.id <> ALL(%(seen)s::bigint[])
    ORDER BY c.served, c.id LIMIT 1
    FOR NO KEY UPDATE OF c SKIP LOCKED
), taken AS (
    UPDATE {comparison} c SET served = c.served + 1 FROM place
    WHERE c.id = place.id AND c.served < c.serve_quota
    RETURNING c.id, c.served, c.serve_side, c.candidate_a_id, c.candidate_b_id
), filled AS (
    UPDATE {trial} t SET comparison_id = taken.id, swapped = mod(taken.served + taken.serve_side, 2) = 0,
        allocation_probability = (SELECT p FROM chosen),
        shown_at = COALESCE(t.shown_at, %(shown_at)s::timestamptz),
        version_a = CASE WHEN t.shown_at IS NULL AND %(shown_at)s::timestamptz IS NOT NULL
            THEN (SELECT version FROM {candidate} WHERE id = taken.candidate_a_id) ELSE t.version_a END,
        version_b = CASE WHEN t.shown_at IS NULL AND %(shown_at)s::timestamptz IS NOT NULL
            THEN (SELECT version FROM {candidate} WHERE id = taken.candidate_b_id) ELSE t.version_b END
    FROM taken WHERE t.id = %(trial)s AND t.comparison_id IS NULL
    RETURNING t.id
)
SELECT (SELECT count(*) FROM weights), (SELECT k FROM chosen), (SELECT p FROM chosen), (SELECT id FROM taken),
       (SELECT count(*) FROM filled)
"""


@functools.cache
def _one_statement() -> str:
    return _ONE_STATEMENT.format(weights=ServeWeights._meta.db_table, comparison=Comparison._meta.db_table,
                                 trial=Trial._meta.db_table, candidate=Candidate._meta.db_table)


def _serve_in_one_statement(
    *, study_id: int, trial_id: int, seen: set[int], u: float, shown_at: datetime | None
) -> OneStatement | None:
    """Draw, take and fill in one statement (PostgreSQL); None when the study has no weights yet."""
    with connections[router.db_for_write(Comparison)].cursor() as cursor:
        cursor.execute(_one_statement(), {"study": study_id, "seen": sorted(seen), "u": u, "trial": trial_id,
                                          "shown_at": shown_at})
        has_weights, column, probability, comparison_id, filled = cursor.fetchone()
    if not has_weights:
        return None
    return OneStatement(column=column, probability=probability, comparison_id=comparison_id, filled=bool(filled))


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


def _probabilities(weights: ServeWeights, available: Sequence[int]) -> Mapping[int, float]:
    return served_pair_probabilities(weights.rule_shares, float(weights.floor), available)
