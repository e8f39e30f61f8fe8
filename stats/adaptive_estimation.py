"""Scores from adaptively collected votes: inverse-propensity-weighted Bradley–Terry
(docs/protocol.md "Scores of an adaptive study").

Pure module: numpy in, frozen dataclasses out, no Django, no project app.

Why: an adaptive study stops asking a pair once its order looks clear, so the last answers a pair
got were, on average, lucky ones, and the plain docs/protocol.md "Deployment leaderboard" fit of all votes
carries that luck (issue 39: the true top three came out 6–13 Elo too high under posterior sampling). The fix
weights every vote by the inverse of the probability with which its pair was chosen when it was served.

Each served vote t on pair k_t was drawn with a known probability π_t (the allocation probability:
the uniform floor's share spread over the K pairs plus the rule's share of pair k_t, stored with
the trial). Weighting it by ``w_t = 1 / (K π_t)`` (1 for a uniform vote) makes the conditional
expectation of every vote's weighted score equal to the score of a vote of the uniform design,
whatever the history that chose it:

    E[w_t ψ(y_t; θ, k_t) | past] = Σ_k π_k · 1/(K π_k) · E[ψ(y; θ, k)] = (1/K) Σ_k E[ψ(y; θ, k)],

so the weighted docs/protocol.md "Deployment leaderboard" estimating equation is unbiased for the uniform
design's target (the Bradley–Terry limit of ``stats.study_simulation.bradley_terry_limit``), a martingale sum
rather than one whose terms depend on how lucky a pair was before. Because the objective depends on the
votes only through each pair's points, the weighted fit is the ordinary fit of the weighted points
per pair (``fit_pair_points_batch``, the 10⁻³ penalty included).

The weighted fit's covariance is the sandwich ``A⁻¹ B A⁻¹``: A the weighted fit's information
(penalty included), B = Σ_k p_k (1 − p_k) (Σ_t w_t²) a_k a_kᵀ over the pairs k, a_k = e_i − e_j and
p_k the fitted probability that the pair's first system wins: the variance of each weighted vote as
the model gives it. With every weight 1 (a uniform study) that is the plain fit's inverse information
(the 10⁻³ penalty aside), so an adaptive study's intervals are built as a uniform study's are and its
coverage is compared like with like. The answers' own variance Σ w² (y − p)² (HC0) is smaller with
ties, so with it the adaptive intervals covered less than the uniform design's, which ties make a
little wide (issue 46, docs/decisions/0080-adaptive-scores-at-the-real-start.md); where a pair's
votes are few, ``bias_corrected`` widens the interval to its refits' spread. The floor keeps π_t ≥ floor / K, so the weights stay
at most 1 / floor (4 at the 25 % floor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from stats.bradley_terry import L2_PENALTY, SCORE_SCALE, fit_pair_points_batch
from stats.errors import StatisticsError

#: The name the reports give next to the scores of an adaptive study.
IPW_ESTIMATOR = "inverse-propensity-weighted Bradley–Terry"
Z95 = 1.959963984540054


@dataclass(frozen=True, eq=False)
class WeightedPairTotals:
    """What the weighted fit reads, per replicate (R) and pair (K), each (R, K):
    Σ w n, Σ w y (first system's points) and Σ w² n (the sandwich's); Σ w² y and Σ w² y² give the
    answers' own variance (``answer_spread``)."""

    votes: np.ndarray
    points: np.ndarray
    sq_votes: np.ndarray
    sq_points: np.ndarray
    sq_points2: np.ndarray

    @classmethod
    def empty(cls, n_replicates: int, n_pairs: int) -> WeightedPairTotals:
        z = np.zeros((n_replicates, n_pairs))
        return cls(z.copy(), z.copy(), z.copy(), z.copy(), z.copy())

    def add(
        self,
        weight: np.ndarray,
        votes: np.ndarray,
        points: np.ndarray,
        points2: np.ndarray,
    ) -> WeightedPairTotals:
        """These totals plus votes of weight ``weight`` (R, K): ``votes`` per pair, ``points`` (Σ y)
        and ``points2`` (Σ y²) of the first system."""
        w2 = weight * weight
        return WeightedPairTotals(
            self.votes + weight * votes,
            self.points + weight * points,
            self.sq_votes + w2 * votes,
            self.sq_points + w2 * points,
            self.sq_points2 + w2 * points2,
        )


@dataclass(frozen=True, eq=False)
class WeightedFit:
    """θ (R, M), logit scale and centred; its sandwich covariance (R, M, M)."""

    theta: np.ndarray
    covariance: np.ndarray
    estimator: str = IPW_ESTIMATOR

    @property
    def scores(self) -> np.ndarray:
        """Elo-scale scores (docs/protocol.md "Deployment leaderboard": 400 θ / ln 10)."""
        return SCORE_SCALE * self.theta

    @property
    def standard_errors(self) -> np.ndarray:
        """Elo-scale standard errors of the scores, (R, M)."""
        return SCORE_SCALE * np.sqrt(np.maximum(np.diagonal(self.covariance, axis1=1, axis2=2), 0.0))

    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """95 % Wald intervals of the Elo-scale scores, (low, high), each (R, M)."""
        se = self.standard_errors
        return self.scores - Z95 * se, self.scores + Z95 * se


def _pairs(m: int) -> tuple[np.ndarray, np.ndarray]:
    first, second = np.triu_indices(m, 1)
    return first.astype(np.int64), second.astype(np.int64)


def _laplacian(values: np.ndarray, m: int) -> np.ndarray:
    """Σ_k values[r, k] a_k a_kᵀ, a_k = e_i − e_j, (R, M, M)."""
    first, second = _pairs(m)
    n_rep = values.shape[0]
    out = np.zeros((n_rep, m, m))
    rows = np.arange(n_rep)[:, None]
    np.add.at(out, (rows, first, second), -values)
    out = out + np.swapaxes(out, 1, 2)
    out[:, np.arange(m), np.arange(m)] = -out.sum(axis=2)
    return out


def answer_spread(totals: WeightedPairTotals, theta: np.ndarray) -> np.ndarray:
    """Σ w² (y − p)² per pair at ``theta`` (R, K): the answers' own variance of the weighted score
    (HC0's middle term), which the sandwich does not use (module docstring); for diagnostics."""
    first, second = _pairs(theta.shape[1])
    p = expit(theta[:, first] - theta[:, second])
    return np.maximum(totals.sq_points2 - 2.0 * p * totals.sq_points + p * p * totals.sq_votes, 0.0)


def fit_weighted_totals(totals: WeightedPairTotals, *, l2: float = L2_PENALTY) -> WeightedFit:
    """The inverse-propensity-weighted fit of every replicate (module docstring)."""
    k_pairs = totals.votes.shape[1]
    m = round((1 + np.sqrt(1 + 8 * k_pairs)) / 2)
    theta, info = fit_pair_points_batch(
        totals.points, np.maximum(totals.votes - totals.points, 0.0), l2=l2
    )
    first, second = _pairs(m)
    p = expit(theta[:, first] - theta[:, second])
    # The model's variance p(1 − p) Σ w² per pair (docs/protocol.md "Scores of an adaptive study": with
    # every weight 1 the covariance is then the plain fit's inverse information, as a uniform
    # study's intervals are).
    spread = p * (1.0 - p) * totals.sq_votes
    inverse = np.linalg.inv(info)
    covariance = inverse @ _laplacian(spread, m) @ inverse
    return WeightedFit(theta=theta, covariance=covariance)


def ipw_bradley_terry(
    first: np.ndarray,
    second: np.ndarray,
    points_first: np.ndarray,
    propensity: np.ndarray,
    n_systems: int,
    *,
    l2: float = L2_PENALTY,
) -> WeightedFit:
    """Inverse-propensity-weighted docs/protocol.md "Deployment leaderboard" fit of one study's votes (R = 1
    in the result).

    One entry per valid vote: the systems ``first`` and ``second`` (indices, distinct), the first
    system's points (A = 1, TIE = ½, B = 0) and ``propensity``, the probability with which the
    vote's unordered pair was chosen when it was served (uniform design: 1 / K).
    """
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    y = np.asarray(points_first, dtype=np.float64)
    pi = np.asarray(propensity, dtype=np.float64)
    if not (a.shape == b.shape == y.shape == pi.shape) or a.ndim != 1:
        raise StatisticsError("first, second, points and propensity must be 1-D arrays of one length")
    if n_systems < 2:
        raise StatisticsError(f"a fit needs at least 2 systems, got {n_systems}")
    if len(a) and (a.min() < 0 or b.min() < 0 or max(a.max(), b.max()) >= n_systems or np.any(a == b)):
        raise StatisticsError("system indices must lie in [0, n_systems) and differ within a vote")
    if np.any(~np.isfinite(y)) or np.any((y < 0) | (y > 1)):
        raise StatisticsError("points must lie in [0, 1]")
    if np.any(~np.isfinite(pi)) or np.any((pi <= 0) | (pi > 1)):
        raise StatisticsError("allocation probabilities must lie in (0, 1]")
    k_pairs = n_systems * (n_systems - 1) // 2
    low, high = np.minimum(a, b), np.maximum(a, b)
    column = low * n_systems - low * (low + 1) // 2 + (high - low - 1)
    y_low = np.where(a == low, y, 1.0 - y)  # points of the pair's lower index (its first system)
    w = 1.0 / (k_pairs * pi)

    def per_pair(values: np.ndarray) -> np.ndarray:
        return np.bincount(column, weights=values, minlength=k_pairs)[None, :]

    totals = WeightedPairTotals(
        per_pair(w), per_pair(w * y_low), per_pair(w * w), per_pair(w * w * y_low), per_pair(w * w * y_low**2)
    )
    return fit_weighted_totals(totals, l2=l2)




def bias_corrected(
    fit: WeightedFit,
    groups: list[tuple[np.ndarray, np.ndarray]],
    *,
    tie_rate: np.ndarray | float,
    resamples: int = 200,
    rng: np.random.Generator,
    l2: float = L2_PENALTY,
) -> WeightedFit:
    """The weighted fit with its finite-sample bias removed by a parametric bootstrap.

    Weighting removes the bias of *how* the votes were chosen, not the small-sample bias every
    logistic fit has away from zero (it is of order 1 / n per pair, and a pair the allocation
    seldom asks has few votes, each weighted up). Holding the served design fixed — ``groups``:
    (weight, votes) pairs of (R, K) arrays, the votes of each pair served with that weight — the
    answers are drawn again from the fit (a pair's first system scoring p = σ(θ_i − θ_j) on
    average, ties at ``tie_rate`` where p allows), refitted ``resamples`` times, and the mean
    shift of the refits is subtracted: θ̂ − (mean θ* − θ̂). The covariance is the fit's sandwich.
    """
    if resamples < 10:
        raise StatisticsError(f"at least 10 resamples are needed, got {resamples}")
    theta = fit.theta
    n_rep, m = theta.shape
    first, second = _pairs(m)
    p = expit(theta[:, first] - theta[:, second])
    tie = np.minimum(np.broadcast_to(np.asarray(tie_rate, dtype=np.float64), (n_rep,))[:, None], 2 * np.minimum(p, 1 - p))
    probabilities = np.stack([p - tie / 2, tie, 1 - p - tie / 2], axis=-1)  # (R, K, 3)
    probabilities = np.clip(probabilities, 0.0, 1.0)
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    k_pairs = p.shape[1]
    upper = np.zeros((resamples, n_rep, k_pairs))
    total = np.zeros((resamples, n_rep, k_pairs))
    for weight, votes in groups:
        counts = np.broadcast_to(votes.astype(np.int64), (resamples, n_rep, k_pairs))
        outcome = rng.multinomial(counts, probabilities)
        upper += weight * (outcome[..., 0] + 0.5 * outcome[..., 1])
        total += weight * votes
    refit, _ = fit_pair_points_batch(
        upper.reshape(-1, k_pairs), np.maximum(total - upper, 0.0).reshape(-1, k_pairs), l2=l2
    )
    draws = refit.reshape(resamples, n_rep, m)
    shift = draws.mean(axis=0) - theta
    # The refits' spread is a second estimate of the fit's sampling variance, holding the served
    # design fixed; where it is wider than the sandwich's, the covariance is scaled up to it
    # (a few-vote pair's sandwich is too narrow). Correlations are the sandwich's.
    centred = draws - draws.mean(axis=0)
    spread = np.einsum("srm,srm->rm", centred, centred) / (resamples - 1)
    sandwich = np.maximum(np.diagonal(fit.covariance, axis1=1, axis2=2), 1e-300)
    scale = np.sqrt(np.maximum(spread / sandwich, 1.0))
    covariance = fit.covariance * scale[:, :, None] * scale[:, None, :]
    return WeightedFit(theta=theta - shift, covariance=covariance, estimator=fit.estimator + ", bias-corrected")


def debiased_bradley_terry(
    first: np.ndarray,
    second: np.ndarray,
    points_first: np.ndarray,
    propensity: np.ndarray,
    n_systems: int,
    *,
    resamples: int = 200,
    seed: int = 0,
) -> WeightedFit:
    """The scores an adaptive study reports: ``ipw_bradley_terry`` of its votes, then
    ``bias_corrected`` with the votes grouped by the weight they were served with and the study's
    own tie share (docs/protocol.md "Scores of an adaptive study")."""
    fit = ipw_bradley_terry(first, second, points_first, propensity, n_systems)
    a = np.asarray(first, dtype=np.int64)
    b = np.asarray(second, dtype=np.int64)
    pi = np.asarray(propensity, dtype=np.float64)
    k_pairs = n_systems * (n_systems - 1) // 2
    low, high = np.minimum(a, b), np.maximum(a, b)
    column = low * n_systems - low * (low + 1) // 2 + (high - low - 1)
    weight = 1.0 / (k_pairs * pi)
    groups = []
    for value in np.unique(weight):
        votes = np.bincount(column[weight == value], minlength=k_pairs).astype(np.float64)[None, :]
        groups.append((np.full((1, k_pairs), value), votes))
    ties = float(np.mean(np.asarray(points_first, dtype=np.float64) == 0.5)) if len(a) else 0.0
    corrected = bias_corrected(
        fit, groups, tie_rate=ties, resamples=resamples, rng=np.random.default_rng([39, seed])
    )
    return corrected


def rank_draws(fit: WeightedFit, *, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank intervals and rank-1 shares of a one-study fit (R = 1): ``draws`` seeded draws of θ from
    the normal law of the estimator (its θ and covariance), ranked as the page-block bootstrap's
    resamples are (docs/protocol.md "Human leaderboard"). Returns ((M, 2) integer 95 % rank
    intervals, (M,) share of draws in which each system ranks first)."""
    from stats.bradley_terry import ranks_from_theta

    if fit.theta.shape[0] != 1:
        raise StatisticsError("rank_draws takes the fit of one study (R = 1)")
    rng = np.random.default_rng([46, seed])
    theta = rng.multivariate_normal(fit.theta[0], fit.covariance[0], size=int(draws), method="eigh")
    ranks = ranks_from_theta(theta)
    low = np.percentile(ranks, 2.5, axis=0, method="lower")
    high = np.percentile(ranks, 97.5, axis=0, method="higher")
    return np.stack([low, high], axis=1).astype(np.int64), (ranks == 1).mean(axis=0)


__all__ = [
    "IPW_ESTIMATOR",
    "WeightedFit",
    "WeightedPairTotals",
    "answer_spread",
    "bias_corrected",
    "debiased_bradley_terry",
    "fit_weighted_totals",
    "ipw_bradley_terry",
    "rank_draws",
]
