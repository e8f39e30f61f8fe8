"""Seeded simulation of a sequential pairwise study (docs/protocol.md "Adaptive allocation and stopping").

Pure module: numpy in, frozen dataclasses out, no Django, no project app.

The raters follow the ordered-logit model of the demo's simulated raters (``demo/simulation.py``):
a rater with noise scale s and position bias b shown system L on the left and R on the right sees
``z = (θ_L − θ_R) / s + b + ε``, ε ~ Logistic(0, 1), answers left when z > τ, right when z < −τ,
TIE otherwise. Here it is written for many replicates at once: every vote comes from a rater drawn
uniformly from the replicate's panel, with each display order half of the time (the protocol
counterbalances), so the answer to a pair is one draw from the panel's *mixture* of
(first wins, TIE, second wins) probabilities — exactly, since the Bradley–Terry fit depends on the
votes only through the counts per pair. ``rater_mixture_probabilities`` is that mixture; the tests
check it against ``demo.simulation.rater_answer`` drawn one vote at a time.

Assumptions (``StudyAssumptions``): M systems whose true scores are the normal quantiles
``elo_sd · Φ⁻¹((m + ½) / M)`` (a bell-shaped spread like a public arena's; the assignment of scores to
system indices is a seeded permutation), a panel of raters with log-normal noise scales (a share of
them sloppy, three times noisier) and normal position biases, and the tie band τ solved so that the
tie rate over all pairs, uniformly asked, is ``tie_rate``.

``run_sequential`` plays a study forward, R replicates at once, to a grid of cumulative vote counts
(the looks), allocating each round by one rule of ``stats.allocation`` and refitting at every look.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, ndtri
from sklearn.isotonic import IsotonicRegression

from stats.allocation import (
    RULES,
    UNIFORM_FLOOR,
    PairFit,
    Target,
    adjacent_widths,
    allocation_weights,
    balanced_counts,
    fit_pairs,
    pair_indices,
    round_counts,
)
from stats.bradley_terry import SCORE_SCALE, fit_pair_points_batch
from stats.errors import StatisticsError
from stats.stopping import STOPPING_ALPHA, top_k_declaration


@dataclass(frozen=True)
class StudyAssumptions:
    """What a researcher states about a study before it runs."""

    n_systems: int
    elo_sd: float = 100.0
    tie_rate: float = 0.10
    rater_noise: float = 0.3  # standard deviation of log(noise scale) over the panel
    sloppy_share: float = 0.1  # raters three times noisier
    position_bias_sd: float = 0.25
    n_raters: int = 20
    elo: tuple[float, ...] | None = None  # true scores (e.g. a pilot's fit) instead of the quantiles
    #: Share of votes from random clickers, who answer left or right at random whatever is shown
    #: (with counterbalanced sides: either system with probability ½, never TIE).
    clicker_share: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.n_systems, bool) or not isinstance(self.n_systems, int) or self.n_systems < 2:
            raise StatisticsError(f"n_systems must be an integer >= 2, got {self.n_systems!r}")
        if not (self.elo_sd > 0 and math.isfinite(self.elo_sd)):
            raise StatisticsError(f"elo_sd must be positive, got {self.elo_sd!r}")
        if not 0.0 <= self.tie_rate < 0.9:
            raise StatisticsError(f"tie_rate must lie in [0, 0.9), got {self.tie_rate!r}")
        if not 0.0 <= self.rater_noise <= 2.0:
            raise StatisticsError(f"rater_noise must lie in [0, 2], got {self.rater_noise!r}")
        if not 0.0 <= self.sloppy_share <= 1.0:
            raise StatisticsError(f"sloppy_share must lie in [0, 1], got {self.sloppy_share!r}")
        if not 0.0 <= self.position_bias_sd <= 3.0:
            raise StatisticsError(f"position_bias_sd must lie in [0, 3], got {self.position_bias_sd!r}")
        if not 0.0 <= self.clicker_share < 1.0:
            raise StatisticsError(f"clicker_share must lie in [0, 1), got {self.clicker_share!r}")
        if self.n_raters < 1:
            raise StatisticsError(f"n_raters must be at least 1, got {self.n_raters!r}")
        if self.elo is not None and (
            len(self.elo) != self.n_systems or not all(math.isfinite(float(x)) for x in self.elo)
        ):
            raise StatisticsError(f"elo must hold {self.n_systems} finite scores, got {self.elo!r}")


@dataclass(frozen=True, eq=False)
class SimulatedTruth:
    """R replicates of a study: true scores (R, M) in Elo points and the answer probabilities of
    every pair (R, K, 3): (first system wins, TIE, second wins), panel and display orders mixed."""

    seeds: tuple[int, ...]
    elo: np.ndarray
    answer_probabilities: np.ndarray
    tie_band: np.ndarray

    @property
    def n_systems(self) -> int:
        return int(self.elo.shape[1])

    def top(self, k: int) -> np.ndarray:
        """The true top-k of every replicate, sorted indices (R, k)."""
        return np.sort(np.argsort(-self.elo, axis=1, kind="stable")[:, :k], axis=1)


def rater_mixture_probabilities(
    diff: np.ndarray, noise: np.ndarray, bias: np.ndarray, tie_band: np.ndarray
) -> np.ndarray:
    """(first wins, TIE, second wins) for θ differences ``diff`` (..., K), averaged over the panel
    (``noise``, ``bias``: (..., n_raters)) and both display orders. ``tie_band``: (...,)."""
    d = diff[..., :, None] / noise[..., None, :]
    b = bias[..., None, :]
    tau = tie_band[..., None, None]
    # First system on the left: z = d + b; on the right: z = −d + b, and "first wins" means z < −τ.
    first_left = 0.5 * (expit(d + b - tau) + expit(d - b - tau))
    second = 0.5 * (expit(-d - b - tau) + expit(-d + b - tau))
    p_first = first_left.mean(axis=-1)
    p_second = second.mean(axis=-1)
    return np.stack([p_first, 1.0 - p_first - p_second, p_second], axis=-1)


def simulated_truth(assumptions: StudyAssumptions, seeds: Sequence[int]) -> SimulatedTruth:
    """The replicates of ``assumptions``, one per seed (the same seed gives the same replicate)."""
    if not seeds:
        raise StatisticsError("at least one seed is needed")
    m = assumptions.n_systems
    if assumptions.elo is not None:
        quantiles = np.asarray(assumptions.elo, dtype=np.float64)
        quantiles = quantiles - quantiles.mean()
    else:
        quantiles = assumptions.elo_sd * ndtri((np.arange(m) + 0.5) / m)
    first, second = pair_indices(m)
    elo_rows, noise_rows, bias_rows = [], [], []
    for seed in seeds:
        rng = np.random.default_rng([20261203, int(seed)])
        elo_rows.append(quantiles[rng.permutation(m)])
        noise = np.exp(assumptions.rater_noise * rng.standard_normal(assumptions.n_raters))
        sloppy = rng.random(assumptions.n_raters) < assumptions.sloppy_share
        noise_rows.append(np.where(sloppy, 3.0 * noise, noise))
        bias_rows.append(assumptions.position_bias_sd * rng.standard_normal(assumptions.n_raters))
    elo = np.array(elo_rows)
    noise = np.array(noise_rows)
    bias = np.array(bias_rows)
    diff = (elo[:, first] - elo[:, second]) / SCORE_SCALE
    # Bisection on τ: the tie rate over all pairs rises monotonically with the tie band.
    low = np.zeros(len(seeds))
    high = np.full(len(seeds), 20.0)
    for _ in range(60):
        mid = 0.5 * (low + high)
        ties = rater_mixture_probabilities(diff, noise, bias, mid)[..., 1].mean(axis=1)
        below = ties < assumptions.tie_rate
        low = np.where(below, mid, low)
        high = np.where(below, high, mid)
    tau = 0.5 * (low + high)
    probabilities = np.clip(rater_mixture_probabilities(diff, noise, bias, tau), 0.0, 1.0)
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    if assumptions.clicker_share:
        c = assumptions.clicker_share
        probabilities = (1.0 - c) * probabilities + c * np.array([0.5, 0.0, 0.5])
    return SimulatedTruth(tuple(int(s) for s in seeds), elo, probabilities, tau)


def bradley_terry_limit(truth: SimulatedTruth) -> np.ndarray:
    """θ* (R, M), logit scale: what the Bradley–Terry fit converges to under the uniform design — the
    fit of every replicate's expected answers (10⁹ votes per pair, so the 10⁻³ penalty vanishes).
    The strengths an oracle allocator would know (``stats.optimal_design``)."""
    p = truth.answer_probabilities
    first_points = p[..., 0] + 0.5 * p[..., 1]
    theta, _ = fit_pair_points_batch(1e9 * first_points, 1e9 * (1.0 - first_points))
    return theta


def draw_answers(truth: SimulatedTruth, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Points of the first system (A = 1, TIE = ½) for ``counts`` (R, K) new votes per pair."""
    outcome = rng.multinomial(counts.astype(np.int64), truth.answer_probabilities)
    return outcome[..., 0] + 0.5 * outcome[..., 1]


@dataclass(frozen=True, eq=False)
class SequentialRun:
    """A study played forward: one row per look (T), one column per replicate (R).

    ``top_correct[t, r]``: the fitted top-k equals the true one; ``max_adjacent_width[t, r]``: the
    widest 95 % Wald interval (Elo) of an adjacent score difference; ``declared_at[r]``: the first
    look at which the stopping rule declared the top-k (−1: never), ``declared_correct[r]``
    whether that declaration was right; ``votes`` the cumulative votes of every look.
    """

    rule: str
    target: Target
    votes: np.ndarray
    top_correct: np.ndarray
    max_adjacent_width: np.ndarray
    declared_at: np.ndarray
    declared_correct: np.ndarray


def look_grid(
    n_systems: int, *, start_per_pair: float = 2.0, stop_per_pair: float = 400.0, ratio: float = 1.12
) -> np.ndarray:
    """Cumulative vote counts of the looks: geometric from ``start_per_pair`` to ``stop_per_pair``
    votes per pair."""
    k_pairs = n_systems * (n_systems - 1) // 2
    start = max(1, round(start_per_pair * k_pairs))
    stop = max(start, round(stop_per_pair * k_pairs))
    grid = [start]
    while grid[-1] < stop:
        grid.append(min(stop, max(grid[-1] + 1, round(grid[-1] * ratio))))
    return np.array(grid, dtype=np.int64)


def run_sequential(
    truth: SimulatedTruth,
    rule: str,
    target: Target,
    looks: np.ndarray,
    *,
    seed: int,
    floor: float = UNIFORM_FLOOR,
    alpha: float = STOPPING_ALPHA,
) -> SequentialRun:
    """Play every replicate of ``truth`` forward under ``rule`` to the cumulative ``looks``.

    The first look is always the fixed design (the allocator needs a fit to start from); every later
    round is allocated from the fit at the previous look (``floor`` of an adaptive round uniform).
    """
    if rule not in RULES:
        raise StatisticsError(f"allocation rule must be one of {', '.join(RULES)}, got {rule!r}")
    looks = np.asarray(looks, dtype=np.int64)
    if looks.ndim != 1 or len(looks) < 1 or np.any(np.diff(looks) <= 0) or looks[0] < 1:
        raise StatisticsError("looks must be increasing positive vote counts")
    m = truth.n_systems
    target.check_systems(m)
    n_rep = len(truth.seeds)
    k_pairs = m * (m - 1) // 2
    rng = np.random.default_rng([20261204, int(seed), *truth.seeds[:4]])
    order = np.argsort(rng.random((n_rep, k_pairs)), axis=1)
    true_top = truth.top(target.k)
    votes = np.zeros((n_rep, k_pairs))
    points = np.zeros((n_rep, k_pairs))
    top_correct = np.zeros((len(looks), n_rep), dtype=bool)
    widest = np.zeros((len(looks), n_rep))
    declared_at = np.full(n_rep, -1, dtype=np.int64)
    declared_correct = np.zeros(n_rep, dtype=bool)
    fit: PairFit | None = None
    for t, total in enumerate(looks):
        previous = int(looks[t - 1]) if t else 0
        if rule == "uniform" or fit is None:
            new: np.ndarray = balanced_counts(int(total), order) - votes
        elif rule == "random":
            new = rng.multinomial(int(total) - previous, np.full(k_pairs, 1.0 / k_pairs), size=n_rep)
        else:
            weights = allocation_weights(
                rule, fit, target, rng=rng, n_votes=int(total) - previous, floor=floor
            )
            new = round_counts(int(total) - previous, weights, floor=floor, rng=rng)
        points += draw_answers(truth, new, rng)
        votes += new
        fit = fit_pairs(votes, points)
        fitted_top = np.sort(np.argsort(-fit.theta, axis=1, kind="stable")[:, : target.k], axis=1)
        top_correct[t] = np.all(fitted_top == true_top, axis=1)
        widest[t] = adjacent_widths(fit).max(axis=1)
        declared, top = top_k_declaration(fit, target.k, alpha=alpha)
        fresh = declared & (declared_at < 0)
        declared_at[fresh] = t
        declared_correct[fresh] = np.all(top[fresh] == true_top[fresh], axis=1)
    return SequentialRun(rule, target, looks, top_correct, widest, declared_at, declared_correct)


def votes_to_share(looks: np.ndarray, reached: np.ndarray, level: float) -> float:
    """Votes at which the share of replicates meeting a target first reaches ``level``.

    ``reached``: (T, R) booleans. The share per look is noisy (R replicates), so it is first made
    non-decreasing in the votes by isotonic regression (pool adjacent violators, scikit-learn),
    then the crossing is interpolated log-linearly between looks; inf if never reached.
    """
    share = np.asarray(reached, dtype=np.float64).mean(axis=1)
    share = IsotonicRegression(increasing=True).fit_transform(np.arange(len(share)), share)
    hits = np.flatnonzero(share >= level - 1e-12)
    if hits.size == 0:
        return math.inf
    t = int(hits[0])
    if t == 0:
        return float(looks[0])
    s0, s1 = share[t - 1], share[t]
    frac = (level - s0) / (s1 - s0) if s1 > s0 else 1.0
    return float(math.exp(math.log(looks[t - 1]) + frac * (math.log(looks[t]) - math.log(looks[t - 1]))))


def votes_to_width(looks: np.ndarray, widest: np.ndarray, threshold: float) -> np.ndarray:
    """Per replicate, the votes from which the widest adjacent interval stays at or below
    ``threshold`` at every later look, (R,): log-linear interpolation of the width between the last
    look above and the first look of that run; inf if not settled by the last look."""
    below = widest <= threshold
    # Stays below from t on: reverse cumulative AND.
    settled = np.flip(np.logical_and.accumulate(np.flip(below, axis=0), axis=0), axis=0)
    any_settled = settled.any(axis=0)
    first = np.argmax(settled, axis=0)
    out = np.where(any_settled, looks[first].astype(np.float64), math.inf)
    for r in np.flatnonzero(any_settled & (first > 0)):
        t = int(first[r])
        w0, w1 = math.log(widest[t - 1, r]), math.log(widest[t, r])
        frac = (w0 - math.log(threshold)) / (w0 - w1) if w0 > w1 else 1.0
        out[r] = math.exp(math.log(looks[t - 1]) + frac * (math.log(looks[t]) - math.log(looks[t - 1])))
    return out


def centred_covariance(cov: np.ndarray) -> np.ndarray:
    """The covariance of the centred scores θ − mean(θ), (R, M, M): P Σ P with P = I − 11ᵀ / M (the
    fit's inverse information carries the penalty's large variance along the all-ones direction)."""
    m = cov.shape[-1]
    p = np.eye(m) - 1.0 / m
    return p @ cov @ p


@dataclass(frozen=True, eq=False)
class RoundsRun:
    """A study played forward in fixed rounds (the granularity of serve-time adaptation), with both
    the plain fit and the inverse-propensity-weighted fit (``stats.adaptive_estimation``) at the end
    of every round: ``votes`` (T,), and per look (T, R, M) their θ and standard errors (logit
    scale), (T, R) whether each one's top-k is the true one."""

    rule: str
    target: Target
    votes: np.ndarray
    theta: np.ndarray
    se: np.ndarray
    top_correct: np.ndarray
    ipw_theta: np.ndarray
    ipw_se: np.ndarray
    ipw_top_correct: np.ndarray
    groups: list[tuple[np.ndarray, np.ndarray]]  # (weight, votes) of every round, (R, K) each


def run_rounds(
    truth: SimulatedTruth,
    rule: str,
    target: Target,
    *,
    start_votes: int,
    round_votes: int,
    total_votes: int,
    seed: int,
    floor: float = UNIFORM_FLOOR,
    weight_power: float = 1.0,
) -> RoundsRun:
    """Play every replicate forward: ``start_votes`` of the fixed design, then rounds of
    ``round_votes`` allocated by ``rule`` from the fit of every vote so far (a round of 1 is
    choosing each comparison when a rater asks for it), to ``total_votes``.

    Every vote's allocation probability is the one it was drawn with: 1 / K in the fixed design; in
    an adaptive round ``f' / K + (1 − f') w_k`` with f' the round's floor share and w the rule's
    shares (``round_counts``), which the weighted fit reads.
    """
    from stats.adaptive_estimation import WeightedPairTotals, fit_weighted_totals

    if rule not in RULES:
        raise StatisticsError(f"allocation rule must be one of {', '.join(RULES)}, got {rule!r}")
    if not 1 <= start_votes <= total_votes or round_votes < 1:
        raise StatisticsError("start, round and total votes must be positive, the start at most the total")
    m = truth.n_systems
    target.check_systems(m)
    n_rep = len(truth.seeds)
    k_pairs = m * (m - 1) // 2
    rng = np.random.default_rng([20261206, int(seed), *truth.seeds[:4]])
    order = np.argsort(rng.random((n_rep, k_pairs)), axis=1)
    looks = [start_votes]
    while looks[-1] < total_votes:
        looks.append(min(total_votes, looks[-1] + round_votes))
    true_top = truth.top(target.k)
    votes = np.zeros((n_rep, k_pairs))
    points = np.zeros((n_rep, k_pairs))
    totals = WeightedPairTotals.empty(n_rep, k_pairs)
    shape = (len(looks), n_rep, m)
    theta, se, ipw_theta, ipw_se = (np.zeros(shape) for _ in range(4))
    top_correct = np.zeros((len(looks), n_rep), dtype=bool)
    ipw_top_correct = np.zeros((len(looks), n_rep), dtype=bool)
    fit: PairFit | None = None
    groups: list[tuple[np.ndarray, np.ndarray]] = []
    for t, total in enumerate(looks):
        n_new = total - (looks[t - 1] if t else 0)
        if fit is None or rule == "uniform":
            new = balanced_counts(int(total), order) - votes
            propensity = np.full((n_rep, k_pairs), 1.0 / k_pairs)
        else:
            shares = allocation_weights(rule, fit, target, rng=rng, n_votes=n_new, floor=floor)
            if floor * n_new < 1:
                # Rounds too small for a whole floor vote (1 vote: choosing at serve time): every
                # vote is drawn from the mixture, as ``stats.allocation.serve_time_choice`` does.
                propensity = floor / k_pairs + (1.0 - floor) * shares
                new = rng.multinomial(n_new, propensity).astype(float)
            else:
                new = round_counts(n_new, shares, floor=floor, rng=rng)
                floor_share = min(n_new, math.ceil(floor * n_new)) / n_new
                propensity = floor_share / k_pairs + (1.0 - floor_share) * shares
        outcome = rng.multinomial(new.astype(np.int64), truth.answer_probabilities)
        new_points = outcome[..., 0] + 0.5 * outcome[..., 1]
        points += new_points
        votes += new
        groups.append(((1.0 / (k_pairs * propensity)) ** weight_power, new))
        totals = totals.add(
            groups[-1][0],
            new,
            new_points,
            outcome[..., 0] + 0.25 * outcome[..., 1],
        )
        fit = fit_pairs(votes, points)
        weighted = fit_weighted_totals(totals)
        theta[t], ipw_theta[t] = fit.theta, weighted.theta
        se[t] = np.sqrt(np.diagonal(centred_covariance(fit.covariance), axis1=1, axis2=2))
        ipw_se[t] = np.sqrt(np.maximum(np.diagonal(weighted.covariance, axis1=1, axis2=2), 0.0))
        for estimate, correct in ((fit.theta, top_correct), (weighted.theta, ipw_top_correct)):
            fitted = np.sort(np.argsort(-estimate, axis=1, kind="stable")[:, : target.k], axis=1)
            correct[t] = np.all(fitted == true_top, axis=1)
    return RoundsRun(
        rule, target, np.array(looks), theta, se, top_correct, ipw_theta, ipw_se, ipw_top_correct, groups
    )
