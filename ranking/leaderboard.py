"""The leaderboard of a study from a frozen coefficient set (docs/protocol.md "Deployment leaderboard",
"Report keys"): the checks of a request, the scored inputs and their JSON snapshot, the bootstrap
(Bradley–Terry or Davidson, in seeded chunks), the report, and ``leaderboard_compute``, which the
``leaderboard`` command calls.

The queued runs behind the page and the REST endpoint (``ranking.leaderboard_runs``) use the same
pieces and give the same report. The report's files are ``ranking.rendering``; the formulas live
in the pure modules ``stats.bradley_terry``, ``stats.davidson``, ``stats.bootstrap`` and ``stats.proxy``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from annotation.errors import ArbiterError, NotFound, ValidationFailed
from annotation.models import Study
from calibration.models import CoefficientSet
from calibration.services.agreement import check_bootstrap_options
from ranking.models import Leaderboard, RankingModel
from ranking.selectors import LeaderboardInputs, leaderboard_inputs, study_system_ids
from ranking.versions import leaderboard_earlier, scoring_provenance, version_sensitivity

if TYPE_CHECKING:
    import numpy as np

    from stats.bradley_terry import BootstrapResult
    from stats.davidson import DavidsonBootstrap

DEFAULT_RESAMPLES = 2000  # docs/protocol.md "Deployment leaderboard" (paper)
DEFAULT_SEED = 20260831  # docs/protocol.md "Deployment leaderboard" (paper)
MAX_RESAMPLES = 100_000
PROGRESS_PREPARED = 0.05

ProgressCallback = Callable[[float], None]


# --------------------------------------------------------------------------- options and input files


def check_leaderboard_options(resamples: Any, seed: Any) -> tuple[int, int]:
    """Bootstrap resamples (1…MAX_RESAMPLES) and seed (≥ 0), as integers; one-line error otherwise."""
    return check_bootstrap_options(resamples, seed, max_resamples=MAX_RESAMPLES)


def check_ranking_model(model: Any) -> str:
    """``bradley_terry`` (docs/protocol.md "Deployment leaderboard", the default) or ``davidson``; one-line
    error otherwise."""
    value = RankingModel.BRADLEY_TERRY.value if model in (None, "") else str(model).strip().lower()
    if value not in RankingModel.values:
        raise ValidationFailed(
            f"expected one of {', '.join(RankingModel.values)}, got {model!r}", field="model"
        )
    return value


def check_objective(*, study: Study, objective: Mapping[str, Any] | None) -> dict[str, float]:
    """An objective mapping from the API/page: known systems, finite numeric scores."""
    if not objective:
        return {}
    if not isinstance(objective, Mapping):
        raise ValidationFailed("expected an object {system: score}", field="objective")
    systems = study_system_ids(study=study)
    out: dict[str, float] = {}
    for system, score in objective.items():
        if system not in systems:
            raise ValidationFailed(f"unknown system {system!r}", field=f"objective.{system}")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(float(score)):
            raise ValidationFailed(f"expected a finite number, got {score!r}", field=f"objective.{system}")
        out[str(system)] = float(score)
    return out


def leaderboard_source(
    *, study: Study, coefficient_set: CoefficientSet | str | None, compare_to: Any = None
) -> CoefficientSet | None:
    """The frozen set a leaderboard scores judges with, or None for the human votes
    (docs/protocol.md "Human leaderboard"), checked."""
    if coefficient_set is None:
        check_human_study(study)
        if compare_to not in (None, ""):
            raise ValidationFailed(
                "compare_to compares judge leaderboards (their outputs' versions); a leaderboard of "
                "human votes has none",
                field="compare_to",
            )
        return None
    return coefficient_set_for(study=study, coefficient_set=coefficient_set)


def coefficient_set_for(*, study: Study, coefficient_set: CoefficientSet | str) -> CoefficientSet:
    """The study's frozen set (given or by name); one-line NotFound naming the known sets."""
    if isinstance(coefficient_set, CoefficientSet):
        if coefficient_set.study_id != study.pk:
            raise NotFound(f"coefficient set {coefficient_set.name!r} belongs to another study")
        return coefficient_set
    found = CoefficientSet.objects.filter(study=study, name=coefficient_set).first()
    if found is None:
        known = list(
            CoefficientSet.objects.filter(study=study).order_by("name").values_list("name", flat=True)
        )
        raise NotFound(
            f"study {study.slug} has no coefficient set {coefficient_set!r} (frozen sets: {', '.join(known) or 'none'})"
        )
    return found


# --------------------------------------------------------------------------- the leaderboard maths


HUMAN_KINDS = ("pairwise_reference", "pairwise")


def check_human_study(study: Study) -> None:
    """A human leaderboard ranks pairwise votes (docs/protocol.md "Human leaderboard")."""
    if study.kind not in HUMAN_KINDS:
        raise ValidationFailed(
            f"study {study.slug} is of kind {study.kind}: a leaderboard of human votes ranks the pairwise "
            f"kinds ({', '.join(HUMAN_KINDS)}); `kind_report {study.slug}` reports this kind",
            field="coefficients",
        )


def leaderboard_prepare(
    *, study: Study, coefficient_set: CoefficientSet | None, use_human_labels: bool = False
) -> LeaderboardInputs:
    """The scored comparisons (docs/protocol.md "Deployment leaderboard"), or with no coefficient set
    the study's human votes (docs/protocol.md "Human leaderboard"); refuses when fewer than two
    systems can be ranked."""
    if coefficient_set is None:
        return _human_prepare(study=study)
    inputs = leaderboard_inputs(
        study=study, coefficient_set=coefficient_set, use_human_labels=use_human_labels
    )
    if inputs.n_comparisons == 0:
        raise ArbiterError(
            f"no comparison of study {study.slug} can be scored with coefficient set {coefficient_set.name!r}: "
            f"{inputs.n_skipped} comparisons lack a valid primary-order, repeat-0 output from some judge of the set "
            f"({', '.join(inputs.judges) or 'no judges'})"
        )
    if len(inputs.systems) < 2:
        raise ArbiterError(f"study {study.slug}: the scored comparisons involve fewer than two systems")
    return inputs


def _human_prepare(*, study: Study) -> LeaderboardInputs:
    from dataclasses import replace

    from annotation.selectors.allocation import (
        BLOCK_ADAPTATION_ESTIMATOR,
        serves_at_request,
        study_allocation,
    )
    from ranking.selectors import human_leaderboard_inputs

    check_human_study(study)
    debiased = serves_at_request(study)
    inputs = human_leaderboard_inputs(study=study, debiased=debiased)
    if study_allocation(study) == "adaptive" and not debiased:
        inputs = replace(inputs, estimator=BLOCK_ADAPTATION_ESTIMATOR)
    if not inputs.from_human.any():
        kept = ""
        if inputs.exclusions is not None and inputs.exclusions.get("n_votes"):
            ex = inputs.exclusions
            kept = (
                f" (the study's saved exclusion rules kept {ex['n_kept_votes']} of {ex['n_votes']} votes, "
                f"{ex['n_kept_raters']} of {ex['n_raters']} raters: see its quality page)"
            )
        raise ArbiterError(
            f"study {study.slug} has no valid main vote (A, B or TIE, no hidden repeat, on a rendered "
            f"comparison) to rank{kept}"
        )
    if len(inputs.systems) < 2:
        raise ArbiterError(f"study {study.slug}: the votes involve fewer than two systems")
    return inputs


def inputs_snapshot(inputs: LeaderboardInputs) -> dict[str, Any]:
    """JSON form of the inputs (floats round-trip exactly through JSON)."""
    return {
        "systems": list(inputs.systems),
        "names": list(inputs.names),
        "comparisons": list(inputs.comparisons),
        "pages": list(inputs.pages),
        "a": inputs.a.tolist(),
        "b": inputs.b.tolist(),
        "p": inputs.p.tolist(),
        "from_human": inputs.from_human.tolist(),
        "n_skipped": inputs.n_skipped,
        "judges": list(inputs.judges),
        "coefficients": list(inputs.coefficients),
        **({"exclusions": inputs.exclusions} if inputs.exclusions is not None else {}),
        **({"render_failures": inputs.render_failures} if inputs.render_failures is not None else {}),
        **(
            {"from_render_failure": inputs.from_render_failure.tolist()}
            if inputs.from_render_failure is not None and inputs.from_render_failure.any()
            else {}
        ),
        **(
            {"propensity": inputs.propensity.tolist(), "debias_seed": inputs.debias_seed}
            if inputs.propensity is not None
            else {}
        ),
        **({"estimator": inputs.estimator} if inputs.estimator else {}),
    }


def inputs_from_snapshot(data: Mapping[str, Any]) -> LeaderboardInputs:
    import numpy as np

    return LeaderboardInputs(
        systems=tuple(data["systems"]),
        names=tuple(data["names"]),
        comparisons=tuple(data["comparisons"]),
        pages=tuple(data["pages"]),
        a=np.asarray(data["a"], dtype=np.int64),
        b=np.asarray(data["b"], dtype=np.int64),
        p=np.asarray(data["p"], dtype=np.float64),
        from_human=np.asarray(data["from_human"], dtype=bool),
        n_skipped=int(data["n_skipped"]),
        judges=tuple(data["judges"]),
        coefficients=tuple(float(x) for x in data["coefficients"]),
        exclusions=data.get("exclusions"),
        render_failures=data.get("render_failures"),
        from_render_failure=np.asarray(data["from_render_failure"], dtype=bool)
        if "from_render_failure" in data
        else None,
        propensity=np.asarray(data["propensity"], dtype=np.float64) if "propensity" in data else None,
        debias_seed=int(data.get("debias_seed", 0)),
        estimator=str(data.get("estimator", "")),
    )


def bootstrap_chunk(
    inputs: LeaderboardInputs,
    *,
    resamples: int,
    seed: int,
    start: int,
    stop: int,
    counts: np.ndarray | None = None,
) -> BootstrapResult:
    """Rows ``start..stop`` of the docs/protocol.md "Deployment leaderboard" page-block bootstrap (units =
    pages, one stratum)."""
    from stats.bootstrap import bootstrap_units
    from stats.bradley_terry import bootstrap_bradley_terry

    units = bootstrap_units(list(inputs.pages))
    return bootstrap_bradley_terry(
        inputs.a,
        inputs.b,
        inputs.p,
        len(inputs.systems),
        units,
        resamples=resamples,
        seed=seed,
        chunk=(start, stop),
        counts=counts,
    )


def davidson_bootstrap_chunk(
    inputs: LeaderboardInputs, *, resamples: int, seed: int, start: int, stop: int
) -> DavidsonBootstrap:
    """Rows ``start..stop`` of the same page-block bootstrap, refitting the Davidson model."""
    from stats.bootstrap import bootstrap_units
    from stats.davidson import bootstrap_davidson

    try:
        return bootstrap_davidson(
            inputs.a,
            inputs.b,
            inputs.p,
            len(inputs.systems),
            bootstrap_units(list(inputs.pages)),
            resamples=resamples,
            seed=seed,
            chunk=(start, stop),
        )
    except ValueError as exc:
        raise ArbiterError(f"Davidson model: {exc}") from None


def check_davidson_identified(inputs: LeaderboardInputs) -> None:
    """The Davidson tie parameter needs both tie and win mass among the scored outcomes; an adaptive
    study's scores are the debiased Bradley–Terry fit (docs/protocol.md "Scores of an adaptive
    study"), which has no Davidson form."""
    from stats.davidson import fit_davidson_outcomes

    if inputs.propensity is not None:
        raise ArbiterError(
            "Davidson model: an adaptive study's scores are its debiased Bradley–Terry fit "
            '(docs/protocol.md "Scores of an adaptive study"); compute the leaderboard with bradley_terry'
        )
    try:
        fit_davidson_outcomes(inputs.a, inputs.b, inputs.p, len(inputs.systems))
    except ValueError as exc:
        raise ArbiterError(f"Davidson model: {exc}") from None


def _model_comparison(
    inputs: LeaderboardInputs,
    bt_theta: np.ndarray,
    bt_ranks: np.ndarray,
    dv_theta: np.ndarray,
    dv_ranks: np.ndarray,
) -> dict[str, Any]:
    """Davidson vs Bradley–Terry: tie-aware Spearman ρ / Kendall τ of θ and per-system rank change."""
    import numpy as np

    from stats.bradley_terry import SCORE_SCALE
    from stats.rank_correlation import correlation_reason, kendall_tie_aware, spearman_tie_aware

    per_system = [
        {
            "system": inputs.systems[k],
            "rank_bradley_terry": int(bt_ranks[k]),
            "rank_davidson": int(dv_ranks[k]),
            "rank_change": int(bt_ranks[k]) - int(dv_ranks[k]),
            "score_bradley_terry": float(SCORE_SCALE * bt_theta[k]),
            "score_davidson": float(SCORE_SCALE * dv_theta[k]),
        }
        for k in np.argsort(dv_ranks, kind="stable")
    ]
    return {
        "spearman": _float_or_none(spearman_tie_aware(bt_theta, dv_theta)),
        "kendall": _float_or_none(kendall_tie_aware(bt_theta, dv_theta)),
        "reason": correlation_reason(bt_theta, dv_theta),
        "max_rank_change": max(abs(row["rank_change"]) for row in per_system),
        "rank_change": "Bradley–Terry rank − Davidson rank (positive: Davidson ranks the system higher)",
        "per_system": per_system,
    }


def chunk_bounds(resamples: int, chunk_resamples: int) -> list[tuple[int, int]]:
    size = max(1, int(chunk_resamples))
    return [(lo, min(resamples, lo + size)) for lo in range(0, resamples, size)]


def check_objective_coverage(systems: list[str], objective: Mapping[str, float]) -> None:
    """At least two ranked systems must have an objective score to correlate."""
    n = sum(1 for system in systems if system in objective)
    if n < 2:
        raise ArbiterError(
            f"the objective leaderboard scores {n} of the ranked systems; at least 2 are needed"
        )


def objective_correlations(systems: list[dict[str, Any]], objective: Mapping[str, float]) -> dict[str, Any]:
    """docs/protocol.md "Deployment leaderboard" objective vs subjective: Spearman ρ and Kendall τ (scipy) of
    the objective scores against the Bradley–Terry scores, over the ranked systems that have an objective
    score.

    Undefined correlations (every objective score equal, or every fitted score tied) are null
    with a ``reason``; ``reason`` is null when both are defined.
    """
    import numpy as np

    check_objective_coverage([row["system"] for row in systems], objective)
    common = [row for row in systems if row["system"] in objective]
    from scipy import stats  # imported here: only --objective needs it (a second of start-up otherwise)

    from stats.rank_correlation import theta_of_scores, tied_theta

    x = np.array([objective[row["system"]] for row in common], dtype=float)
    # Fitted scores tie-grouped as the ranks are, so exactly tied systems stay tied (audit F1).
    y = tied_theta(theta_of_scores(np.array([row["score"] for row in common], dtype=float)))
    reason: str | None = None
    if np.ptp(x) == 0:
        reason = (
            f"every one of the {len(common)} systems has the same objective score ({x[0]:g}): "
            "the rank correlation is undefined"
        )
    elif np.ptp(y) == 0:
        reason = f"the {len(common)} systems are all tied in the fitted ranking: the rank correlation is undefined"
    if reason is None:
        rho, tau = stats.spearmanr(x, y).statistic, stats.kendalltau(x, y).statistic
    else:
        rho = tau = math.nan
    return {
        "spearman": _float_or_none(rho),
        "kendall": _float_or_none(tau),
        "reason": reason,
        "n_systems": len(common),
        "systems_without_objective": [row["system"] for row in systems if row["system"] not in objective],
    }


_objective_correlations = objective_correlations  # its earlier name (tests/calibration/test_audit_findings.py)


def _float_or_none(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def coefficient_set_exclusions(cset: CoefficientSet) -> dict[str, Any] | None:
    """The ``exclusions`` object of the calibration report a coefficient set was frozen from."""
    found = (cset.report or {}).get("exclusions")
    return dict(found) if isinstance(found, Mapping) else None


def leaderboard_report(
    *,
    inputs: LeaderboardInputs,
    coefficient_set_name: str | None,
    boot: BootstrapResult | DavidsonBootstrap,
    use_human_labels: bool = False,
    objective: Mapping[str, float] | None = None,
    coefficient_exclusions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The docs/protocol.md "Report keys" leaderboard JSON from the inputs and the (merged) bootstrap.

    ``exclusions`` (with human labels and rules in force) says what the study's exclusion rules
    removed from the labels' votes; ``coefficient_set_exclusions`` repeats the ``exclusions`` of the
    calibration the coefficient set was frozen from (``coefficient_exclusions``), when it had any.

    With a ``DavidsonBootstrap`` the scores, ranks and intervals are the Davidson model's, and the
    report adds its ``tie_parameter`` and a ``model_comparison`` with Bradley–Terry.

    With no coefficient set the outcomes are the study's human votes (docs/protocol.md "Human
    leaderboard"): ``coefficients`` is null, ``outcomes`` says ``human votes`` and ``n_votes``
    counts them. When the inputs carry allocation probabilities (a serve-time adaptive study) the
    scores and intervals are the debiased fit's (docs/protocol.md "Scores of an adaptive study")
    and its rank intervals come from draws of that fit, not from the bootstrap. ``estimator`` names
    what the scores are, always. Every report flags the systems whose score the penalty sets
    (``penalty``) and names the pairs with no outcome (docs/protocol.md "Scores set by the penalty").
    """
    from stats.bradley_terry import appearances, fit_bradley_terry, pairs_without_outcomes, soft_preference
    from stats.davidson import DavidsonBootstrap, fit_davidson_outcomes

    m = len(inputs.systems)
    bt = fit_bradley_terry(inputs.a, inputs.b, inputs.p, m)
    tie_boot = boot if isinstance(boot, DavidsonBootstrap) else None
    davidson = tie_boot is not None
    result: BootstrapResult = boot.result if isinstance(boot, DavidsonBootstrap) else boot
    if tie_boot is not None:
        dv = fit_davidson_outcomes(inputs.a, inputs.b, inputs.p, m)
        fit_scores, fit_ranks = dv.scores, dv.ranks
    else:
        fit_scores, fit_ranks = bt.scores, bt.ranks
    soft = soft_preference(inputs.a, inputs.b, inputs.p, m)
    appear = appearances(inputs.a, inputs.b, m)
    rows: list[dict[str, Any]] = []
    for k in range(m):
        rows.append(
            {
                "system": inputs.systems[k],
                "name": inputs.names[k],
                "rank": int(fit_ranks[k]),
                "score": float(fit_scores[k]),
                "ci95": [float(result.ci95[k, 0]), float(result.ci95[k, 1])],
                "rank_ci95": [int(result.rank_ci95[k, 0]), int(result.rank_ci95[k, 1])],
                "soft_preference": float(soft[k]),
                "appearances": int(appear[k]),
                "rank1_share": float(result.rank1_share[k]),
            }
        )
    estimator = _human_estimator(inputs, rows, seed=int(result.seed), resamples=int(result.resamples))
    if estimator is None:
        estimator = inputs.estimator or ("Davidson" if davidson else "Bradley–Terry")
    penalty_rows(inputs, rows)
    rows.sort(key=lambda row: row["rank"])
    report: dict[str, Any] = {
        "coefficients": coefficient_set_name,
        "outcomes": "human votes" if coefficient_set_name is None else "judge proxy",
        "estimator": estimator,
        "judges": dict(zip(inputs.judges, inputs.coefficients, strict=True)),
        "n_comparisons": inputs.n_comparisons,
        "n_skipped": inputs.n_skipped,
        "n_pages": inputs.n_pages,
        "use_human_labels": bool(use_human_labels),
        "n_human_labels": int(inputs.from_human.sum()),
        "bootstrap": {
            "resamples": int(result.resamples),
            "seed": int(result.seed),
            "units": "pages",
            "strata": 1,
        },
        "model": RankingModel.DAVIDSON.value if davidson else RankingModel.BRADLEY_TERRY.value,
        "systems": rows,
        "pairs_without_outcomes": [
            [inputs.systems[i], inputs.systems[j]] for i, j in pairs_without_outcomes(inputs.a, inputs.b, m)
        ],
    }
    if coefficient_set_name is None:
        report["n_votes"] = int(inputs.from_human.sum())
        if inputs.propensity is not None:
            report["bootstrap"] = {
                "resamples": int(result.resamples),
                "seed": int(result.seed),
                "units": "normal draws of the debiased fit (rank intervals and rank-1 shares only)",
                "strata": 1,
            }
    if tie_boot is not None:
        report["tie_parameter"] = {
            "value": dv.tie_parameter,
            "ci95": list(tie_boot.tie_ci95),
            "meaning": "ν of the Davidson model: P(TIE) = ν / (e^{d/2} + e^{−d/2} + ν) for θ difference d",
        }
        report["outcomes"] = "p̂ as soft labels: A = max(0, 2p̂ − 1), TIE = 1 − |2p̂ − 1|, B = max(0, 1 − 2p̂)"
        report["model_comparison"] = _model_comparison(inputs, bt.theta, bt.ranks, dv.theta, dv.ranks)
    if inputs.exclusions is not None:  # the human labels' votes, as the agreement report keeps them
        report["exclusions"] = inputs.exclusions
    if inputs.render_failures is not None:  # docs/protocol.md "Failed renders in the leaderboard"
        report["render_failures"] = inputs.render_failures
    if coefficient_exclusions is not None:  # the human reference the coefficient set was fitted on
        report["coefficient_set_exclusions"] = coefficient_exclusions
    if objective:
        report["objective_vs_subjective"] = objective_correlations(rows, objective)
    return report


def _human_estimator(
    inputs: LeaderboardInputs, rows: list[dict[str, Any]], *, seed: int, resamples: int
) -> str | None:
    """A serve-time adaptive study's human leaderboard: its rows' scores, ranks and intervals from
    the debiased fit (docs/protocol.md "Scores of an adaptive study"), rank intervals and rank-1
    shares from ``resamples`` seeded draws of it; returns the estimator's name (None: not such a
    study, the rows are left as they are)."""
    if inputs.propensity is None:
        return None
    from stats.adaptive_estimation import debiased_bradley_terry, rank_draws
    from stats.bradley_terry import ranks_from_theta

    m = len(inputs.systems)
    fit = debiased_bradley_terry(inputs.a, inputs.b, inputs.p, inputs.propensity, m, seed=inputs.debias_seed)
    low, high = fit.intervals()
    ranks = ranks_from_theta(fit.theta[0])
    rank_ci95, rank1 = rank_draws(fit, draws=resamples, seed=seed)
    for k, row in enumerate(rows):
        row["rank"] = int(ranks[k])
        row["score"] = float(fit.scores[0, k])
        row["ci95"] = [float(low[0, k]), float(high[0, k])]
        row["rank_ci95"] = [int(rank_ci95[k, 0]), int(rank_ci95[k, 1])]
        row["rank1_share"] = float(rank1[k])
    return fit.estimator


def penalty_rows(inputs: LeaderboardInputs, rows: list[dict[str, Any]]) -> None:
    """Each row's ``penalty``: ``"score set by the penalty: no win"`` (or ``no loss``) when no outcome
    gives the system a point (takes one from it), with ``ci95_note`` on the interval; null otherwise
    (docs/protocol.md "Scores set by the penalty"). ``rows`` are in the inputs' system order."""
    from stats.bradley_terry import penalty_set

    flags = penalty_set(inputs.a, inputs.b, inputs.p, len(inputs.systems))
    for row, flag in zip(rows, flags, strict=True):
        row["penalty"] = None if flag is None else f"score set by the penalty: {flag}"
        row["ci95_note"] = (
            None
            if flag is None
            else (
                "the interval's lower end is the penalty's, not the data's: no vote bounds it"
                if flag == "no win"
                else "the interval's upper end is the penalty's, not the data's: no vote bounds it"
            )
        )


def leaderboard_compute(
    *,
    study: Study,
    coefficient_set: CoefficientSet | str | None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    use_human_labels: bool = False,
    objective: dict[str, float] | None = None,
    progress: ProgressCallback | None = None,
    model: str = RankingModel.BRADLEY_TERRY,
    compare_to: Leaderboard | int | str | None = None,
    record: list[Leaderboard] | None = None,
) -> dict[str, Any]:
    """The docs/protocol.md "Deployment leaderboard" leaderboard of ``study`` as the
    docs/protocol.md "Report keys" JSON dict.

    ``objective``: ``{system: score}`` of an imported objective leaderboard (adds
    ``objective_vs_subjective``). ``progress(fraction)`` is called as the bootstrap advances
    (it then runs in ten seeded chunks of the same count matrix; the result is identical).
    ``model="davidson"`` fits the Davidson tie model instead (same bootstrap) and compares it with
    Bradley–Terry.
    Beyond docs/protocol.md "Report keys", ``judge_outputs`` says how many scored outputs were reused and how
    many are new; ``compare_to`` (an earlier leaderboard of the study) adds ``version_sensitivity``
    (paper B.5, ``ranking.versions``). With a ``record`` list, the result is also stored as a
    finished Leaderboard (appended to it) that a later run can be compared to; the JSON itself
    holds no id, so the same inputs and seed give the same file.

    ``coefficient_set=None``: the leaderboard of the study's human votes (docs/protocol.md "Human
    leaderboard"; no ``judge_outputs``, no ``compare_to``).
    """
    from stats.bootstrap import bootstrap_page_blocks, bootstrap_units
    from stats.bradley_terry import merge_bootstrap_results

    resamples, seed = check_leaderboard_options(resamples, seed)
    model = check_ranking_model(model)
    cset = leaderboard_source(study=study, coefficient_set=coefficient_set, compare_to=compare_to)
    use_human_labels = bool(use_human_labels) and cset is not None
    objective = check_objective(study=study, objective=objective)
    earlier = leaderboard_earlier(study=study, leaderboard=compare_to) if compare_to is not None else None
    started_at = timezone.now()
    inputs = leaderboard_prepare(study=study, coefficient_set=cset, use_human_labels=use_human_labels)
    boot: BootstrapResult | DavidsonBootstrap
    if model == RankingModel.DAVIDSON:
        check_davidson_identified(inputs)
        boot = davidson_bootstrap_chunk(inputs, resamples=resamples, seed=seed, start=0, stop=resamples)
    elif progress is None:
        boot = bootstrap_chunk(inputs, resamples=resamples, seed=seed, start=0, stop=resamples)
    else:
        progress(PROGRESS_PREPARED)
        counts = bootstrap_page_blocks(bootstrap_units(list(inputs.pages)), resamples=resamples, seed=seed)
        parts = []
        bounds = chunk_bounds(resamples, math.ceil(resamples / 10))
        for k, (lo, hi) in enumerate(bounds, start=1):
            parts.append(
                bootstrap_chunk(inputs, resamples=resamples, seed=seed, start=lo, stop=hi, counts=counts)
            )
            progress(PROGRESS_PREPARED + (1 - PROGRESS_PREPARED) * k / len(bounds))
        boot = merge_bootstrap_results(parts)
    report = leaderboard_report(
        inputs=inputs,
        coefficient_set_name=cset.name if cset is not None else None,
        boot=boot,
        use_human_labels=use_human_labels,
        objective=objective,
        coefficient_exclusions=coefficient_set_exclusions(cset) if cset is not None else None,
    )
    from ranking.objective_scores import objective_section

    objective_scores = objective_section(
        study=study, systems=report["systems"], resamples=resamples, seed=seed, correlate=objective_correlations
    )
    if objective_scores is not None:  # docs/protocol.md "Objective scores beside the rankings"
        report["objective_scores"] = objective_scores
    snapshot = inputs_snapshot(inputs)
    if cset is not None:
        report["judge_outputs"] = scoring_provenance(study=study, inputs=snapshot)
        add_judge_allocation(report, study=study, judges=snapshot.get("judges"))
    if earlier is not None:
        report["version_sensitivity"] = version_sensitivity(
            study=study, earlier=earlier, inputs=snapshot, result=report
        )
    if record is not None:
        record.append(
            Leaderboard.objects.create(
                study=study,
                coefficient_set=cset,
                resamples=resamples,
                seed=seed,
                use_human_labels=bool(use_human_labels),
                objective=objective,
                ranking_model=model,
                status=Leaderboard.Status.DONE,
                progress=1.0,
                inputs=snapshot,
                result=report,
                started_at=started_at,
                finished_at=timezone.now(),
            )
        )
    return report


def add_judge_allocation(report: dict[str, Any], *, study: Study, judges: Any) -> None:
    """``judge_allocation``: the budget runs (``run_judges --max-calls / --budget-usd``) of the scored
    judges, which allocated their calls adaptively; absent when every call was sent uniformly."""
    from judges.services.budget import judge_budget_report_section

    rows = judge_budget_report_section(study=study)
    names = set(judges or [])
    rows = [r for r in rows or [] if not names or r["judge"] in names]
    if rows:
        report["judge_allocation"] = rows
