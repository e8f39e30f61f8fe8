"""Judge-weight calibration of the preference proxy (docs/protocol.md "Judges and calibration" (Calibration);
report keys docs/protocol.md "Report keys").

Pure module: numpy/pandas/statsmodels in, frozen dataclasses out, no Django.

Formulas (docs/protocol.md "Judges and calibration", paper §4.2 and Appendix B.3):

- feature ``x̄_ij`` = mean canonical vote (A = 1, TIE = 0.5, B = 0; docs/protocol.md "Canonical answers") of
judge j over its
  valid outputs on comparison i, across orders × repeats. A comparison where some judge has no
  valid output is left out of the fit and counted (``n_excluded``);
- coefficients ``β = argmin Σ_i (h_i − x̄_iᵀ β)²``: ordinary least squares, no intercept, no
  constraint, no normalization, equal weights — ``statsmodels.api.OLS(h, X).fit()``. A
  rank-deficient X (e.g. two identical judges) keeps statsmodels' minimum-norm pseudo-inverse
  solution and is reported (``rank_deficient``, ``collinear_judges``, a warning);
- prediction ``p̂_i(A) = clip(Σ_j β_j x̄_ij, 0, 1)``;
- leave-one-block-out: for every block b, fit on the other blocks, predict b; out-of-fold Brier
  ``mean (p̂ − h)²`` and MAE ``mean |p̂ − h|``, with percentile 95 % intervals from the stratified
  page-block bootstrap (``stats.bootstrap``) holding the predictions fixed: for resample r,
  ``Σ_i W[r, unit(i)] e_i / Σ_i W[r, unit(i)]``;
- ranking alignment: Spearman correlation between the Bradley–Terry scores
(docs/protocol.md "Deployment leaderboard", fitted on
  fractional outcomes) of the systems from out-of-fold predictions and from ``h``, on the fitted
  comparisons. Its interval refits both rankings on every bootstrap resample (the same count
  matrix), as the paper's 0.915 (0.867–0.952).

:func:`calibrate` runs everything, including the committee audit (``stats.committee``) and
the judge diagnostics (``stats.judge_diagnostics``), and returns a :class:`CalibrationResult`
whose :meth:`~CalibrationResult.to_dict` holds the docs/protocol.md "Report keys" ``calibrate`` keys plus
extras.
"""

from __future__ import annotations

import math
import warnings as _warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import statsmodels.api as sm
from statsmodels.tools.sm_exceptions import SingularMatrixWarning

from stats import committee as committee_mod
from stats import judge_diagnostics as diag
from stats.bootstrap import BootstrapUnits, bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.defaults import CALIBRATION_RESAMPLES, CALIBRATION_SEED
from stats.errors import StatisticsError
from stats.preference import VOTE_VALUE
from stats.serialize import json_safe

#: Canonical vote encoding (docs/protocol.md "Canonical answers").
ORDERS = ("primary", "swapped")

JUDGE_OUTPUT_COLUMNS = ("comparison", "judge", "order", "repeat", "status", "winner")
HUMAN_COLUMNS = ("comparison", "page", "block", "h", "n_valid")


# --------------------------------------------------------------------------- features


@dataclass(frozen=True, eq=False)
class JudgeFeatures:
    """``x[i, j]`` = x̄_ij (NaN when judge j has no valid output on comparison i);
    docs/protocol.md "Judges and calibration"."""

    comparisons: tuple[object, ...]
    judges: tuple[str, ...]
    x: np.ndarray
    n_valid_outputs: np.ndarray


def validate_judge_outputs(judge_outputs: pd.DataFrame) -> pd.DataFrame:
    """Check the judge-output frame (docs/protocol.md "Files" fields) and return it; bad input raises
    ``StatisticsError``."""
    missing = [c for c in JUDGE_OUTPUT_COLUMNS if c not in judge_outputs.columns]
    if missing:
        raise StatisticsError(f"judge outputs: missing column(s) {', '.join(missing)}")
    bad_order = ~judge_outputs["order"].isin(ORDERS)
    if bad_order.any():
        raise StatisticsError(
            f"judge outputs: order {judge_outputs.loc[bad_order, 'order'].iloc[0]!r} (expected primary or swapped)"
        )
    valid = judge_outputs["status"] == "valid"
    bad_winner = valid & ~judge_outputs["winner"].isin(list(VOTE_VALUE))
    if bad_winner.any():
        row = judge_outputs[bad_winner].iloc[0]
        raise StatisticsError(
            f"judge outputs: valid output of judge {row['judge']!r} on comparison {row['comparison']!r} "
            f"has winner {row['winner']!r} (expected A, B or TIE)"
        )
    dup = judge_outputs.duplicated(["comparison", "judge", "order", "repeat"])
    if dup.any():
        row = judge_outputs[dup].iloc[0]
        raise StatisticsError(
            f"judge outputs: duplicate output for comparison {row['comparison']!r}, judge {row['judge']!r}, "
            f"order {row['order']!r}, repeat {row['repeat']!r}"
        )
    return judge_outputs


def judge_features(
    judge_outputs: pd.DataFrame, *, comparisons: Sequence[object], judges: Sequence[str]
) -> JudgeFeatures:
    """Mean canonical vote of each judge over its valid outputs (docs/protocol.md "Judges and calibration"
    ``x̄_ij``)."""
    validate_judge_outputs(judge_outputs)
    comparisons, judges = list(comparisons), list(judges)
    valid = judge_outputs[(judge_outputs["status"] == "valid") & judge_outputs["judge"].isin(judges)]
    vote = valid["winner"].map(VOTE_VALUE).astype(float)
    grouped = vote.groupby([valid["comparison"], valid["judge"]])
    means = grouped.mean().unstack("judge").reindex(index=comparisons, columns=judges)
    counts = grouped.size().unstack("judge").reindex(index=comparisons, columns=judges).fillna(0)
    return JudgeFeatures(
        comparisons=tuple(comparisons),
        judges=tuple(judges),
        x=means.to_numpy(dtype=float),
        n_valid_outputs=counts.to_numpy(dtype=np.int64),
    )


# --------------------------------------------------------------------------- OLS


@dataclass(frozen=True, eq=False)
class JudgeWeightFit:
    """docs/protocol.md "Judges and calibration" OLS fit (no intercept). ``rank < len(coefficients)`` means
    rank-deficient."""

    coefficients: np.ndarray
    standard_errors: np.ndarray
    rank: int
    condition_number: float
    collinear: tuple[int, ...]

    @property
    def rank_deficient(self) -> bool:
        return self.rank < len(self.coefficients)


def collinear_columns(x: np.ndarray) -> tuple[int, tuple[int, ...]]:
    """Numerical rank of ``x`` and the columns that load on its null space.

    The rank uses ``numpy.linalg.matrix_rank``'s default tolerance on the singular values; the
    null space comes from the SVD of the triangular factor R of ``x = QR`` (same singular values
    and right singular vectors as ``x``, without the n × n factor).
    """
    n, k = x.shape
    if k == 0:
        return 0, ()
    r = np.linalg.qr(x, mode="r") if n >= k else x
    _, s, vt = np.linalg.svd(r, full_matrices=True)
    tol = (s.max() if s.size else 0.0) * max(n, k) * np.finfo(float).eps
    rank = int(np.sum(s > tol))
    if rank == k:
        return rank, ()
    null = vt[rank:]
    loads = np.max(np.abs(null), axis=0) > 1e-8
    return rank, tuple(int(j) for j in np.flatnonzero(loads))


def fit_judge_weights(h: np.ndarray, x: np.ndarray) -> JudgeWeightFit:
    """``statsmodels.api.OLS(h, x).fit()`` without a constant (docs/protocol.md "Judges and calibration").

    ``x`` must be finite with one row per comparison. Rank deficiency does not raise: the
    coefficients are statsmodels' pinv (minimum-norm) solution and ``collinear`` names the
    columns involved.
    """
    h = np.asarray(h, dtype=float)
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or h.ndim != 1 or x.shape[0] != h.shape[0]:
        raise StatisticsError("x must be (n_comparisons, n_judges) and h (n_comparisons,)")
    if x.shape[0] == 0:
        raise StatisticsError("no comparison to fit")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(h))):
        raise StatisticsError("x and h must be finite")
    rank, collinear = collinear_columns(x)
    with _warnings.catch_warnings():
        # Rank deficiency is detected above and reported in the result instead.
        _warnings.simplefilter("ignore", RuntimeWarning)
        _warnings.simplefilter("ignore", SingularMatrixWarning)
        res = sm.OLS(h, x).fit()
        se = np.asarray(res.bse, dtype=float) if x.shape[0] > rank else np.full(x.shape[1], np.nan)
        try:
            cond = float(res.condition_number)
        except (np.linalg.LinAlgError, ValueError):
            cond = float("nan")
    return JudgeWeightFit(
        coefficients=np.asarray(res.params, dtype=float),
        standard_errors=se,
        rank=rank,
        condition_number=cond if math.isfinite(cond) and rank == x.shape[1] else float("inf"),
        collinear=collinear,
    )


def predict(x: np.ndarray, coefficients: np.ndarray) -> np.ndarray:
    """``p̂(A) = clip(Σ_j β_j x_j, 0, 1)``
    (docs/protocol.md "Judges and calibration", "Deployment leaderboard")."""
    return np.clip(np.asarray(x, dtype=float) @ np.asarray(coefficients, dtype=float), 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class LeaveOneBlockOut:
    """Out-of-fold predictions and each fold's coefficients (docs/protocol.md "Judges and calibration")."""

    predictions: np.ndarray
    blocks: tuple[object, ...]
    fold_coefficients: np.ndarray  # (n_blocks, n_judges)
    rank_deficient_blocks: tuple[object, ...]


def leave_one_block_out(h: np.ndarray, x: np.ndarray, blocks: Sequence[object]) -> LeaveOneBlockOut:
    """Fit on all blocks but one and predict it, for every block (docs/protocol.md "Judges and calibration");
    needs ≥ 2 blocks."""
    h = np.asarray(h, dtype=float)
    x = np.asarray(x, dtype=float)
    block_arr = np.asarray([str(b) for b in blocks])
    names = sorted(set(blocks), key=str)
    if len(names) < 2:
        raise StatisticsError("leave-one-block-out needs at least two blocks")
    pred = np.full(len(h), np.nan)
    coefs = np.zeros((len(names), x.shape[1]))
    deficient = []
    for k, name in enumerate(names):
        held = block_arr == str(name)
        fit = fit_judge_weights(h[~held], x[~held])
        coefs[k] = fit.coefficients
        if fit.rank_deficient:
            deficient.append(name)
        pred[held] = predict(x[held], fit.coefficients)
    return LeaveOneBlockOut(
        predictions=pred, blocks=tuple(names), fold_coefficients=coefs, rank_deficient_blocks=tuple(deficient)
    )


def bootstrap_mean_errors(errors: np.ndarray, unit_of: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per-resample mean of per-comparison ``errors`` (n,) or (n, m), predictions fixed
    (docs/protocol.md "Judges and calibration").

    Resample r weighs comparison i by ``counts[r, unit_of[i]]``; the mean is
    ``Σ_i W[r, unit(i)] e_i / Σ_i W[r, unit(i)]``, computed as ``(W @ unit sums) / (W @ unit sizes)``.
    """
    e = np.asarray(errors, dtype=float)
    squeeze = e.ndim == 1
    e2 = e[:, None] if squeeze else e
    n_units = counts.shape[1]
    unit_sum = np.stack([np.bincount(unit_of, weights=col, minlength=n_units) for col in e2.T], axis=1)
    unit_n = np.bincount(unit_of, minlength=n_units).astype(float)
    out = (counts @ unit_sum) / (counts @ unit_n)[:, None]
    return out[:, 0] if squeeze else out


def rowwise_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``a`` with the same row of ``b`` (average ranks for ties)."""
    from stats.rank_correlation import rowwise_spearman as rowwise

    return rowwise(a, b)


# --------------------------------------------------------------------------- result


@dataclass(frozen=True)
class ErrorSummary:
    value: float
    ci95: tuple[float, float] | None


@dataclass(frozen=True)
class BlockErrors:
    block: object
    brier: float
    mae: float
    n: int


@dataclass(frozen=True, eq=False)
class CalibrationResult:
    """Everything ``calibrate`` reports (docs/protocol.md "Judges and calibration", "Report keys")."""

    judges: tuple[str, ...]
    n_comparisons: int
    n_excluded: int
    n_without_human_votes: int
    excluded_by_judge: Mapping[str, int]
    fit: JudgeWeightFit
    in_sample_brier: float
    in_sample_mae: float
    brier: ErrorSummary | None
    mae: ErrorSummary | None
    spearman_ranking: ErrorSummary | None
    n_systems: int
    per_block: tuple[BlockErrors, ...]
    fold_coefficients: Mapping[str, Mapping[str, float]]
    committee_audit: committee_mod.CommitteeAudit | None
    reliability: tuple[diag.ReliabilityBin, ...]
    diagnostics: Mapping[str, Any]
    resamples: int
    seed: int
    predictions: pd.DataFrame = field(repr=False)
    warnings: tuple[str, ...] = ()

    @property
    def coefficients(self) -> dict[str, float]:
        return {j: float(b) for j, b in zip(self.judges, self.fit.coefficients, strict=True)}

    def to_dict(self, *, include_predictions: bool = False) -> dict[str, Any]:
        """JSON-ready report: the docs/protocol.md "Report keys" ``calibrate`` keys plus extras; NaN/inf
        become None."""

        def summary(s: ErrorSummary | None, *, ci: bool = True) -> dict[str, Any]:
            if s is None:
                return {"value": None, "ci95": None} if ci else {"value": None}
            return {"value": s.value, "ci95": list(s.ci95) if s.ci95 is not None else None}

        def share(s: diag.AgreementShare) -> dict[str, Any]:
            return {"agree": s.agree, "n": s.n, "value": s.value}

        audit = self.committee_audit
        committees = []
        if audit is not None:
            for c in audit.committees:
                committees.append(
                    {
                        "judges": list(c.judges),
                        "families": list(c.families),
                        "pilot": {
                            "brier": c.pilot.brier,
                            "coverage": c.pilot.coverage,
                            "resolved_brier": c.pilot.resolved_brier,
                            "rank": c.pilot.rank,
                            "n": c.pilot.n,
                        },
                        "holdout": {
                            "brier": c.holdout.brier,
                            "coverage": c.holdout.coverage,
                            "resolved_brier": c.holdout.resolved_brier,
                            "rank": c.holdout.rank,
                            "n": c.holdout.n,
                            "ci95": list(c.holdout.ci95) if c.holdout.ci95 else None,
                            "rank1_share": c.holdout.rank1_share,
                            "diff_vs_pilot_winner": {
                                "value": c.holdout.diff_vs_pilot_winner,
                                "ci95": list(c.holdout.diff_vs_pilot_winner_ci95)
                                if c.holdout.diff_vs_pilot_winner_ci95
                                else None,
                            },
                        },
                    }
                )
        out: dict[str, Any] = {
            "n_comparisons": self.n_comparisons,
            "n_excluded": self.n_excluded,
            "n_without_human_votes": self.n_without_human_votes,
            "excluded_by_judge": dict(self.excluded_by_judge),
            "judges": list(self.judges),
            "coefficients": self.coefficients,
            "standard_errors": {
                j: float(s) for j, s in zip(self.judges, self.fit.standard_errors, strict=True)
            },
            "rank": self.fit.rank,
            "rank_deficient": self.fit.rank_deficient,
            "collinear_judges": [self.judges[i] for i in self.fit.collinear],
            "condition_number": self.fit.condition_number,
            "in_sample": {"brier": self.in_sample_brier, "mae": self.in_sample_mae},
            "cv": {
                "brier": summary(self.brier),
                "mae": summary(self.mae),
                "spearman_ranking": {**summary(self.spearman_ranking), "n_systems": self.n_systems},
            },
            "per_block": [
                {"block": b.block, "brier": b.brier, "mae": b.mae, "n": b.n} for b in self.per_block
            ],
            "fold_coefficients": {k: dict(v) for k, v in self.fold_coefficients.items()},
            "committees": committees,
            "committee_audit": None
            if audit is None
            else {
                "n_pilot": audit.n_pilot,
                "n_holdout": audit.n_holdout,
                "split_seed": audit.split_seed,
                "min_agree": audit.min_agree,
                "min_coverage": audit.min_coverage,
                "pilot_winner": list(audit.pilot_winner) if audit.pilot_winner else None,
                "ineligible": [
                    {"judges": list(c.judges), "pilot_coverage": c.pilot_coverage} for c in audit.ineligible
                ],
                "bootstrap": {"resamples": audit.resamples, "seed": audit.seed},
            },
            "reliability": [
                {
                    "low": b.low,
                    "high": b.high,
                    "n": b.n,
                    "mean_predicted": b.mean_predicted,
                    "mean_human": b.mean_human,
                }
                for b in self.reliability
            ],
            "diagnostics": {
                "judges": {
                    j: {name: share(s) for name, s in per.items()}
                    for j, per in self.diagnostics.get("judges", {}).items()
                },
                "human_noise_ceiling": share(self.diagnostics["human_noise_ceiling"])
                if self.diagnostics.get("human_noise_ceiling") is not None
                else None,
            },
            "bootstrap": {"resamples": self.resamples, "seed": self.seed},
            "warnings": list(self.warnings),
        }
        if include_predictions:
            out["predictions"] = self.predictions.to_dict(orient="records")
        return json_safe(out)


# --------------------------------------------------------------------------- entry point


def _validate_human(human: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in HUMAN_COLUMNS if c not in human.columns]
    if missing:
        raise StatisticsError(f"human reference: missing column(s) {', '.join(missing)}")
    if human["comparison"].duplicated().any():
        raise StatisticsError(
            f"human reference: comparison {human.loc[human['comparison'].duplicated(), 'comparison'].iloc[0]!r} twice"
        )
    h = pd.to_numeric(human["h"], errors="coerce")
    n_valid = pd.to_numeric(human["n_valid"], errors="coerce")
    if n_valid.isna().any() or (n_valid < 0).any():
        raise StatisticsError("human reference: n_valid must be a non-negative number of valid votes")
    bad = (n_valid > 0) & ~h.between(0, 1)
    if bad.any():
        raise StatisticsError(
            f"human reference: comparison {human.loc[bad, 'comparison'].iloc[0]!r} has h outside [0, 1]"
        )
    return human


def _spearman(
    human: pd.DataFrame, h: np.ndarray, p_oof: np.ndarray, units: BootstrapUnits, counts: np.ndarray | None
) -> tuple[ErrorSummary | None, int, str | None]:
    """Spearman ρ between BT scores from ``p_oof`` and from ``h`` (docs/protocol.md "Judges and calibration"),
    with a bootstrap CI."""
    if not {"system_a", "system_b"} <= set(human.columns):
        return None, 0, "human reference has no system_a/system_b: no ranking Spearman"
    from stats.bradley_terry import bootstrap_bradley_terry, fit_bradley_terry

    systems = sorted(set(human["system_a"].astype(str)) | set(human["system_b"].astype(str)))
    index = {s: i for i, s in enumerate(systems)}
    a = human["system_a"].astype(str).map(index).to_numpy(dtype=np.int64)
    b = human["system_b"].astype(str).map(index).to_numpy(dtype=np.int64)
    m = len(systems)
    if m < 3:
        return None, m, f"only {m} systems: no ranking Spearman"
    from stats.rank_correlation import (
        correlation_reason,
        rowwise_spearman_tie_aware,
        spearman_tie_aware,
        theta_of_scores,
    )

    human_fit = fit_bradley_terry(a, b, h, m)
    proxy_fit = fit_bradley_terry(a, b, p_oof, m)
    # Tie-aware on θ tie-grouped as the ranks are (audit F1): exact ties stay ties.
    rho = spearman_tie_aware(proxy_fit.theta, human_fit.theta)
    note = correlation_reason(proxy_fit.theta, human_fit.theta)
    ci: tuple[float, float] | None = None
    if counts is not None:
        resamples = counts.shape[0]
        hb = bootstrap_bradley_terry(a, b, h, m, units, resamples=resamples, seed=0, counts=counts)
        pb = bootstrap_bradley_terry(a, b, p_oof, m, units, resamples=resamples, seed=0, counts=counts)
        lo, hi = percentile_interval(
            rowwise_spearman_tie_aware(theta_of_scores(pb.scores), theta_of_scores(hb.scores))
        )
        ci = (float(lo), float(hi))
    return ErrorSummary(value=rho, ci95=ci), m, None if note is None else f"ranking Spearman undefined: {note}"


def calibrate(
    judge_outputs: pd.DataFrame,
    human: pd.DataFrame,
    *,
    judges: Sequence[str] | None = None,
    resamples: int = CALIBRATION_RESAMPLES,
    seed: int = CALIBRATION_SEED,
    pilot_size: int | None = None,
    families: Mapping[str, str] | None = None,
    human_votes: pd.DataFrame | None = None,
    split_seed: int | None = None,
    min_agree: int = 3,
    min_coverage: float = 0.75,
    reliability_bins: int = 10,
    ranking_interval: bool = True,
    committee_resamples: int | None = None,
) -> CalibrationResult:
    """docs/protocol.md "Judges and calibration" calibration of the judges against the human reference.

    ``judge_outputs``: one row per output — ``comparison, judge, order (primary|swapped), repeat,
    status (valid|…), winner`` (canonical A/B/TIE for valid rows).
    ``human``: one row per human-study comparison — ``comparison, page, block, h, n_valid`` and
    optionally ``system_a, system_b`` (for the ranking Spearman) and ``n_A, n_T, n_B`` (for the
    human-majority diagnostics; else ``human_votes`` with ``comparison, label`` is counted).
    Comparisons without a valid human vote are ignored (``n_without_human_votes``).
    ``families`` maps each judge to its vendor family (committee audit; ``None`` skips it).
    ``pilot_size`` of the committee split (``None``: the paper's 320/1,872 share); the split uses
    ``split_seed`` (default ``seed``). Bootstraps use ``resamples`` and ``seed``; the committee
    audit's holdout bootstrap uses ``committee_resamples`` (default ``resamples``; the paper used
    10,000). ``ranking_interval=False`` skips the Spearman interval (its refits are the slowest part).
    """
    if resamples < 1:
        raise StatisticsError("resamples must be at least 1")
    validate_judge_outputs(judge_outputs)
    _validate_human(human)
    judge_list = (
        sorted(set(judge_outputs["judge"].astype(str))) if judges is None else [str(j) for j in judges]
    )
    if not judge_list:
        raise StatisticsError("no judges to calibrate")
    if len(set(judge_list)) != len(judge_list):
        raise StatisticsError("judges: a judge is listed twice")
    absent = [j for j in judge_list if not (judge_outputs["judge"] == j).any()]
    if absent:
        raise StatisticsError(f"judge(s) without any output: {', '.join(absent)}")
    warnings: list[str] = []

    # Canonical comparison order (sorted) so that row order of the inputs never matters.
    has_votes = pd.to_numeric(human["n_valid"]) > 0
    n_without = int((~has_votes).sum())
    ref = human[has_votes].sort_values("comparison", kind="mergesort").reset_index(drop=True)
    if ref.empty:
        raise StatisticsError("no comparison has a valid human vote")
    comparisons = ref["comparison"].tolist()
    feats = judge_features(judge_outputs, comparisons=comparisons, judges=judge_list)
    missing = ~np.isfinite(feats.x)
    included = ~missing.any(axis=1)
    excluded_by_judge = {j: int(missing[:, k].sum()) for k, j in enumerate(judge_list)}
    if not included.any():
        raise StatisticsError("no comparison has a valid output from every judge")
    data = ref[included].reset_index(drop=True)
    x = feats.x[included]
    h = data["h"].to_numpy(dtype=float)

    fit = fit_judge_weights(h, x)
    if fit.rank_deficient:
        names = ", ".join(judge_list[i] for i in fit.collinear)
        warnings.append(
            f"rank-deficient judge matrix (rank {fit.rank} < {len(judge_list)} judges): collinear judges {names}; "
            "coefficients are statsmodels' minimum-norm (pinv) solution and not individually identifiable"
        )
    p_full = predict(x, fit.coefficients)

    units = bootstrap_units(data["page"].tolist(), data["block"].tolist())
    counts = bootstrap_page_blocks(units, resamples=resamples, seed=seed)
    blocks = data["block"].tolist()
    brier = mae = spearman = None
    n_systems = 0
    per_block: list[BlockErrors] = []
    fold_coefficients: dict[str, dict[str, float]] = {}
    p_oof = np.full(len(h), np.nan)
    if len(set(blocks)) >= 2:
        lobo = leave_one_block_out(h, x, blocks)
        p_oof = lobo.predictions
        if lobo.rank_deficient_blocks:
            warnings.append(
                "rank-deficient fit when leaving out block(s) "
                + ", ".join(str(b) for b in lobo.rank_deficient_blocks)
            )
        fold_coefficients = {
            str(b): {j: float(c) for j, c in zip(judge_list, row, strict=True)}
            for b, row in zip(lobo.blocks, lobo.fold_coefficients, strict=True)
        }
        err = np.stack([(p_oof - h) ** 2, np.abs(p_oof - h)], axis=1)
        boot = bootstrap_mean_errors(err, units.unit_of, counts)
        ci = percentile_interval(boot)
        brier = ErrorSummary(value=float(err[:, 0].mean()), ci95=(float(ci[0, 0]), float(ci[1, 0])))
        mae = ErrorSummary(value=float(err[:, 1].mean()), ci95=(float(ci[0, 1]), float(ci[1, 1])))
        block_str = np.asarray([str(b) for b in blocks])
        for b in lobo.blocks:
            sel = block_str == str(b)
            per_block.append(
                BlockErrors(
                    block=b, brier=float(err[sel, 0].mean()), mae=float(err[sel, 1].mean()), n=int(sel.sum())
                )
            )
        spearman, n_systems, note = _spearman(data, h, p_oof, units, counts if ranking_interval else None)
        if note:
            warnings.append(note)
    else:
        warnings.append("only one block: no leave-one-block-out validation")

    # Committee audit: every comparison with a human reference (a judge without valid outputs
    # there is simply unresolved).
    audit = None
    if families is None:
        warnings.append("no vendor families given: committee audit skipped")
    elif len(ref) < 2:
        warnings.append("fewer than two comparisons: committee audit skipped")
    else:
        resolution = committee_mod.judge_resolution(
            judge_outputs, comparisons=comparisons, judges=judge_list, min_agree=min_agree
        )
        audit = committee_mod.committee_audit(
            resolution,
            judges=judge_list,
            families={j: str(families[j]) for j in judge_list if j in families},
            h=ref["h"].to_numpy(dtype=float),
            n_valid=pd.to_numeric(ref["n_valid"]).to_numpy(dtype=float),
            pages=ref["page"].tolist(),
            blocks=ref["block"].tolist(),
            comparisons=comparisons,
            pilot_size=pilot_size,
            split_seed=seed if split_seed is None else split_seed,
            resamples=resamples if committee_resamples is None else committee_resamples,
            seed=seed,
            min_agree=min_agree,
            min_coverage=min_coverage,
        )
        warnings.extend(audit.warnings)

    # Diagnostics (docs/protocol.md "Judges and calibration" extras).
    per_judge: dict[str, dict[str, diag.AgreementShare]] = {j: {} for j in judge_list}
    for name, shares in (
        ("order_consistency", diag.order_consistency(judge_outputs, judges=judge_list)),
        ("repeat_consistency", diag.repeat_consistency(judge_outputs, judges=judge_list)),
    ):
        for j, s in shares.items():
            per_judge[j][name] = s
    human_counts = None
    if {"n_A", "n_T", "n_B"} <= set(ref.columns):
        human_counts = ref[["n_B", "n_T", "n_A"]].to_numpy(dtype=np.int64)
    elif human_votes is not None:
        human_counts = diag.human_counts_from_votes(human_votes, comparisons)
    ceiling = None
    if human_counts is not None:
        for j, s in diag.human_majority_agreement(
            judge_outputs, judges=judge_list, comparisons=comparisons, human_counts=human_counts
        ).items():
            per_judge[j]["human_majority_agreement"] = s
        ceiling = diag.human_noise_ceiling(human_counts)
    reliability = (
        tuple(diag.reliability_bins(p_oof, h, bins=reliability_bins)) if np.all(np.isfinite(p_oof)) else ()
    )

    predictions = pd.DataFrame(
        {
            "comparison": data["comparison"],
            "page": data["page"],
            "block": data["block"],
            "h": h,
            **{f"x:{j}": x[:, k] for k, j in enumerate(judge_list)},
            "p_full": p_full,
            "p_oof": p_oof,
        }
    )
    return CalibrationResult(
        judges=tuple(judge_list),
        n_comparisons=int(included.sum()),
        n_excluded=int((~included).sum()),
        n_without_human_votes=n_without,
        excluded_by_judge=excluded_by_judge,
        fit=fit,
        in_sample_brier=float(np.mean((p_full - h) ** 2)),
        in_sample_mae=float(np.mean(np.abs(p_full - h))),
        brier=brier,
        mae=mae,
        spearman_ranking=spearman,
        n_systems=n_systems,
        per_block=tuple(per_block),
        fold_coefficients=fold_coefficients,
        committee_audit=audit,
        reliability=reliability,
        diagnostics={"judges": per_judge, "human_noise_ceiling": ceiling},
        resamples=int(resamples),
        seed=int(seed),
        predictions=predictions,
        warnings=tuple(warnings),
    )
