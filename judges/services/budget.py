"""Spending a judge's call budget adaptively (docs/protocol.md "Adaptive allocation and stopping",
"A judge's call budget"): ``run_judges --max-calls N`` or ``--budget-usd X``.

A call is one output (one comparison in one order and repeat), as the dry run and the run's
"N calls" line count them; the re-asks of an invalid reply and the transport retries inside it
are requests of that call (recorded on the output, shown by the run's "recorded:" line).

Rounds: the first covers every system pair with comparisons left to call and no valid output of
the judge yet, one comparison each (the uniform start); after every round the judge's valid outputs
so far are fitted — Bradley–Terry as in "Deployment leaderboard", each comparison's outcome the
mean canonical vote of the judge over its orders and repeats (one judge: a frozen weight would only
scale it) — and the next round's comparisons are drawn by ``stats.allocation``'s rule
(``BUDGET_RULE``, the study allocator's rule for adjacent separation), a quarter of them
uniformly over the pairs (``UNIFORM_FLOOR``). Every chosen comparison is called in every order and repeat asked for. Rounds
grow with the calls spent (``budget_rounds``) until the budget is spent or no comparison is left.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction

from annotation.errors import ArbiterError
from annotation.kinds.judging import UNIT_CANDIDATE
from annotation.models import AuditEvent, Comparison, Study
from annotation.services.audit import audit_record
from judges.models import Judge, JudgeOutput, OutputStatus
from judges.services.runs import _check_run, judge_plan_of, judge_run_estimate, judge_stop_reason, run_units
from stats.allocation import (
    UNIFORM_FLOOR,
    Target,
    adaptive_rule,
    adjacent_widths,
    allocation_weights,
    budget_rounds,
    draw_from_pairs,
    fit_pairs,
    pair_column,
    round_counts,
)

#: Default adjacent-separation width (Elo) the allocator steers by, as for a study's target.
DEFAULT_TARGET_WIDTH_ELO = 50.0
#: The study allocator's rule for the adjacent-separation target (``stats.allocation.adaptive_rule``).
BUDGET_RULE = adaptive_rule("adjacent")
_VALUE = {"A": 1.0, "TIE": 0.5, "B": 0.0}


@dataclass(frozen=True)
class JudgeBudget:
    """The calls a budget buys: ``max_calls``, and for a dollar budget the estimated cost of a call."""

    max_calls: int
    budget_usd: float | None = None
    cost_per_call_usd: float | None = None


@dataclass(frozen=True)
class JudgeBudgetRound:
    index: int
    comparisons: int
    calls: int
    spent: int  # calls of the budget spent after this round
    widest_adjacent_elo: float  # widest 95 % adjacent interval of the fit after this round


@dataclass(frozen=True)
class JudgeBudgetRun:
    judge: str
    budget: JudgeBudget
    per_comparison: int
    rounds: tuple[JudgeBudgetRound, ...] = ()
    stopped: str | None = None  # the judge's stop reason (bad key, quota), if it stopped the run
    output_ids: tuple[int, ...] = ()
    # "adaptive" (comparisons, the rounds above) or "brief order" (renderings: one round, whole briefs
    # first, decision 0076).
    allocation: str = "adaptive"

    @property
    def calls(self) -> int:
        return self.rounds[-1].spent if self.rounds else 0

    @property
    def widest_adjacent_elo(self) -> float | None:
        return self.rounds[-1].widest_adjacent_elo if self.rounds else None


def judge_budget_resolve(
    *,
    study: Study,
    judge: Judge,
    set: str | None,
    orders: Sequence[str],
    repeats: int,
    max_calls: Any = None,
    budget_usd: Any = None,
) -> JudgeBudget:
    """The calls of ``--max-calls`` or ``--budget-usd`` (one-line errors for bad input)."""
    if max_calls is not None and budget_usd is not None:
        raise ArbiterError("give --max-calls or --budget-usd, not both")
    if budget_usd is None:
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls <= 0:
            raise ArbiterError(f"--max-calls must be a positive integer, got {max_calls!r}")
        return JudgeBudget(max_calls=max_calls)
    if not (isinstance(budget_usd, int | float) and math.isfinite(budget_usd) and budget_usd > 0):
        raise ArbiterError(f"--budget-usd must be a positive amount of dollars, got {budget_usd!r}")
    if judge.price_input_per_mtok is None or judge.price_output_per_mtok is None:
        raise ArbiterError(
            f"judge {judge.name} has no prices, so --budget-usd cannot be turned into calls "
            "(add_judge NAME --update --price-input X --price-output Y, or use --max-calls)"
        )
    estimate = judge_run_estimate(study=study, judge=judge, set=set, orders=orders, repeats=repeats)
    if not estimate.calls or estimate.cost_usd is None:
        raise ArbiterError(
            f"{judge.name}: every call of {study.slug}'s {set or 'all'} comparisons is done; nothing to spend on"
        )
    per_call = estimate.cost_usd / estimate.calls
    return JudgeBudget(
        max_calls=math.floor(budget_usd / per_call + 1e-9),
        budget_usd=float(budget_usd),
        cost_per_call_usd=per_call,
    )


def _pair_outcomes(
    *, judge: Judge, comparisons: dict[int, int], orders: Sequence[str], repeats: int, n_systems: int
) -> tuple[np.ndarray, np.ndarray]:
    """Votes and points of the pair's first system per pair, from the judge's valid outputs: one
    vote per comparison, its outcome the mean canonical vote over the orders and repeats."""
    k_pairs = n_systems * (n_systems - 1) // 2
    votes = np.zeros(k_pairs)
    points = np.zeros(k_pairs)
    per: dict[int, list[float]] = defaultdict(list)
    for start in range(0, len(comparisons), 5000):
        chunk = list(comparisons)[start : start + 5000]
        for cid, winner in JudgeOutput.objects.filter(
            judge=judge,
            comparison_id__in=chunk,
            order__in=orders,
            repeat__lt=repeats,
            status=OutputStatus.VALID,
        ).values_list("comparison_id", "winner"):
            if winner in _VALUE:
                per[cid].append(_VALUE[winner])
    for cid, values in per.items():
        column, a_first = divmod(comparisons[cid], 2)
        p = float(np.mean(values))
        votes[column] += 1
        points[column] += p if a_first else 1.0 - p
    return votes, points


def judge_run_budget(
    *,
    study: Study,
    judge: Judge,
    budget: JudgeBudget,
    run_round: Callable[[list[int]], None],
    set: str | None = None,
    orders: Sequence[str] = ("primary", "swapped"),
    repeats: int = 1,
    target_width_elo: float = DEFAULT_TARGET_WIDTH_ELO,
    on_round: Callable[[JudgeBudgetRound], None] | None = None,
    user: Any = None,
) -> JudgeBudgetRun:
    """Spend ``budget`` in rounds; ``run_round(output_ids)`` runs a round's calls and returns when
    they are finished (in this process, or queued and waited for)."""
    orders = _check_run(judge, orders, repeats, set)
    plan = judge_plan_of(study)
    if plan.unit == UNIT_CANDIDATE:
        return _item_run_budget(study=study, judge=judge, budget=budget, run_round=run_round, set=set,
                                orders=plan.orders, repeats=repeats, on_round=on_round, user=user)
    orders = tuple(o for o in orders if o in plan.orders) or plan.orders
    per = len(orders) * repeats
    comparisons = Comparison.objects.filter(study=study)
    if set:
        comparisons = comparisons.filter(set=set)
    rows = list(
        comparisons.order_by("pk").values_list("pk", "candidate_a__system_id", "candidate_b__system_id")
    )
    if not rows:
        raise ArbiterError(f"study {study.slug} has no {set + ' ' if set else ''}comparisons to judge")
    systems = sorted({s for _, a, b in rows for s in (a, b)})
    index = {s: i for i, s in enumerate(systems)}
    m = len(systems)
    # column × 2 + (1 when A is the pair's first system): where a comparison's outcome goes.
    slot = {
        pk: 2 * int(pair_column(np.array(index[a]), np.array(index[b]), m)) + int(index[a] < index[b])
        for pk, a, b in rows
    }
    called = frozenset(
        JudgeOutput.objects.filter(
            judge=judge, comparison_id__in=list(slot), order__in=orders, repeat__lt=repeats
        ).values_list("comparison_id", flat=True)
    )
    pool = [pk for pk, _, _ in rows if pk not in called]
    if not pool:
        raise ArbiterError(
            f"{judge.name}: every {set + ' ' if set else ''}comparison of {study.slug} has been called; "
            "nothing to spend the budget on"
        )
    by_pair: dict[int, list[int]] = defaultdict(list)
    for pk in pool:
        by_pair[slot[pk] // 2].append(pk)
    votes, _ = _pair_outcomes(judge=judge, comparisons=slot, orders=orders, repeats=repeats, n_systems=m)
    start = sorted(column for column in by_pair if votes[column] == 0) or [min(by_pair)]
    minimum = len(start) * per
    if budget.max_calls < minimum:
        money = (
            (
                f" (${budget.budget_usd:g} buys {budget.max_calls} at an estimated ${budget.cost_per_call_usd:.4f} a "
                f"call; the start costs ${minimum * budget.cost_per_call_usd:,.4f})"
            )
            if budget.budget_usd and budget.cost_per_call_usd is not None
            else ""
        )
        raise ArbiterError(
            f"a budget of {budget.max_calls} calls is below one call per comparison of the uniform start: "
            f"{len(start)} system pairs x {per} calls ({len(orders)} orders x {repeats} repeats) = "
            f"{minimum} calls at least{money}"
        )
    target = Target(kind="adjacent", width_elo=float(target_width_elo))
    rng = np.random.default_rng([int(study.seed), int(judge.pk), 31, len(called)])
    cumulative = budget_rounds(len(start), min(budget.max_calls // per, len(pool)))
    remaining = list(pool)
    spent = 0
    done_rounds: list[JudgeBudgetRound] = []
    ids: list[int] = []
    stopped = None
    for r, total in enumerate(cumulative):
        if not remaining:
            break
        size = min(total - (cumulative[r - 1] if r else 0), len(remaining))
        if r == 0:
            chosen = [by_pair[column][int(rng.integers(len(by_pair[column])))] for column in start]
        else:
            votes, points = _pair_outcomes(
                judge=judge, comparisons=slot, orders=orders, repeats=repeats, n_systems=m
            )
            weights = allocation_weights(
                BUDGET_RULE, fit_pairs(votes[None, :], points[None, :]), target, rng=rng,
                n_votes=size,
            )
            counts = round_counts(size, weights, floor=UNIFORM_FLOOR, rng=rng)[0]
            chosen = draw_from_pairs(counts, by_pair, remaining, size, rng=rng)
        taken = frozenset(chosen)
        remaining = [pk for pk in remaining if pk not in taken]
        for column in {slot[pk] // 2 for pk in chosen}:
            by_pair[column] = [pk for pk in by_pair[column] if pk not in taken]
        round_ids = _outputs_create(judge=judge, comparison_ids=chosen, orders=orders, repeats=repeats)
        ids.extend(round_ids)
        run_round(round_ids)
        spent += len(chosen) * per
        votes, points = _pair_outcomes(
            judge=judge, comparisons=slot, orders=orders, repeats=repeats, n_systems=m
        )
        widest = float(adjacent_widths(fit_pairs(votes[None, :], points[None, :])).max())
        done = JudgeBudgetRound(
            index=r + 1,
            comparisons=len(chosen),
            calls=len(chosen) * per,
            spent=spent,
            widest_adjacent_elo=widest,
        )
        done_rounds.append(done)
        if on_round:
            on_round(done)
        stopped = judge_stop_reason(judge)
        if stopped:
            break
    result = JudgeBudgetRun(
        judge=judge.name,
        budget=budget,
        per_comparison=per,
        rounds=tuple(done_rounds),
        stopped=stopped,
        output_ids=tuple(ids),
    )
    audit_record(
        action="judges.run_budget",
        user=user,
        study=study,
        target=judge.name,
        set=set or "all",
        orders=list(orders),
        repeats=repeats,
        allocation="adaptive",
        rule=BUDGET_RULE,
        uniform_floor=UNIFORM_FLOOR,
        allocation_target={"kind": "adjacent", "width_elo": float(target_width_elo)},
        max_calls=budget.max_calls,
        budget_usd=budget.budget_usd,
        cost_per_call_usd=budget.cost_per_call_usd,
        calls=result.calls,
        rounds=[[x.comparisons, x.calls, round(x.widest_adjacent_elo, 3)] for x in done_rounds],
        widest_adjacent_elo=result.widest_adjacent_elo,
        stopped=stopped,
    )
    return result


def _item_run_budget(
    *,
    study: Study,
    judge: Judge,
    budget: JudgeBudget,
    run_round: Callable[[list[int]], None],
    set: str | None,
    orders: Sequence[str],
    repeats: int,
    on_round: Callable[[JudgeBudgetRound], None] | None,
    user: Any,
) -> JudgeBudgetRun:
    """A budget for calls about one rendering each (a checklist): the renderings never called, in
    brief then system order, as many as the budget buys, in one round (decision 0076). Whole briefs
    come first, so every system's score rests on the same briefs but for the last one reached."""
    _field, unit_ids, orders = run_units(study, judge_plan_of(study), orders, set)
    per = len(orders) * repeats
    called = frozenset(
        JudgeOutput.objects.filter(
            judge=judge, candidate_id__in=unit_ids, order__in=orders, repeat__lt=repeats
        ).values_list("candidate_id", flat=True)
    )
    pool = [pk for pk in unit_ids if pk not in called]
    if not pool:
        raise ArbiterError(f"{judge.name}: every rendering of {study.slug} has been called; nothing to spend the budget on")
    if budget.max_calls < per:
        raise ArbiterError(f"a budget of {budget.max_calls} calls is below one rendering's {per} calls")
    chosen = pool[: budget.max_calls // per]
    ids = _outputs_create(judge=judge, comparison_ids=chosen, orders=orders, repeats=repeats, field="candidate_id")
    run_round(ids)
    done = JudgeBudgetRound(index=1, comparisons=len(chosen), calls=len(chosen) * per, spent=len(chosen) * per,
                            widest_adjacent_elo=math.nan)
    if on_round:
        on_round(done)
    result = JudgeBudgetRun(judge=judge.name, budget=budget, per_comparison=per, rounds=(done,),
                            stopped=judge_stop_reason(judge), output_ids=tuple(ids), allocation="brief order")
    audit_record(
        action="judges.run_budget", user=user, study=study, target=judge.name, set="all", orders=list(orders),
        repeats=repeats, allocation="brief order", max_calls=budget.max_calls, budget_usd=budget.budget_usd,
        cost_per_call_usd=budget.cost_per_call_usd, calls=result.calls, renderings=len(chosen),
        stopped=result.stopped,
    )
    return result


def _outputs_create(
    *, judge: Judge, comparison_ids: Sequence[int], orders: Sequence[str], repeats: int, field: str = "comparison_id"
) -> list[int]:
    """The round's pending outputs (new rows: the pool holds only comparisons never called)."""
    with transaction.atomic():
        JudgeOutput.objects.bulk_create(
            [
                JudgeOutput(judge=judge, order=o, repeat=rep, **{field: cid})
                for cid in comparison_ids
                for o in orders
                for rep in range(repeats)
            ],
            ignore_conflicts=True,
            batch_size=1000,
        )
        return list(
            JudgeOutput.objects.filter(
                judge=judge,
                order__in=orders,
                **{f"{field}__in": list(comparison_ids)},
                repeat__lt=repeats,
                status=OutputStatus.PENDING,
            )
            .order_by("pk")
            .values_list("pk", flat=True)
        )


def judge_budget_report_section(*, study: Study) -> list[dict[str, Any]] | None:
    """What a leaderboard report says about judge calls spent by budget (None when none was)."""
    events = AuditEvent.objects.filter(study=study, action="judges.run_budget").order_by("created_at", "id")
    rows = [
        {
            "judge": e.target,
            "allocation": "adaptive",
            "rule": e.details.get("rule"),
            "uniform_floor": e.details.get("uniform_floor"),
            "target": e.details.get("allocation_target"),
            "set": e.details.get("set"),
            "max_calls": e.details.get("max_calls"),
            "budget_usd": e.details.get("budget_usd"),
            "calls": e.details.get("calls"),
            "rounds": len(e.details.get("rounds") or []),
        }
        for e in events
    ]
    return rows or None
