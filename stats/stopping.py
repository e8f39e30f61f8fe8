"""A stopping rule that stays valid under optional stopping (docs/protocol.md "Stopping").

Pure module: numpy in, arrays out, no Django, no project app.

A study read after every round and stopped when its answer looks settled cannot use the
fixed-design 95 % interval at each look: checked often enough, a fixed-design interval excludes the
truth at some look with probability far above 5 %. This module uses a *confidence sequence*: an
interval for every look that covers the truth at all looks simultaneously with probability ≥ 1 − α,
so the study may stop at any look, chosen in any way, adaptive allocation included.

The boundary is Robbins' normal mixture (Robbins 1970; Howard, Ramdas, McAuliffe & Sekhon 2021,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", §3.2), applied to a Bradley–Terry
contrast d = θ_i − θ_j with estimator variance v (information V = 1/v) as in the time-uniform central
limit theory of Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas (2024, "asymptotic confidence
sequences"): the score of the fit is a martingale whatever rule chose the pairs (the rule decides
*which* pair is asked, never its answer), and

    |d̂ − d| < √( v (1 + ρv) · log((1 + ρv) / (ρ v α²)) )   at every look, w.p. ≥ 1 − α (asymptotically),

with ρ the mixing precision, chosen so the boundary is tightest when the half-width is
``tuned_half_width_elo`` (Howard et al. 2021, eq. (3.x): ρ = m / (2 log(1/α) + log(1 + 2 log(1/α)))
for intrinsic time m). v is the model-based variance, an upper bound of the real one when votes
include ties (``stats.allocation``).

Declaring the top k: the fitted top-k set T is declared when every contrast between a member of T
and a non-member has a lower confidence-sequence bound above 0, each at level α / (k(M − k)). If the
k(M − k) sequences of the *true* boundary pairs all cover (probability ≥ 1 − α by Bonferroni), no
wrong set can be declared: a wrong T holds some j outside the true top-k and misses some true
member i, and declaring it needs the sequence of the true boundary pair (i, j) to lie above 0 for
θ_j − θ_i < 0. So the probability of ever declaring a wrong top-k is at most α.
"""

from __future__ import annotations

import math

import numpy as np

from stats.allocation import PairFit, Target, contrast_variance, target_contrasts
from stats.bradley_terry import SCORE_SCALE
from stats.errors import StatisticsError

#: Nominal probability of ever declaring a wrong answer.
STOPPING_ALPHA = 0.05
#: Half-width (Elo points) at which the boundary is tightest: about the score gap a study of a
#: dozen systems has to resolve at its top-k boundary.
TUNED_HALF_WIDTH_ELO = 25.0


def mixture_precision(alpha: float, tuned_half_width_elo: float = TUNED_HALF_WIDTH_ELO) -> float:
    """ρ of the normal mixture, tightest at the intrinsic time of a ``tuned_half_width_elo`` Wald
    half-width."""
    if not 0.0 < alpha < 1.0:
        raise StatisticsError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not (tuned_half_width_elo > 0 and math.isfinite(tuned_half_width_elo)):
        raise StatisticsError(f"tuned half-width must be positive, got {tuned_half_width_elo!r}")
    sd = tuned_half_width_elo / SCORE_SCALE / 1.959963984540054
    intrinsic_time = 1.0 / (sd * sd)
    log_term = 2.0 * math.log(1.0 / alpha)
    return intrinsic_time / (log_term + math.log(1.0 + log_term))


def mixture_half_width(variance: np.ndarray, *, alpha: float, rho: float) -> np.ndarray:
    """Half-width (θ units) of the two-sided normal-mixture confidence sequence at level α."""
    if not 0.0 < alpha < 1.0:
        raise StatisticsError(f"alpha must lie in (0, 1), got {alpha!r}")
    if not rho > 0:
        raise StatisticsError(f"rho must be positive, got {rho!r}")
    v = np.asarray(variance, dtype=np.float64)
    rv = rho * v
    return np.sqrt(v * (1.0 + rv) * np.log((1.0 + rv) / (rv * alpha * alpha)))


def top_k_declaration(
    fit: PairFit,
    k: int,
    *,
    alpha: float = STOPPING_ALPHA,
    tuned_half_width_elo: float = TUNED_HALF_WIDTH_ELO,
) -> tuple[np.ndarray, np.ndarray]:
    """Whether each replicate may declare its fitted top-k now, and that set.

    Returns ``(declared (R,), top (R, k))``; see the module docstring for the rule and its error bound.
    """
    m = fit.n_systems
    target = Target(kind="top_k", k=k)
    target.check_systems(m)
    better, worse, _ = target_contrasts(fit, target)
    rows = np.arange(fit.theta.shape[0])[:, None]
    d = fit.theta[rows, better] - fit.theta[rows, worse]
    v = contrast_variance(fit.covariance, better, worse)
    level = alpha / (k * (m - k))
    half = mixture_half_width(v, alpha=level, rho=mixture_precision(level, tuned_half_width_elo))
    declared = np.all(d - half > 0, axis=1)
    top = np.sort(np.argsort(-fit.theta, axis=1, kind="stable")[:, :k], axis=1)
    return declared, top
