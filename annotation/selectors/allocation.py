"""The allocator's view of a study (docs/protocol.md "Adaptive allocation and stopping"): reads only.

A study's allocation is the study setting ``options["allocation"]`` (``uniform``, the default and
today's behaviour, or ``adaptive``), with its target in ``options["allocation_target"]``
(``{"kind": "top_k", "k": 3}`` by default). ``allocation_state`` fits the study's valid main votes
(Bradley–Terry, ``stats.allocation``), says which system pairs the allocator favours now, whether the
stopping rule has declared the top-k, and an estimate of the votes still needed. It is shown to
researchers only (the schedule and study pages), never to raters.

The votes are the same for both pairwise kinds (``valid_main_votes``): a ``pairwise_reference`` page's
candidates, or a ``pairwise`` brief's items, each of one system; valid main votes only (A, B, TIE;
no hidden repeat, no attention check, no voided assignment), as canonical points of system A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Count

from annotation.models import AssignmentState, AuditEvent, Study, System, Vote

if TYPE_CHECKING:
    import numpy as np

    from stats.allocation import PairFit, Target

ALLOCATIONS = ("uniform", "adaptive")
#: The estimator an adaptive study of whole blocks reports (no per-trial probability to weight by).
BLOCK_ADAPTATION_ESTIMATOR = (
    "Bradley–Terry, not debiased (block adaptation stores no per-trial allocation probability)"
)
_VALUE = {"A": 1.0, "TIE": 0.5, "B": 0.0}


def serves_at_request(study: Study) -> bool:
    """True for an adaptive ``pairwise_reference`` study (serve-time blocks after the uniform start);
    ``options["adaptation"] = "block"`` keeps whole adaptive blocks."""
    options = study.options or {}
    return (
        options.get("allocation") == "adaptive"
        and options.get("adaptation", "serve") == "serve"
        and study.kind == "pairwise_reference"
    )


def study_allocation(study: Study) -> str:
    value = (study.options or {}).get("allocation", "uniform")
    return value if value in ALLOCATIONS else "uniform"


def allocation_target(study: Study) -> Target:
    from stats.allocation import Target

    raw = (study.options or {}).get("allocation_target") or {}
    return Target(
        kind=str(raw.get("kind", "top_k")),
        k=int(raw.get("k", 3)),
        width_elo=float(raw.get("width_elo", 50.0)),
    )


@dataclass(frozen=True)
class FavouredPair:
    system_a: str
    system_b: str
    share: float  # share of the next block's votes the allocator gives this pair (floor included)
    votes: int  # valid main votes so far


@dataclass(frozen=True)
class AllocationState:
    allocation: str
    rule: str
    floor: float
    target: Target
    systems: tuple[str, ...]
    votes: int
    fit: PairFit
    shares: np.ndarray  # (K,) share of the next block per pair, floor included
    declared: bool
    top: tuple[str, ...]
    votes_needed: int | None  # estimate of the further votes until the stopping rule declares

    def favoured(self, n: int = 10) -> list[FavouredPair]:
        import numpy as np

        from stats.allocation import pair_indices

        first, second = pair_indices(len(self.systems))
        order = np.argsort(-self.shares, kind="stable")[:n]
        return [
            FavouredPair(
                self.systems[first[k]],
                self.systems[second[k]],
                float(self.shares[k]),
                int(self.fit.votes[0, k]),
            )
            for k in order
        ]


def _valid_main_vote_rows(study: Study) -> Any:
    """The valid main votes: A, B or TIE, no hidden repeat, gold or attention trial, no voided
    assignment."""
    return Vote.objects.filter(
        trial__assignment__block__study=study, trial__is_repeat=False, trial__attention_expected="",
        trial__comparison__isnull=False, label__in=list(_VALUE),
    ).exclude(trial__assignment__state=AssignmentState.VOIDED)


def valid_main_votes(study: Study) -> list[tuple[str, str, str, float | None]]:
    """(system A, system B, label, allocation probability) of every valid main vote; the
    probability is a serve-time trial's (None for the others). One query, no per-vote lookup."""
    return list(
        _valid_main_vote_rows(study).values_list(
            "trial__comparison__candidate_a__system__external_id",
            "trial__comparison__candidate_b__system__external_id",
            "label",
            "trial__allocation_probability",
        )
    )


def study_pair_votes(study: Study) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(systems, votes per pair, points of the pair's first system) from the valid main votes.

    Counted by the database (one row per system pair and label), so a serve-time refit reads a few
    rows whatever the number of votes."""
    import numpy as np

    from stats.serving import pair_column_of

    systems = tuple(
        System.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("external_id", flat=True)
    )
    m = len(systems)
    k_pairs = m * (m - 1) // 2
    votes = np.zeros(k_pairs)
    points = np.zeros(k_pairs)
    if m < 2:
        return systems, votes, points
    index = {s: i for i, s in enumerate(systems)}
    counted = (
        _valid_main_vote_rows(study)
        .values_list("trial__comparison__candidate_a__system__external_id",
                     "trial__comparison__candidate_b__system__external_id", "label")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for a, b, label, n in counted:
        i, j = index[a], index[b]
        column = pair_column_of(i, j, m)
        y = _VALUE[label]
        votes[column] += n
        points[column] += n * (y if i < j else 1.0 - y)
    return systems, votes, points


def _votes_needed(fit: PairFit, target: Target, votes: int) -> int | None:
    """Further votes until every boundary contrast clears the stopping rule's boundary, if the
    variances shrank as 1 / votes with the gaps as now (an estimate, shown as such)."""
    import numpy as np

    from stats.allocation import contrast_variance, target_contrasts
    from stats.stopping import STOPPING_ALPHA, TUNED_HALF_WIDTH_ELO, mixture_half_width, mixture_precision

    if target.kind != "top_k" or votes == 0:
        return None
    m = fit.n_systems
    better, worse, _ = target_contrasts(fit, target)
    rows = np.arange(1)[:, None]
    gaps = np.abs(fit.theta[rows, better] - fit.theta[rows, worse])[0]
    v = contrast_variance(fit.covariance, better, worse)[0]
    level = STOPPING_ALPHA / (target.k * (m - target.k))
    rho = mixture_precision(level, TUNED_HALF_WIDTH_ELO)
    worst = 1.0
    for gap, var in zip(gaps, v, strict=True):
        if gap < 1e-6:
            return None
        low, high = 1.0, 1.0
        while gap <= float(mixture_half_width(np.array(var / high), alpha=level, rho=rho)):
            high *= 2.0
            if high > 1e6:
                return None
        for _ in range(40):
            mid = math.sqrt(low * high)
            if gap > float(mixture_half_width(np.array(var / mid), alpha=level, rho=rho)):
                high = mid
            else:
                low = mid
        worst = max(worst, high)
    return math.ceil(votes * (worst - 1.0))


def allocation_state(*, study: Study) -> AllocationState | None:
    """The allocator's current view of an adaptive study (None for a study of fewer than 2 systems)."""
    import numpy as np

    from stats.allocation import UNIFORM_FLOOR, adaptive_rule, allocation_weights, fit_pairs
    from stats.stopping import top_k_declaration

    systems, votes, points = study_pair_votes(study)
    m = len(systems)
    target = allocation_target(study)
    if m < 2 or (target.kind == "top_k" and target.k >= m):
        return None
    fit = fit_pairs(votes[None, :], points[None, :])
    n_votes = int(votes.sum())
    rng = np.random.default_rng([int(study.seed), n_votes, 31])
    rule = adaptive_rule(target.kind)
    rule_shares = allocation_weights(rule, fit, target, rng=rng)[0]
    shares = UNIFORM_FLOOR / len(votes) + (1.0 - UNIFORM_FLOOR) * rule_shares
    declared, top = (
        top_k_declaration(fit, target.k)
        if target.kind == "top_k"
        else (np.array([False]), np.zeros((1, 0), dtype=np.int64))
    )
    return AllocationState(
        allocation=study_allocation(study),
        rule=rule,
        floor=UNIFORM_FLOOR,
        target=target,
        systems=systems,
        votes=n_votes,
        fit=fit,
        shares=shares,
        declared=bool(declared[0]) and n_votes > 0,
        top=tuple(systems[i] for i in top[0]),
        votes_needed=0 if (bool(declared[0]) and n_votes > 0) else _votes_needed(fit, target, n_votes),
    )


def score_elo(state: AllocationState) -> dict[str, float]:
    from stats.bradley_terry import SCORE_SCALE

    return {s: float(SCORE_SCALE * t) for s, t in zip(state.systems, state.fit.theta[0], strict=True)}


def adaptive_scores(study: Study) -> dict[str, Any] | None:
    """The systems' scores from an adaptive study's valid main votes, with the estimator's name
    (docs/protocol.md "Scores of an adaptive study"); None with fewer than 2 systems or no vote.

    Serve-time studies: ``debiased_bradley_terry``, each vote weighted by the inverse of the
    probability its pair had when it was served (``Trial.allocation_probability``; 1 / K for the
    uniform start's votes). Block adaptation stores no per-trial probability: the plain fit, named so.
    """
    import numpy as np

    from stats.adaptive_estimation import debiased_bradley_terry, ipw_bradley_terry

    systems = tuple(
        System.objects.filter(study=study).order_by("position", "external_id").values_list("external_id", flat=True)
    )
    m = len(systems)
    rows = valid_main_votes(study)
    index = {s: i for i, s in enumerate(systems)}
    rows = [r for r in rows if r[0] in index and r[1] in index]
    if m < 2 or not rows:
        return None
    k_pairs = m * (m - 1) // 2
    first = np.array([index[r[0]] for r in rows])
    second = np.array([index[r[1]] for r in rows])
    points = np.array([_VALUE[r[2]] for r in rows])
    served = serves_at_request(study)
    propensity = np.array([float(r[3]) if served and r[3] is not None else 1.0 / k_pairs for r in rows])
    if served:
        fit = debiased_bradley_terry(first, second, points, propensity, m, seed=int(study.seed))
        estimator = fit.estimator
    else:
        fit = ipw_bradley_terry(first, second, points, propensity, m)
        estimator = BLOCK_ADAPTATION_ESTIMATOR
    low, high = fit.intervals()
    scores = fit.scores[0]
    order = sorted(range(m), key=lambda i: -scores[i])
    return {
        "estimator": estimator,
        "votes": len(rows),
        "systems": [
            {"system": systems[i], "score": round(float(scores[i]), 2),
             "ci95": [round(float(low[0, i]), 2), round(float(high[0, i]), 2)]}
            for i in order
        ],
    }


def allocation_context(study: Study) -> dict[str, Any]:
    """The adaptive allocator's state for a researcher page (empty for a uniform study)."""
    if study_allocation(study) != "adaptive":
        return {}
    state = allocation_state(study=study)
    return {"allocation": state, "favoured": state.favoured(10) if state else [],
            "adaptive_scores": adaptive_scores(study), "serves_at_request": serves_at_request(study)}


def allocation_report_section(study: Study) -> dict[str, Any] | None:
    """What a report says about an adaptive study: the rule, the floor, the stopping rule and
    whether it has declared the target (None for a uniform study, whose reports are unchanged)."""
    from stats.allocation import UNIFORM_FLOOR, adaptive_rule
    from stats.stopping import STOPPING_ALPHA

    if study_allocation(study) != "adaptive":
        return None
    state = allocation_state(study=study)
    target = allocation_target(study)
    return {
        "allocation": "adaptive",
        "rule": adaptive_rule(target.kind),
        "uniform_floor": UNIFORM_FLOOR,
        "target": {"kind": target.kind, "k": target.k, "width_elo": target.width_elo},
        "stopping_rule": "anytime-valid normal-mixture confidence sequence on Bradley-Terry differences, "
        f"Bonferroni over the k(M-k) boundary pairs, alpha {STOPPING_ALPHA}",
        "adaptive_blocks": AuditEvent.objects.filter(study=study, action="adaptive_block").count(),
        "stopped_early": bool(state.declared) if state else False,
        "declared_top": list(state.top) if state and state.declared else None,
        "adaptation": (study.options or {}).get("adaptation", "serve"),
        "scores": adaptive_scores(study),
    }
