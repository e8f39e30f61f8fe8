"""Human reference and inter-rater agreement (docs/protocol.md "Human reference and agreement", report keys
docs/protocol.md "Report keys").

Pure module: pandas/numpy in, frozen dataclasses out, no Django and no project app (the human
ranking calls the pure Bradley–Terry module ``stats.bradley_terry``,
docs/protocol.md "Deployment leaderboard").

Every agreement statistic here is a ratio of sums over comparisons, so each function takes a
per-comparison count matrix (rows = comparisons, columns = labels in ordinal order
B = 0 < TIE = 1 < A = 2) and optional comparison weights. With ``weights=None`` the statistic is the
plain point estimate; with a 2-D ``weights`` of shape ``(resamples, n_comparisons)`` (the count
matrix of the stratified page-block bootstrap mapped to comparisons, ``stats.bootstrap``)
it returns one value per resample, vectorized. A weight of ``w`` is exactly the same as the
comparison appearing ``w`` times, which is what a bootstrap resample means.

Decisions (see docs/decisions/0004-agreement-statistics.md):

- Fleiss-type κ (docs/protocol.md "Human reference and agreement") uses only items with ``n_i ≥ 2`` for both
``P̄`` and ``p_k``.
- Per-axis α uses the axis scores of *valid* main votes (A/B/TIE); a CANNOT_JUDGE vote carries no
  judgement and its axis scores are ignored.
- Agreement with the majority (by confidence level, per rater) compares a vote with the unique
  plurality of the *other* raters' valid votes on that comparison (leave-self-out), so a vote never
  agrees with itself.
- Position bias counts decisive votes only (A or B): the share choosing the candidate shown on
  the left, with a Wilson score interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats

from stats.bootstrap import (
    BootstrapUnits,
    bootstrap_page_blocks,
    bootstrap_units,
    comparison_weights,
    percentile_ci,
    ratio_of_sums,
)
from stats.errors import InvalidVotes, StatisticsError
from stats.preference import ORDINAL_LABELS, human_preferences, label_counts, preference_of_counts
from stats.serialize import json_safe

LABELS: tuple[str, ...] = ("A", "B", "TIE", "CANNOT_JUDGE")
#: Valid labels in ordinal order (docs/protocol.md "Human reference and agreement": B = 0 < TIE = 1 < A = 2):
#: ``stats.preference.ORDINAL_LABELS``.
ORDINAL_VALUE: Mapping[str, int] = {"B": 0, "TIE": 1, "A": 2}
AXIS_SCORES: tuple[int, ...] = (-2, -1, 0, 1, 2)
AXIS_PREFIX = "axis:"
REQUIRED_COLUMNS: tuple[str, ...] = (
    "comparison",
    "page",
    "block",
    "rater",
    "label",
    "is_repeat",
    "swapped",
    "system_a",
    "system_b",
)
_STRING_COLUMNS = ("comparison", "page", "block", "rater", "system_a", "system_b")


# --------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VoteTable:
    """Validated canonical votes (docs/protocol.md "Canonical answers", "Files" votes CSV columns).

    ``frame`` has the columns of ``REQUIRED_COLUMNS`` plus ``confidence`` (float, NaN when absent)
    and one float ``axis:<ID>`` column per axis in ``axis_ids`` (NaN when inactive). Strings are
    ``str``, ``is_repeat`` and ``swapped`` are ``bool``. The frame is a private copy.
    """

    frame: pd.DataFrame
    axis_ids: tuple[str, ...]

    @property
    def main(self) -> pd.DataFrame:
        """Main annotations: every vote that is not a hidden repeat
        (docs/protocol.md "Human reference and agreement")."""
        return self.frame[~self.frame["is_repeat"].to_numpy(dtype=bool)]

    @property
    def repeats(self) -> pd.DataFrame:
        return self.frame[self.frame["is_repeat"].to_numpy(dtype=bool)]


def _as_bool(series: pd.Series, name: str) -> pd.Series:
    if series.isna().any():
        raise InvalidVotes(
            f"votes: column {name!r} has missing values (row {int(np.flatnonzero(series.isna())[0])})"
        )
    if series.dtype == bool:
        return series.astype(bool)
    mapping = {True: True, False: False, "true": True, "false": False, "1": True, "0": False}
    out = []
    for i, v in enumerate(series.tolist()):
        key = v.strip().lower() if isinstance(v, str) else v
        try:
            out.append(mapping[key])
        except (KeyError, TypeError):
            raise InvalidVotes(f"votes: column {name!r} row {i}: expected a boolean, got {v!r}") from None
    return pd.Series(out, index=series.index, dtype=bool)


def validate_votes(votes: pd.DataFrame) -> VoteTable:
    """Check and normalize a votes frame (docs/protocol.md "Human reference and agreement" input; columns as
    the docs/protocol.md "Files" votes CSV).

    Raises ``InvalidVotes`` (a ``StatisticsError``) naming the column and row of the first problem: a missing column, an
    unknown label, a non-boolean flag, an axis score outside −2…2, a confidence outside 1–5, a
    comparison with two pages / blocks / system pairs, or two main votes of one rater on one
    comparison.
    """
    if not isinstance(votes, pd.DataFrame):
        raise InvalidVotes("votes must be a pandas DataFrame")
    missing = [c for c in REQUIRED_COLUMNS if c not in votes.columns]
    if missing:
        raise InvalidVotes(f"votes: missing column(s) {', '.join(missing)}")
    frame = votes.reset_index(drop=True).copy()
    for col in _STRING_COLUMNS:
        bad = frame[col].isna()
        if bad.any():
            raise InvalidVotes(f"votes: column {col!r} row {int(np.flatnonzero(bad)[0])}: missing value")
        frame[col] = frame[col].astype(str)
    label = frame["label"]
    bad = ~label.isin(LABELS)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidVotes(
            f"votes: column 'label' row {i}: expected one of {', '.join(LABELS)}, got {label.iloc[i]!r}"
        )
    frame["label"] = label.astype(str)
    frame["is_repeat"] = _as_bool(frame["is_repeat"], "is_repeat")
    frame["swapped"] = _as_bool(frame["swapped"], "swapped")
    if "confidence" in frame.columns:
        conf = pd.to_numeric(frame["confidence"], errors="coerce").astype(float)
        nonnull_bad = frame["confidence"].notna() & conf.isna()
        out_of_range = conf.notna() & ((conf < 1) | (conf > 5) | (conf != np.round(conf)))
        bad = nonnull_bad | out_of_range
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidVotes(
                f"votes: column 'confidence' row {i}: expected an integer 1–5, got {frame['confidence'].iloc[i]!r}"
            )
        frame["confidence"] = conf
    else:
        frame["confidence"] = np.nan
    axis_ids = []
    for col in frame.columns:
        if isinstance(col, str) and col.startswith(AXIS_PREFIX):
            scores = pd.to_numeric(frame[col], errors="coerce").astype(float)
            bad = (frame[col].notna() & scores.isna()) | (
                scores.notna() & (~scores.isin([float(s) for s in AXIS_SCORES]))
            )
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InvalidVotes(
                    f"votes: column {col!r} row {i}: expected an integer −2…2, got {frame[col].iloc[i]!r}"
                )
            frame[col] = scores
            axis_ids.append(col[len(AXIS_PREFIX) :])
    for col in ("page", "block", "system_a", "system_b"):
        per = frame.groupby("comparison", sort=False)[col].nunique()
        if (per > 1).any():
            raise InvalidVotes(f"votes: comparison {per[per > 1].index[0]!r} has more than one {col!r}")
    main = frame[~frame["is_repeat"]]
    dup = main.duplicated(["rater", "comparison"])
    if dup.any():
        row = main[dup].iloc[0]
        raise InvalidVotes(
            f"votes: rater {row['rater']!r} has more than one main vote on comparison {row['comparison']!r}"
        )
    return VoteTable(frame=frame, axis_ids=tuple(axis_ids))


# --------------------------------------------------------------------------------------------
# Counting helpers
# --------------------------------------------------------------------------------------------


def reliability_to_counts(reliability_data: np.ndarray, value_domain: Sequence[float]) -> np.ndarray:
    """(coders × units) reliability data, NaN missing → (units × values) counts
    (docs/protocol.md "Human reference and agreement" α input)."""
    data = np.asarray(reliability_data, dtype=float)
    dom = np.asarray(value_domain, dtype=float)
    return (data.T[..., None] == dom[None, None, :]).sum(axis=1)


def _weighted_sum(values: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """Σ_i w_i values_i along the item axis; ``weights`` (n,) or (R, n); ``values`` (n,) or (n, k)."""
    if weights is None:
        return values.sum(axis=0)
    return np.asarray(weights, dtype=float) @ values


def _check_counts(counts: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2:
        raise StatisticsError("counts must be a 2-D (items × labels) array")
    if (c < 0).any():
        raise StatisticsError("counts must be non-negative")
    if weights is not None:
        w = np.asarray(weights)
        if w.shape[-1] != c.shape[0] or w.ndim not in (1, 2):
            raise StatisticsError("weights must have shape (n_items,) or (resamples, n_items)")
    return c


def coverage(n_valid: int, n_main: int) -> float:
    """docs/protocol.md "Human reference and agreement" coverage: valid main votes / main annotations (NaN
    when there are none)."""
    if n_valid < 0 or n_main < 0 or n_valid > n_main:
        raise StatisticsError("need 0 ≤ n_valid ≤ n_main")
    return n_valid / n_main if n_main else math.nan


def n_agreement_pairs(counts: np.ndarray) -> int:
    """docs/protocol.md "Human reference and agreement" ``n_pairs = Σ_i C(n_i, 2)`` over valid votes."""
    n = np.asarray(counts, dtype=np.int64).sum(axis=1)
    return int((n * (n - 1) // 2).sum())


def exact_agreement(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | float:
    """docs/protocol.md "Human reference and agreement" exact agreement: share of same-label pairs among all
    pairs of valid votes on a comparison.

    ``Σ_i Σ_k C(n_ik, 2) / Σ_i C(n_i, 2)``; ``weights`` as in the module docstring.
    """
    c = _check_counts(counts, weights)
    n = c.sum(axis=1)
    agree = (c * (c - 1)).sum(axis=1) / 2
    pairs = n * (n - 1) / 2
    return ratio_of_sums(_weighted_sum(agree, weights), _weighted_sum(pairs, weights))


def fleiss_kappa(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | float:
    """docs/protocol.md "Human reference and agreement" Fleiss-type κ over {A, TIE, B} for unequal rater
    counts, items with ``n_i ≥ 2``.

    ``P_i = Σ_k n_ik (n_ik − 1) / (n_i (n_i − 1))``, ``P̄ = mean_i P_i``,
    ``p_k = Σ_i n_ik / Σ_i n_i``, ``P_e = Σ_k p_k²``, ``κ = (P̄ − P_e) / (1 − P_e)``.
    Items with ``n_i < 2`` are left out of both ``P̄`` and ``p_k``. With equal ``n_i`` this is
    ``statsmodels.stats.inter_rater.fleiss_kappa``. NaN when undefined (no item, or ``P_e = 1``).
    """
    c = _check_counts(counts, weights)
    n = c.sum(axis=1)
    use = n >= 2
    c = c * use[:, None]
    n = n * use
    with np.errstate(divide="ignore", invalid="ignore"):
        p_i = np.where(use, (c * (c - 1)).sum(axis=1) / np.where(use, n * (n - 1), 1.0), 0.0)
    p_bar = ratio_of_sums(_weighted_sum(p_i, weights), _weighted_sum(use.astype(float), weights))
    totals = np.atleast_1d(_weighted_sum(c, weights))  # (k,) or (R, k)
    denom = totals.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_k = np.where(denom > 0, totals / np.where(denom > 0, denom, 1.0), np.nan)
    p_e = (p_k**2).sum(axis=-1)
    p_bar = np.asarray(p_bar, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(np.isfinite(p_e) & (p_e < 1 - 1e-12), (p_bar - p_e) / (1 - p_e), np.nan)
    return float(kappa) if kappa.ndim == 0 else kappa


def coincidence_matrix(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Krippendorff coincidence matrix (docs/protocol.md "Human reference and agreement" α), additive over
    units.

    ``o_ck = Σ_u w_u (n_uc n_uk − δ_ck n_uc) / (m_u − 1)`` over units with ``m_u ≥ 2`` pairable
    values. Shape (V, V), or (R, V, V) for 2-D weights.
    """
    c = _check_counts(counts, weights)
    v = c.shape[1]
    m = c.sum(axis=1)
    use = m >= 2
    per_unit = c[:, :, None] * c[:, None, :] - c[:, :, None] * np.eye(v)[None, :, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_unit = np.where(use[:, None, None], per_unit / np.where(use, m - 1, 1.0)[:, None, None], 0.0)
    flat = _weighted_sum(per_unit.reshape(len(c), v * v), weights)
    return flat.reshape((*flat.shape[:-1], v, v))


def ordinal_alpha_from_coincidences(o: np.ndarray) -> np.ndarray | float:
    """Ordinal Krippendorff α from a coincidence matrix (docs/protocol.md "Human reference and agreement"),
    vectorized over leading axes.

    ``α = 1 − D_o / D_e`` with ``D_o ∝ Σ o_ck δ²_ck`` and ``D_e ∝ Σ n_c n_k δ²_ck / (n − 1)``, the
    ordinal metric ``δ_ck = Σ_{g=c..k} n_g − (n_c + n_k)/2`` built from the marginals
    ``n_c = Σ_k o_ck`` (as the ``krippendorff`` package does). NaN when ``D_e = 0``.
    """
    o = np.asarray(o, dtype=float)
    v = o.shape[-1]
    n_v = o.sum(axis=-1)  # o is symmetric
    total = n_v.sum(axis=-1)
    cum = np.cumsum(n_v, axis=-1)
    lo = np.minimum(np.arange(v)[:, None], np.arange(v)[None, :])
    hi = np.maximum(np.arange(v)[:, None], np.arange(v)[None, :])
    # Σ_{g=lo..hi} n_g = cum[hi] − cum[lo] + n_v[lo]
    between = cum[..., hi] - cum[..., lo] + n_v[..., lo]
    delta2 = (between - (n_v[..., :, None] + n_v[..., None, :]) / 2) ** 2
    d_o = (o * delta2).sum(axis=(-2, -1))
    e_num = n_v[..., :, None] * n_v[..., None, :] - n_v[..., :, None] * np.eye(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        d_e = (e_num * delta2).sum(axis=(-2, -1)) / (total - 1)
        alpha = np.where((d_e > 0) & (total > 1), 1 - d_o / np.where(d_e > 0, d_e, 1.0), np.nan)
    return float(alpha) if alpha.ndim == 0 else alpha


def krippendorff_alpha_ordinal(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray | float:
    """docs/protocol.md "Human reference and agreement" ordinal Krippendorff α from a (units × values) count
    matrix, values in ordinal order.

    For labels the columns are B = 0, TIE = 1, A = 2 (missing = not shown or CANNOT_JUDGE).
    The point estimate (``weights=None``) is computed by the ``krippendorff`` package
    (``level_of_measurement="ordinal"``); weighted / bootstrap values use the same formula by
    hand on the weighted coincidence matrix. NaN when undefined.
    """
    c = _check_counts(counts, weights)
    if weights is not None:
        return ordinal_alpha_from_coincidences(coincidence_matrix(c, weights))
    return krippendorff_package_alpha(c, level="ordinal")


def krippendorff_package_alpha(counts: np.ndarray, *, level: Literal["nominal", "ordinal"]) -> float:
    """α of a (units × values) count matrix by the ``krippendorff`` package; NaN when undefined."""
    c = np.asarray(counts, dtype=float)
    if c.shape[1] < 2 or not (c.sum(axis=1) >= 2).any():
        return math.nan
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(
            krippendorff.alpha(
                value_counts=c.astype(np.int64) if np.all(c == np.round(c)) else c,
                value_domain=list(range(c.shape[1])),
                level_of_measurement=level,
            )
        )
    return value if math.isfinite(value) else math.nan


def unanimous_share(counts: np.ndarray) -> float:
    """docs/protocol.md "Human reference and agreement": share of comparisons (≥ 1 valid vote) whose valid
    votes all carry one label."""
    c = np.asarray(counts)
    n = c.sum(axis=1)
    has = n >= 1
    if not has.any():
        return math.nan
    return float(((c.max(axis=1) == n) & has).sum() / has.sum())


def unique_plurality_share(counts: np.ndarray) -> float:
    """docs/protocol.md "Human reference and agreement": share of comparisons (≥ 1 valid vote) where one label
    has strictly more votes than each other."""
    c = np.asarray(counts)
    has = c.sum(axis=1) >= 1
    if not has.any():
        return math.nan
    return float((_unique_plurality(c) >= 0)[has].mean())


def _unique_plurality(counts: np.ndarray) -> np.ndarray:
    """Column index of the unique plurality label per row, −1 when none (or no vote)."""
    c = np.asarray(counts)
    top = c.max(axis=1)
    unique = ((c == top[:, None]).sum(axis=1) == 1) & (top > 0)
    return np.where(unique, c.argmax(axis=1), -1)


@dataclass(frozen=True)
class RepeatAgreement:
    """docs/protocol.md "Human reference and agreement" hidden-repeat agreement: ``agree`` equal pairs out of
    ``n`` answered pairs."""

    agree: int
    n: int

    @property
    def value(self) -> float:
        return self.agree / self.n if self.n else math.nan


def hidden_repeat_agreement(original: Sequence[str], repeat: Sequence[str]) -> RepeatAgreement:
    """docs/protocol.md "Human reference and agreement": original vs repeat labels of the same rater and
    comparison, CANNOT_JUDGE counting as a label."""
    if len(original) != len(repeat):
        raise StatisticsError("original and repeat must have the same length")
    o = np.asarray(original, dtype=object)
    r = np.asarray(repeat, dtype=object)
    return RepeatAgreement(agree=int((o == r).sum()), n=len(o))


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (beyond
    docs/protocol.md "Human reference and agreement": rater-quality shares)."""
    if n < 0 or k < 0 or k > n:
        raise StatisticsError("need 0 ≤ k ≤ n")
    if n == 0:
        return (math.nan, math.nan)
    z = float(stats.norm.ppf(1 - (1 - confidence) / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, centre - half), min(1.0, centre + half))


# --------------------------------------------------------------------------------------------
# Human ranking and leave-one-rater-out (docs/protocol.md "Human reference and agreement" using the
# docs/protocol.md "Deployment leaderboard" Bradley–Terry fit)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HumanRanking:
    """docs/protocol.md "Human reference and agreement" human ranking: Bradley–Terry
    (docs/protocol.md "Deployment leaderboard") scores and ranks per system (1 = best)."""

    systems: tuple[str, ...]
    scores: np.ndarray
    ranks: np.ndarray

    def rows(self) -> list[dict[str, Any]]:
        order = np.argsort(self.ranks, kind="stable")
        return [
            {"system": self.systems[i], "score": float(self.scores[i]), "rank": int(self.ranks[i])}
            for i in order
        ]


def human_ranking(
    system_a: Sequence[str], system_b: Sequence[str], h: np.ndarray, systems: Sequence[str]
) -> HumanRanking:
    """docs/protocol.md "Human reference and agreement" human ranking: the
    docs/protocol.md "Deployment leaderboard" Bradley–Terry fit on ``h_i`` as fractional outcomes.

    Comparisons with NaN ``h`` (no valid vote) are left out; every system in ``systems`` keeps its
    index (one without comparisons sits at the ridge optimum).
    """
    # pure module, docs/protocol.md "Deployment leaderboard"
    from stats.bradley_terry import fit_bradley_terry

    h = np.asarray(h, dtype=float)
    index = {s: i for i, s in enumerate(systems)}
    keep = np.isfinite(h)
    a = np.fromiter((index[s] for s in np.asarray(system_a, dtype=object)[keep]), dtype=np.int64)
    b = np.fromiter((index[s] for s in np.asarray(system_b, dtype=object)[keep]), dtype=np.int64)
    fit = fit_bradley_terry(a, b, h[keep], len(systems))
    return HumanRanking(
        systems=tuple(systems),
        scores=np.asarray(fit.scores, dtype=float),
        ranks=np.asarray(fit.ranks, dtype=np.int64),
    )


@dataclass(frozen=True)
class RaterStability:
    """docs/protocol.md "Human reference and agreement" leave-one-rater-out entry for one rater.

    ``spearman`` is NaN and ``max_rank_movement`` None when undefined; ``reason`` says why.
    ``scores``: each system's human Bradley–Terry score with this rater left out, aligned with the
    full ranking's ``systems`` (for the report's spread plot; not part of the docs/protocol.md "Report keys"
    JSON).
    """

    rater: str
    spearman: float
    max_rank_movement: int | None
    reason: str | None = None
    scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class LeaveOneRaterOut:
    """docs/protocol.md "Human reference and agreement" leave-one-rater-out summary: worst case and per rater
    (None/NaN when undefined)."""

    min_spearman: float
    max_rank_movement: int | None
    per_rater: tuple[RaterStability, ...]
    reason: str | None = None


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Tie-aware Spearman of two score vectors (θ tie-grouped as the ranks are; audit F1)."""
    # pure, docs/protocol.md "Deployment leaderboard"
    from stats.rank_correlation import spearman_tie_aware, theta_of_scores

    return spearman_tie_aware(theta_of_scores(x), theta_of_scores(y))


def leave_one_rater_out(
    counts_by_rater: Mapping[str, np.ndarray],
    system_a: Sequence[str],
    system_b: Sequence[str],
    systems: Sequence[str],
    full: HumanRanking,
) -> LeaveOneRaterOut:
    """docs/protocol.md "Human reference and agreement": drop each rater, recompute ``h`` and the human
    ranking, compare with ``full``.

    ``counts_by_rater[r]`` is rater r's (comparisons × [B, TIE, A]) valid main-vote counts, rows
    aligned with ``system_a``/``system_b``. Spearman is ``scipy.stats.spearmanr`` of the scores
    tie-grouped as the ranks are (``RANK_TOLERANCE`` on the θ scale), ties sharing their average rank;
    the movement is ``max |rank − full rank|``. When dropping a rater leaves no valid vote there is
    no ranking to compare: Spearman NaN, movement None, with a reason.
    """
    from stats.rank_correlation import correlation_reason, theta_of_scores

    if not counts_by_rater:
        return LeaveOneRaterOut(
            min_spearman=math.nan, max_rank_movement=None, per_rater=(), reason="no rater with a valid main vote"
        )
    total = sum(counts_by_rater.values())
    per = []
    for rater in sorted(counts_by_rater):
        c = total - counts_by_rater[rater]
        ranking = human_ranking(system_a, system_b, preference_of_counts(c), systems)
        scores = tuple(float(v) for v in ranking.scores)
        if not (c.sum(axis=1) > 0).any():
            per.append(
                RaterStability(
                    rater=rater,
                    spearman=math.nan,
                    max_rank_movement=None,
                    reason="without this rater no comparison has a valid vote: no ranking to compare",
                    scores=scores,
                )
            )
            continue
        why = correlation_reason(theta_of_scores(full.scores), theta_of_scores(ranking.scores))
        per.append(
            RaterStability(
                rater=rater,
                spearman=_spearman(full.scores, ranking.scores),
                max_rank_movement=int(np.abs(ranking.ranks - full.ranks).max()) if len(systems) else None,
                reason=why,
                scores=scores,
            )
        )
    rhos = np.array([p.spearman for p in per], dtype=float)
    moves = [p.max_rank_movement for p in per if p.max_rank_movement is not None]
    reason = None
    if not np.isfinite(rhos).any():
        reason = "for no rater left out is the Spearman defined: " + "; ".join(
            sorted({str(p.reason) for p in per if p.reason})
        )
    return LeaveOneRaterOut(
        min_spearman=float(np.nanmin(rhos)) if np.isfinite(rhos).any() else math.nan,
        max_rank_movement=max(moves) if moves else None,
        per_rater=tuple(per),
        reason=reason,
    )


# --------------------------------------------------------------------------------------------
# Bootstrap intervals (docs/protocol.md "Human reference and agreement" (Confidence intervals))
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapAgreement:
    """Per-resample statistics of the stratified page-block bootstrap
    (docs/protocol.md "Human reference and agreement")."""

    exact_agreement: np.ndarray
    fleiss_kappa: np.ndarray
    krippendorff_alpha_ordinal: np.ndarray


def bootstrap_agreement(counts: np.ndarray, weights: np.ndarray) -> BootstrapAgreement:
    """Vectorized exact agreement, κ and ordinal α for every resample
    (docs/protocol.md "Human reference and agreement" intervals).

    ``weights`` is ``(resamples, n_comparisons)``: ``stats.bootstrap.comparison_weights``.
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise StatisticsError("weights must be 2-D (resamples, n_comparisons)")
    return BootstrapAgreement(
        exact_agreement=np.asarray(exact_agreement(counts, w)),
        fleiss_kappa=np.asarray(fleiss_kappa(counts, w)),
        krippendorff_alpha_ordinal=np.asarray(krippendorff_alpha_ordinal(counts, w)),
    )


# --------------------------------------------------------------------------------------------
# The report (docs/protocol.md "Report keys" agreement_report)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgreementResult:
    """Everything of docs/protocol.md "Human reference and agreement", serialized by ``to_dict`` with the
    docs/protocol.md "Report keys" ``agreement_report`` keys.

    Beyond the protocol: ``per_axis_alpha`` (ordinal α of −2…2 axis scores per axis, with bootstrap
    CI), ``confidence_agreement`` (agreement with the other raters' unique plurality, by
    confidence level), ``position_bias`` (share of decisive votes for the left candidate, Wilson
    CI, overall and per rater) and ``rater_quality`` (per rater: coverage, hidden-repeat
    agreement, agreement with the others' plurality, left share).
    """

    n_comparisons: int
    n_main_annotations: int
    n_valid_annotations: int
    coverage: float
    n_repeat_pairs: int
    exact_agreement: float
    exact_agreement_ci95: tuple[float, float]
    n_pairs: int
    fleiss_kappa: float
    fleiss_kappa_ci95: tuple[float, float]
    krippendorff_alpha_ordinal: float
    krippendorff_alpha_ordinal_ci95: tuple[float, float]
    unanimous_share: float
    unique_plurality_share: float
    hidden_repeat: RepeatAgreement
    human_reference: tuple[dict[str, Any], ...]
    human_ranking: HumanRanking
    leave_one_rater_out: LeaveOneRaterOut
    resamples: int
    seed: int
    per_axis_alpha: tuple[dict[str, Any], ...] = ()
    confidence_agreement: tuple[dict[str, Any], ...] = ()
    position_bias: Mapping[str, Any] = field(default_factory=dict)
    rater_quality: tuple[dict[str, Any], ...] = ()
    n_units: int = 0
    #: Why each undefined (null) figure is undefined, keyed by its report key (audit F5).
    reasons: Mapping[str, str] = field(default_factory=dict)

    def leave_one_rater_out_scores(self) -> dict[str, list[float]]:
        """Each system's human score with each rater left out in turn (raters in order;
        docs/protocol.md "Human reference and agreement").

        The per-rater fits of ``leave_one_rater_out``, by system, for the report's spread plot;
        not part of ``to_dict``.
        """
        systems = self.human_ranking.systems
        out: dict[str, list[float]] = {s: [] for s in systems}
        for p in self.leave_one_rater_out.per_rater:
            for system, score in zip(systems, p.scores, strict=True):
                out[system].append(score)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The docs/protocol.md "Report keys" ``agreement_report`` object (plain JSON types, NaN → None) plus
        extras."""
        loro = self.leave_one_rater_out
        return json_safe(
            {
                "n_comparisons": self.n_comparisons,
                "n_main_annotations": self.n_main_annotations,
                "n_valid_annotations": self.n_valid_annotations,
                "coverage": self.coverage,
                "n_repeat_pairs": self.n_repeat_pairs,
                "exact_agreement": {
                    "value": self.exact_agreement,
                    "ci95": list(self.exact_agreement_ci95),
                    "n_pairs": self.n_pairs,
                },
                "fleiss_kappa": {"value": self.fleiss_kappa, "ci95": list(self.fleiss_kappa_ci95)},
                "krippendorff_alpha_ordinal": {
                    "value": self.krippendorff_alpha_ordinal,
                    "ci95": list(self.krippendorff_alpha_ordinal_ci95),
                },
                "unanimous_share": self.unanimous_share,
                "unique_plurality_share": self.unique_plurality_share,
                "hidden_repeat_agreement": {
                    "agree": self.hidden_repeat.agree,
                    "n": self.hidden_repeat.n,
                    "value": self.hidden_repeat.value,
                },
                "human_reference": [dict(r) for r in self.human_reference],
                "human_ranking": self.human_ranking.rows(),
                "leave_one_rater_out": {
                    "min_spearman": loro.min_spearman,
                    "max_rank_movement": loro.max_rank_movement,
                    "per_rater": [
                        {
                            "rater": p.rater,
                            "spearman": p.spearman,
                            "max_rank_movement": p.max_rank_movement,
                            **({"reason": p.reason} if p.reason else {}),
                        }
                        for p in loro.per_rater
                    ],
                },
                "reasons": dict(self.reasons),
                "warnings": [f"{k} is undefined: {v}" for k, v in self.reasons.items()],
                "bootstrap": {"resamples": self.resamples, "seed": self.seed},
                "n_bootstrap_units": self.n_units,
                "per_axis_alpha": [dict(r) for r in self.per_axis_alpha],
                "confidence_agreement": [dict(r) for r in self.confidence_agreement],
                "position_bias": dict(self.position_bias),
                "rater_quality": [dict(r) for r in self.rater_quality],
            }
        )


def _share_entry(k: int, n: int) -> dict[str, Any]:
    return {
        "agree": int(k),
        "n": int(n),
        "value": (k / n) if n else math.nan,
        "ci95": list(wilson_interval(k, n)),
    }


def _repeat_pairs(table: VoteTable) -> pd.DataFrame:
    """Original/repeat pairs of the same rater and comparison
    (docs/protocol.md "Human reference and agreement"), one row per repeat."""
    main = table.main[["rater", "comparison", "label"]]
    rep = table.repeats[["rater", "comparison", "label"]]
    return rep.merge(main, on=["rater", "comparison"], how="inner", suffixes=("_repeat", "_original"))


def _others_plurality_agreement(
    main_valid: pd.DataFrame, counts: np.ndarray, comp_index: Mapping[str, int]
) -> pd.DataFrame:
    """For each valid main vote: does it equal the unique plurality of the other raters' valid votes?

    Returns the votes that have such a plurality, with a boolean column ``agrees``.
    """
    rows = main_valid["comparison"].map(comp_index).to_numpy(dtype=np.int64)
    cols = main_valid["label"].map(ORDINAL_VALUE).to_numpy(dtype=np.int64)
    others = counts[rows].copy()
    others[np.arange(len(rows)), cols] -= 1
    plural = _unique_plurality(others)
    has = plural >= 0
    out = main_valid.loc[has, ["rater", "confidence"]].copy()
    out["agrees"] = plural[has] == cols[has]
    return out


def undefined_reasons(
    counts: np.ndarray,
    *,
    n_main: int,
    n_repeat_pairs: int,
    values: Mapping[str, float],
    intervals: Mapping[str, tuple[float, float]],
    loro: LeaveOneRaterOut,
) -> dict[str, str]:
    """Why each undefined docs/protocol.md "Report keys" agreement figure is undefined (audit F5), keyed by
    report key.

    ``values``/``intervals`` are the computed point estimates and ci95 by report key; only the
    NaN ones get a reason. Reasons name the data that is missing, so a researcher can act.
    """
    c = np.asarray(counts, dtype=np.int64)
    n = c.sum(axis=1) if c.size else np.zeros(0, dtype=np.int64)
    n_items = int((n >= 1).sum())
    n_multi = int((n >= 2).sum())
    no_data = "no comparison has a valid main vote (A, B or TIE)" if n_items == 0 else ""
    no_pairs = (
        (no_data or "no comparison has two or more valid main votes, so there is no pair of votes to compare")
        if n_multi == 0
        else ""
    )
    totals = c[n >= 2].sum(axis=0) if n_multi else np.zeros(3, dtype=np.int64)
    one_label = ""
    if n_multi and (totals > 0).sum() == 1:
        label = ORDINAL_LABELS[int(np.flatnonzero(totals)[0])]
        one_label = f"every valid vote on comparisons with two or more votes is {label}, so chance agreement is 1"
    reasons: dict[str, str] = {}

    def note(key: str, why: str) -> None:
        if not math.isfinite(values.get(key, 0.0)):
            reasons[key] = why or "undefined for these votes"
        ci = intervals.get(key)
        if ci is not None and not all(math.isfinite(v) for v in ci) and key not in reasons:
            reasons[f"{key}.ci95"] = "every bootstrap resample leaves the figure undefined"

    note("coverage", "" if n_main else "the study has no main annotation")
    note("exact_agreement", no_pairs)
    note("fleiss_kappa", no_pairs or one_label)
    note("krippendorff_alpha_ordinal", no_pairs or one_label)
    note("unanimous_share", no_data)
    note("unique_plurality_share", no_data)
    note("hidden_repeat_agreement", "" if n_repeat_pairs else "no hidden repeat was answered with its original")
    if not math.isfinite(loro.min_spearman):
        reasons["leave_one_rater_out.min_spearman"] = loro.reason or "undefined for these votes"
    if loro.max_rank_movement is None:
        reasons["leave_one_rater_out.max_rank_movement"] = loro.reason or "no rater can be left out"
    return reasons


def agreement_report(votes: pd.DataFrame, *, resamples: int, seed: int) -> AgreementResult:
    """Compute every docs/protocol.md "Human reference and agreement" quantity from canonical votes; intervals
    by the docs/protocol.md "Human reference and agreement" bootstrap.

    ``votes``: one row per answered trial with the columns of ``validate_votes``. Deterministic in
    (votes, resamples, seed). Raises ``StatisticsError`` on bad input.
    """
    if resamples < 1:
        raise StatisticsError("resamples must be at least 1")
    table = validate_votes(votes)
    main = table.main
    valid_mask = main["label"].isin(ORDINAL_LABELS).to_numpy()
    main_valid = main[valid_mask]

    # Comparisons: every comparison with a main vote (so pages with only CANNOT_JUDGE still count
    # as bootstrap units); statistics use the valid votes.
    comp_info = (
        main.groupby("comparison", sort=True)[["page", "block", "system_a", "system_b"]].first().reset_index()
    )
    comps = comp_info["comparison"].tolist()
    comp_index = {c: i for i, c in enumerate(comps)}
    counts, h = human_preferences(main_valid["label"].to_numpy(), main_valid["comparison"].to_numpy(), comps)
    n_valid_per = counts.sum(axis=1)
    has_valid = n_valid_per >= 1

    human_ref = tuple(
        {
            "comparison": comps[i],
            "h": float(h[i]),
            "n_A": int(counts[i, 2]),
            "n_T": int(counts[i, 1]),
            "n_B": int(counts[i, 0]),
        }
        for i in np.flatnonzero(has_valid)
    )

    # Bootstrap (docs/protocol.md "Human reference and agreement"): strata = blocks, units = (block, page).
    units: BootstrapUnits = bootstrap_units(comp_info["page"].tolist(), comp_info["block"].tolist())
    if len(comps):
        w = comparison_weights(units, bootstrap_page_blocks(units, resamples=resamples, seed=seed)).astype(
            float
        )
        boot = bootstrap_agreement(counts, w)
        ci_exact = percentile_ci(boot.exact_agreement)
        ci_kappa = percentile_ci(boot.fleiss_kappa)
        ci_alpha = percentile_ci(boot.krippendorff_alpha_ordinal)
    else:
        w = np.zeros((resamples, 0))
        ci_exact = ci_kappa = ci_alpha = (math.nan, math.nan)

    # Human ranking and leave-one-rater-out
    # (docs/protocol.md "Human reference and agreement", "Deployment leaderboard").
    used = comp_info[has_valid]
    systems = sorted(set(used["system_a"]) | set(used["system_b"]))
    sys_a = comp_info["system_a"].to_numpy(dtype=object)
    sys_b = comp_info["system_b"].to_numpy(dtype=object)
    if systems:
        ranking = human_ranking(sys_a[has_valid], sys_b[has_valid], h[has_valid], systems)
        by_rater: dict[str, np.ndarray] = {}
        for rater, group in main_valid.groupby("rater", sort=True):
            by_rater[str(rater)] = label_counts(
                group["label"].to_numpy(), group["comparison"].to_numpy(), comps
            )[has_valid]
        loro = leave_one_rater_out(by_rater, sys_a[has_valid], sys_b[has_valid], systems, ranking)
    else:
        ranking = HumanRanking(systems=(), scores=np.zeros(0), ranks=np.zeros(0, dtype=np.int64))
        loro = LeaveOneRaterOut(
            min_spearman=math.nan,
            max_rank_movement=None,
            per_rater=(),
            reason="no comparison has a valid main vote: no human ranking",
        )

    # Hidden repeats (docs/protocol.md "Human reference and agreement").
    pairs = _repeat_pairs(table)
    repeat = hidden_repeat_agreement(pairs["label_original"].tolist(), pairs["label_repeat"].tolist())

    # Beyond the protocol: per-axis ordinal α over −2…2 scores of valid main votes.
    per_axis = []
    for axis in table.axis_ids:
        col = AXIS_PREFIX + axis
        scored = main_valid[main_valid[col].notna()]
        axis_counts = np.zeros((len(comps), len(AXIS_SCORES)), dtype=np.int64)
        if len(scored):
            rows = scored["comparison"].map(comp_index).to_numpy(dtype=np.int64)
            vals = scored[col].to_numpy(dtype=float).astype(np.int64) - AXIS_SCORES[0]
            np.add.at(axis_counts, (rows, vals), 1)
        value = krippendorff_alpha_ordinal(axis_counts)
        ci = (
            percentile_ci(np.asarray(krippendorff_alpha_ordinal(axis_counts, w)))
            if len(comps)
            else (math.nan, math.nan)
        )
        per_axis.append(
            {
                "axis": axis,
                "value": value,
                "ci95": list(ci),
                "n_scores": int(axis_counts.sum()),
                "n_comparisons": int((axis_counts.sum(axis=1) >= 2).sum()),
            }
        )

    # Beyond the protocol: agreement with the other raters' plurality, by confidence and per rater.
    others = _others_plurality_agreement(main_valid, counts, comp_index)
    conf_rows = []
    conf_levels = sorted({int(c) for c in others["confidence"].dropna().tolist()})
    for level in conf_levels:
        sel = others["confidence"] == level
        entry = _share_entry(int(others.loc[sel, "agrees"].sum()), int(sel.sum()))
        conf_rows.append({"confidence": level, **entry})
    # Beyond the protocol: position bias, decisive main votes only.
    decisive = main[main["label"].isin(("A", "B"))]
    chose_left = (decisive["label"] == "A").to_numpy() != decisive["swapped"].to_numpy(dtype=bool)

    def _bias(sel: np.ndarray) -> dict[str, Any]:
        n = int(sel.sum())
        k = int(chose_left[sel].sum())
        p_value = float(stats.binomtest(k, n, 0.5).pvalue) if n else math.nan
        return {
            "n_decisive": n,
            "n_left": k,
            "left_share": k / n if n else math.nan,
            "ci95": list(wilson_interval(k, n)),
            "p_value": p_value,
        }

    decisive_rater = decisive["rater"].to_numpy(dtype=object)
    raters = sorted(set(table.frame["rater"]))
    bias_per_rater = [{"rater": r, **_bias(decisive_rater == r)} for r in raters]
    position_bias = {"overall": _bias(np.ones(len(decisive), dtype=bool)), "per_rater": bias_per_rater}

    quality = []
    main_rater = main["rater"].to_numpy(dtype=object)
    for r, bias in zip(raters, bias_per_rater, strict=True):
        n_main = int((main_rater == r).sum())
        n_valid = int((main_valid["rater"] == r).sum())
        p = pairs[pairs["rater"] == r]
        rep = hidden_repeat_agreement(p["label_original"].tolist(), p["label_repeat"].tolist())
        o = others[others["rater"] == r]
        quality.append(
            {
                "rater": r,
                "n_main": n_main,
                "n_valid": n_valid,
                "coverage": coverage(n_valid, n_main),
                "hidden_repeat_agreement": _share_entry(rep.agree, rep.n),
                "majority_agreement": _share_entry(int(o["agrees"].sum()), len(o)),
                "left_share": bias["left_share"],
                "left_share_ci95": bias["ci95"],
            }
        )

    point = {
        "coverage": coverage(len(main_valid), len(main)),
        "exact_agreement": float(exact_agreement(counts)) if len(comps) else math.nan,
        "fleiss_kappa": float(fleiss_kappa(counts)) if len(comps) else math.nan,
        "krippendorff_alpha_ordinal": float(krippendorff_alpha_ordinal(counts)) if len(comps) else math.nan,
        "unanimous_share": unanimous_share(counts),
        "unique_plurality_share": unique_plurality_share(counts),
        "hidden_repeat_agreement": repeat.value,
    }
    reasons = undefined_reasons(
        counts,
        n_main=len(main),
        n_repeat_pairs=repeat.n,
        values=point,
        intervals={"exact_agreement": ci_exact, "fleiss_kappa": ci_kappa, "krippendorff_alpha_ordinal": ci_alpha},
        loro=loro,
    )
    return AgreementResult(
        reasons=reasons,
        n_comparisons=int(has_valid.sum()),
        n_main_annotations=len(main),
        n_valid_annotations=len(main_valid),
        coverage=point["coverage"],
        n_repeat_pairs=repeat.n,
        exact_agreement=point["exact_agreement"],
        exact_agreement_ci95=ci_exact,
        n_pairs=n_agreement_pairs(counts),
        fleiss_kappa=point["fleiss_kappa"],
        fleiss_kappa_ci95=ci_kappa,
        krippendorff_alpha_ordinal=point["krippendorff_alpha_ordinal"],
        krippendorff_alpha_ordinal_ci95=ci_alpha,
        unanimous_share=unanimous_share(counts),
        unique_plurality_share=unique_plurality_share(counts),
        hidden_repeat=repeat,
        human_reference=human_ref,
        human_ranking=ranking,
        leave_one_rater_out=loro,
        resamples=resamples,
        seed=seed,
        per_axis_alpha=tuple(per_axis),
        confidence_agreement=tuple(conf_rows),
        position_bias=position_bias,
        rater_quality=tuple(quality),
        n_units=units.n_units,
    )


__all__ = [
    "AgreementResult",
    "BootstrapAgreement",
    "HumanRanking",
    "LeaveOneRaterOut",
    "RaterStability",
    "RepeatAgreement",
    "VoteTable",
    "agreement_report",
    "bootstrap_agreement",
    "coincidence_matrix",
    "coverage",
    "exact_agreement",
    "fleiss_kappa",
    "hidden_repeat_agreement",
    "human_ranking",
    "krippendorff_alpha_ordinal",
    "leave_one_rater_out",
    "n_agreement_pairs",
    "ordinal_alpha_from_coincidences",
    "reliability_to_counts",
    "unanimous_share",
    "undefined_reasons",
    "unique_plurality_share",
    "validate_votes",
    "wilson_interval",
]
