"""Tie-aware correlation of two rankings (docs/protocol.md "Human reference and agreement"
leave-one-rater-out, docs/protocol.md "Judges and calibration" ``spearman_ranking``,
docs/protocol.md "Deployment leaderboard" objective vs subjective).

Pure module: numpy/scipy in, floats out, no Django.

Every ranking the platform correlates comes from a Bradley–Terry (or Davidson) fit whose
optimum is found to ~10⁻¹⁰; two systems whose data are symmetric get θ that differ by rounding
noise (~10⁻¹⁴). Ranks (``stats.bradley_terry.ranks_from_theta``) treat θ whose sorted neighbours
differ by at most ``RANK_TOLERANCE`` as tied; the correlations here do the same: both inputs are
tie-grouped (``stats.bradley_terry.tie_grouped_theta``) **on the θ scale** before ranking, and tied
values get their average rank (``scipy.stats.spearmanr`` / ``kendalltau``, tau-b). Without it,
noise decides the order of exactly tied systems (the audit's F1: 0.667 where the tie-aware value
is 0.763). Grouping by a tolerance on differences, not rounding to 9 decimals, keeps two equal
values on a rounding half-point together (issue 29: ``[1.5e-9, 1.5e-9, 0.3, -0.2]`` with ±1e-14
noise gave ρ 0.9487 against the noiseless ranking instead of 1).

A correlation is undefined (NaN, with a reason from :func:`correlation_reason`) with fewer than
two systems or when either tie-grouped input is constant.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from stats.bradley_terry import SCORE_SCALE, tie_grouped_theta
from stats.errors import StatisticsError


def tied_theta(theta: np.ndarray) -> np.ndarray:
    """θ with ties made equal as the ranks see them (``tie_grouped_theta``, along the last axis)."""
    return tie_grouped_theta(theta)


def theta_of_scores(scores: np.ndarray) -> np.ndarray:
    """θ from reported scores (``score = 400 θ / ln 10``, docs/protocol.md "Deployment leaderboard")."""
    return np.asarray(scores, dtype=np.float64) / SCORE_SCALE


def correlation_reason(x: np.ndarray, y: np.ndarray) -> str | None:
    """Why the tie-aware correlation of ``x`` and ``y`` (θ scale) is undefined, or None if defined."""
    rx, ry = tied_theta(np.asarray(x, dtype=np.float64)), tied_theta(np.asarray(y, dtype=np.float64))
    if rx.shape != ry.shape or rx.ndim != 1:
        raise StatisticsError("both rankings must be 1-D and of equal length")
    if len(rx) < 2:
        return f"only {len(rx)} system(s): a rank correlation needs two"
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return "every system is tied in one of the two rankings: the rank correlation is undefined"
    return None


def _tie_aware(statistic: Callable[..., Any], x: np.ndarray, y: np.ndarray) -> float:
    if correlation_reason(x, y) is not None:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return float(statistic(tied_theta(x), tied_theta(y)).statistic)


def spearman_tie_aware(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ of tie-grouped θ, average ranks for ties; NaN if undefined."""
    return _tie_aware(stats.spearmanr, x, y)


def kendall_tie_aware(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall τ-b of tie-grouped θ; NaN if undefined."""
    return _tie_aware(stats.kendalltau, x, y)


def rowwise_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row of ``a`` with the same row of ``b`` (average ranks for ties); NaN if constant."""
    ra = stats.rankdata(a, axis=1)
    rb = stats.rankdata(b, axis=1)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    denom = np.sqrt((ra**2).sum(axis=1) * (rb**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (ra * rb).sum(axis=1) / np.where(denom > 0, denom, 1.0), np.nan)


def rowwise_spearman_tie_aware(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`rowwise_spearman` of θ tie-grouped per row (bootstrap rows of two fits)."""
    return rowwise_spearman(tied_theta(a), tied_theta(b))


__all__ = [
    "correlation_reason",
    "kendall_tie_aware",
    "rowwise_spearman",
    "rowwise_spearman_tie_aware",
    "spearman_tie_aware",
    "theta_of_scores",
    "tied_theta",
]
