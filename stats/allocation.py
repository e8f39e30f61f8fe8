"""Adaptive allocation of pairwise comparisons (docs/protocol.md "Adaptive allocation and stopping").

Pure module: numpy/scipy in, arrays and frozen dataclasses out, no Django, no project app.

Everything works on *replicates*: R independent copies of one study (the seeds of a simulation, or
R = 1 for a real study), each a vector of votes per unordered system pair. Pairs are the K =
M(M−1)/2 pairs i < j in row-major ``np.triu_indices(M, 1)`` order (the pair form of
``stats.bradley_terry``); the canonical A of pair k is its lower index i.

The current fit of a replicate is the docs/protocol.md "Deployment leaderboard" Bradley–Terry fit of its votes
(``fit_pairs``) with the inverse observed information as covariance Σ. For outcomes in [0, 1] with mean μ the
variance is at most μ(1 − μ) (E[y²] ≤ E[y]), so the model-based Σ never understates the variance when votes
include ties (0.5) — it is conservative, which the stopping rule (``stats.stopping``) relies on.

Rules (``allocation_weights``), each giving the share of the next votes per pair:

- ``uniform``: the fixed design (pair counts equal ±1, what a study does today);
- ``random``: every pair equally likely (a multinomial, not balanced);
- ``shrinkage``: Chatbot Arena's rule (Chiang et al. 2024, §5): weight a pair by how much one more
  vote shrinks its interval, ``√v − √v′`` with v the variance of θ_i − θ_j and v′ after one vote
  (Sherman–Morrison: ``v′ = v − q v² / (1 + q v)``, q = σ(1 − σ) the vote's information);
- ``information``: expected information gain about the *target's* undecided contrasts (ASAP-style,
  Mikhailiuk et al. 2020, under the Gaussian approximation of the posterior): for a vote on pair e
  and target contrast c, ``½ log(v_c / (v_c − q_e (cᵀ Σ a_e)² / (1 + q_e v_e)))``, summed over the
  contrasts weighted by how undecided each is (probability of the wrong order for top-k; width
  above the threshold for adjacent separation);
- ``thompson``: posterior sampling: draw θ̃ ~ N(θ̂, Σ) and vote on the target's contrast in θ̃'s
  order (the k-th against the (k+1)-th for top-k; a random still-too-wide adjacent pair);
- ``design``: a greedy optimal-design step for the adjacent target: the next round's votes are
  placed in ``DESIGN_STEPS`` chunks, each on the pair whose chunk most lowers the total excess
  ``Σ_c max(v_c − v*, 0)`` of the adjacent differences' variances over the variance v* of the
  width threshold, Σ updated after every chunk by Sherman–Morrison (``Σ − h Σa aᵀΣ / (1 + h aᵀΣa)``,
  h = chunk × q_e); the round's uniform floor is added to the information first. Any pair may be
  chosen, not only the adjacent ones: a vote on (i, i+2) or through a third system also narrows
  θ_i − θ_{i+1}, and close pairs carry the most information per vote (q = σ(1 − σ) is largest at
  σ = ½). The adjacent contrasts are the pairs adjacent in posterior draws θ̃ ~ N(θ̂, Σ), weighted by
  how often (close systems swap places); for top-k it reads the fitted order's boundary contrasts
  (excess: all of their variance).

Every adaptive round mixes a uniform floor (``UNIFORM_FLOOR`` of its votes drawn uniformly over the
pairs) into what the rule asks for: the served comparisons then never depend on the standings
alone, every pair keeps being observed, and the floor votes form a fixed-design uniform slice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, ndtr

from stats.bradley_terry import L2_PENALTY, SCORE_SCALE, fit_pair_points_batch
from stats.errors import StatisticsError
from stats.serving import served_pair_probabilities

RULES = ("uniform", "random", "shrinkage", "information", "thompson", "design")
ADAPTIVE_RULES = ("shrinkage", "information", "thompson", "design")
#: The rule a study set to ``allocation: adaptive`` uses, per target kind: the winner on the tuning
#: half of the seeds of ``benchmarks/bench_adaptive.py`` (the other half is what it reports).
ADAPTIVE_RULE_BY_TARGET = {"top_k": "thompson", "adjacent": "design"}
#: Chunks a ``design`` round is placed in (greedy steps).
DESIGN_STEPS = 32
#: Votes of the next round when the caller does not say, as a share of the votes so far.
DESIGN_ROUND_SHARE = 0.12
#: Share of every adaptive round drawn uniformly over the pairs (docs/protocol.md "Uniform floor").
UNIFORM_FLOOR = 0.25
#: 95 % Wald multiplier for the fixed-design widths a target reads.
Z95 = 1.959963984540054
TARGET_KINDS = ("top_k", "adjacent")


@dataclass(frozen=True)
class Target:
    """What the study wants to know.

    ``top_k``: which k systems are the best (as a set); ``adjacent``: every adjacent pair of the
    fitted order has a 95 % interval of its score difference narrower than ``width_elo`` points.
    """

    kind: str = "top_k"
    k: int = 3
    width_elo: float = 50.0

    def __post_init__(self) -> None:
        if self.kind not in TARGET_KINDS:
            raise StatisticsError(f"target kind must be one of {', '.join(TARGET_KINDS)}, got {self.kind!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise StatisticsError(f"target k must be a positive integer, got {self.k!r}")
        if not (self.width_elo > 0 and math.isfinite(self.width_elo)):
            raise StatisticsError(f"target width_elo must be positive, got {self.width_elo!r}")

    def check_systems(self, n_systems: int) -> None:
        if self.kind == "top_k" and not self.k < n_systems:
            raise StatisticsError(f"target top-{self.k} needs more than {self.k} systems, got {n_systems}")


@dataclass(frozen=True, eq=False)
class PairFit:
    """Bradley–Terry fit of R replicates: θ (R, M), covariance Σ (R, M, M), votes per pair (R, K)."""

    theta: np.ndarray
    covariance: np.ndarray
    votes: np.ndarray

    @property
    def n_systems(self) -> int:
        return int(self.theta.shape[1])


def pair_indices(n_systems: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, second): the systems i < j of every pair, in row-major order."""
    if n_systems < 2:
        raise StatisticsError(f"allocation needs at least 2 systems, got {n_systems}")
    first, second = np.triu_indices(n_systems, 1)
    return first.astype(np.int64), second.astype(np.int64)


def pair_column(i: np.ndarray, j: np.ndarray, n_systems: int) -> np.ndarray:
    """Column of the unordered pair {i, j} (i ≠ j) in row-major pair order."""
    low = np.minimum(i, j)
    high = np.maximum(i, j)
    return low * n_systems - low * (low + 1) // 2 + (high - low - 1)


def fit_pairs(votes: np.ndarray, points_first: np.ndarray, *, l2: float = L2_PENALTY) -> PairFit:
    """Fit every replicate: ``votes[r, k]`` votes on pair k of which ``points_first[r, k]`` points
    (A = 1, TIE = 0.5) went to its first system."""
    n = np.atleast_2d(np.asarray(votes, dtype=np.float64))
    pts = np.atleast_2d(np.asarray(points_first, dtype=np.float64))
    if n.shape != pts.shape:
        raise StatisticsError(f"votes and points must have the same shape, got {n.shape} and {pts.shape}")
    if np.any(pts < -1e-9) or np.any(pts > n + 1e-9):
        raise StatisticsError("points of a pair must lie between 0 and its number of votes")
    theta, info = fit_pair_points_batch(pts, np.maximum(n - pts, 0.0), l2=l2)
    return PairFit(theta=theta, covariance=np.linalg.inv(info), votes=n)


def contrast_variance(cov: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Var(θ_i − θ_j) for index arrays (R, C) -> (R, C)."""
    rows = np.arange(cov.shape[0])[:, None]
    return np.maximum(cov[rows, i, i] + cov[rows, j, j] - 2.0 * cov[rows, i, j], 1e-300)


def target_contrasts(fit: PairFit, target: Target) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The contrasts a target reads in each replicate's fitted order, and how undecided each is.

    Returns (better, worse, weight), each (R, C): top-k reads the k(M−k) pairs across the boundary
    (weight: the probability that the fitted order of the pair is wrong, Φ(−|d| / √v)); adjacent
    reads the M−1 neighbours (weight 1 while the pair's 95 % width exceeds the threshold, 0 after;
    all 1 once every pair is narrow enough).
    """
    m = fit.n_systems
    target.check_systems(m)
    order = np.argsort(-fit.theta, axis=1, kind="stable")
    rows = np.arange(fit.theta.shape[0])[:, None]
    if target.kind == "top_k":
        k = target.k
        better = np.repeat(order[:, :k], m - k, axis=1)
        worse = np.tile(order[:, k:], (1, k))
        d = fit.theta[rows, better] - fit.theta[rows, worse]
        v = contrast_variance(fit.covariance, better, worse)
        weight = ndtr(-np.abs(d) / np.sqrt(v))
    else:
        better, worse = order[:, :-1], order[:, 1:]
        width = adjacent_widths(fit, order=order)
        weight = (width > target.width_elo).astype(np.float64)
        done = ~weight.any(axis=1)
        weight[done] = 1.0
    return better, worse, weight


def adjacent_widths(fit: PairFit, *, order: np.ndarray | None = None) -> np.ndarray:
    """95 % Wald width (Elo points) of every adjacent score difference in the fitted order, (R, M−1)."""
    if order is None:
        order = np.argsort(-fit.theta, axis=1, kind="stable")
    v = contrast_variance(fit.covariance, order[:, :-1], order[:, 1:])
    return 2.0 * Z95 * SCORE_SCALE * np.sqrt(v)


def _vote_information(fit: PairFit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, q): q = σ(d)(1 − σ(d)) of one vote on every pair at the fitted θ, (R, K)."""
    first, second = pair_indices(fit.n_systems)
    s = expit(fit.theta[:, first] - fit.theta[:, second])
    return first, second, s * (1.0 - s)


def _shrinkage_weights(fit: PairFit) -> np.ndarray:
    first, second, q = _vote_information(fit)
    v = contrast_variance(fit.covariance, np.broadcast_to(first, q.shape), np.broadcast_to(second, q.shape))
    after = v - q * v * v / (1.0 + q * v)
    return np.sqrt(v) - np.sqrt(np.maximum(after, 0.0))


def _information_weights(fit: PairFit, target: Target) -> np.ndarray:
    first, second, q = _vote_information(fit)
    cov = fit.covariance
    better, worse, omega = target_contrasts(fit, target)
    # u_e = Σ a_e for every candidate pair e (R, M, K); cᵀ Σ a_e = u_e[better] − u_e[worse].
    u = cov[:, :, first] - cov[:, :, second]
    v_e = u[:, first, np.arange(len(first))] - u[:, second, np.arange(len(first))]
    cu = np.take_along_axis(u, better[:, :, None], axis=1) - np.take_along_axis(u, worse[:, :, None], axis=1)
    v_c = contrast_variance(cov, better, worse)[:, :, None]
    drop = q[:, None, :] * cu * cu / (1.0 + q[:, None, :] * v_e[:, None, :])
    gain = 0.5 * np.log(v_c / np.maximum(v_c - drop, 1e-300 + 1e-12 * v_c))
    return np.einsum("rc,rck->rk", omega, gain)


def adaptive_rule(kind: str) -> str:
    """The rule an adaptive study with a target of ``kind`` uses."""
    if kind not in TARGET_KINDS:
        raise StatisticsError(f"target kind must be one of {', '.join(TARGET_KINDS)}, got {kind!r}")
    return ADAPTIVE_RULE_BY_TARGET[kind]


def rank_one_update(cov: np.ndarray, i: np.ndarray, j: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Σ after adding information h (R,) on θ_i − θ_j (i, j: (R,)) to every replicate, by
    Sherman–Morrison: (Σ⁻¹ + h a aᵀ)⁻¹ = Σ − h Σa aᵀΣ / (1 + h aᵀΣa), a = e_i − e_j. (R, M, M)."""
    rows = np.arange(cov.shape[0])
    u = cov[rows, :, i] - cov[rows, :, j]
    v = u[rows, i] - u[rows, j]
    scale = h / (1.0 + h * v)
    return cov - scale[:, None, None] * u[:, :, None] * u[:, None, :]


def _design_contrasts(
    fit: PairFit, target: Target, rng: np.random.Generator, draws: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The contrasts ``design`` reads, (R, C) each: (better, worse, weight).

    Top-k: the boundary contrasts of the fitted order, weighted 1. Adjacent: which pairs are
    adjacent is itself uncertain (close systems swap places), so the pairs adjacent in ``draws``
    posterior draws θ̃ ~ N(θ̂, Σ), weighted by how often each is adjacent, the 2(M − 1) most frequent.
    """
    m = fit.n_systems
    if target.kind == "top_k":
        better, worse, _ = target_contrasts(fit, target)
        return better, worse, np.ones(better.shape)
    n_rep, k_pairs = fit.votes.shape
    chol = np.linalg.cholesky(fit.covariance + 1e-12 * np.eye(m))
    sampled = fit.theta[:, None, :] + np.einsum("rij,rdj->rdi", chol, rng.standard_normal((n_rep, draws, m)))
    order = np.argsort(-sampled, axis=2, kind="stable")
    columns = pair_column(order[:, :, :-1], order[:, :, 1:], m)
    freq = np.zeros((n_rep, k_pairs))
    np.add.at(freq, (np.arange(n_rep)[:, None, None], columns), 1.0 / draws)
    keep = np.argsort(-freq, axis=1, kind="stable")[:, : min(k_pairs, 2 * (m - 1))]
    first, second = pair_indices(m)
    return first[keep], second[keep], np.take_along_axis(freq, keep, axis=1)


def _design_weights(
    fit: PairFit,
    target: Target,
    rng: np.random.Generator,
    draws: int,
    n_votes: np.ndarray | None,
    floor: float,
) -> np.ndarray:
    m = fit.n_systems
    target.check_systems(m)
    n_rep, k_pairs = fit.votes.shape
    first, second, q = _vote_information(fit)
    better, worse, omega = _design_contrasts(fit, target, rng, draws)
    # Top-k: lower the boundary contrasts' whole variance; adjacent: down to the threshold's.
    v_star = (target.width_elo / (2.0 * Z95 * SCORE_SCALE)) ** 2 if target.kind == "adjacent" else 0.0
    budget = (
        DESIGN_ROUND_SHARE * fit.votes.sum(axis=1)
        if n_votes is None
        else np.asarray(n_votes, dtype=np.float64)
    )
    budget = np.broadcast_to(np.maximum(budget, 1.0), (n_rep,))
    # The round's uniform floor first: its information, the graph Laplacian of floor × budget / K × q.
    rows = np.arange(n_rep)
    lap = np.zeros((n_rep, m, m))
    np.add.at(lap, (rows[:, None], first, second), -floor * budget[:, None] / k_pairs * q)
    lap = lap + np.swapaxes(lap, 1, 2)
    lap[:, np.arange(m), np.arange(m)] = -lap.sum(axis=2)
    cov = np.linalg.inv(np.linalg.inv(fit.covariance) + lap)
    h = (1.0 - floor) * budget[:, None] / DESIGN_STEPS * q
    counts = np.zeros((n_rep, k_pairs))
    for _ in range(DESIGN_STEPS):
        w = np.take_along_axis(cov, better[:, :, None], axis=1) - np.take_along_axis(
            cov, worse[:, :, None], axis=1
        )
        cu = w[:, :, first] - w[:, :, second]  # cᵀ Σ a_e, (R, C, K)
        v_c = (
            np.take_along_axis(w, better[:, :, None], axis=2)[:, :, 0]
            - np.take_along_axis(w, worse[:, :, None], axis=2)[:, :, 0]
        )
        v_e = contrast_variance(cov, np.broadcast_to(first, q.shape), np.broadcast_to(second, q.shape))
        drop = h[:, None, :] * cu * cu / (1.0 + h[:, None, :] * v_e[:, None, :])
        excess = np.maximum(v_c - v_star, 0.0)
        excess = np.where(
            (excess * omega).any(axis=1, keepdims=True), excess, v_c
        )  # all narrow: keep them so
        gain = np.einsum("rc,rck->rk", omega, np.minimum(drop, excess[:, :, None]))
        best = np.argmax(gain, axis=1)
        counts[rows, best] += 1.0
        cov = rank_one_update(cov, first[best], second[best], h[rows, best])
    return counts


def _thompson_weights(fit: PairFit, target: Target, rng: np.random.Generator, draws: int) -> np.ndarray:
    m = fit.n_systems
    target.check_systems(m)
    n_rep = fit.theta.shape[0]
    chol = np.linalg.cholesky(fit.covariance + 1e-12 * np.eye(m))
    z = rng.standard_normal((n_rep, draws, m))
    sampled = fit.theta[:, None, :] + np.einsum("rij,rdj->rdi", chol, z)
    order = np.argsort(-sampled, axis=2, kind="stable")
    if target.kind == "top_k":
        position = np.full((n_rep, draws), target.k - 1)
    else:
        # A random adjacent position among those still too wide in the current fit.
        wide = target_contrasts(fit, target)[2]
        cumulative = np.cumsum(wide / wide.sum(axis=1, keepdims=True), axis=1)
        u = rng.random((n_rep, draws))
        position = np.minimum((u[:, :, None] > cumulative[:, None, :]).sum(axis=2), m - 2)
    i = np.take_along_axis(order, position[:, :, None], axis=2)[:, :, 0]
    j = np.take_along_axis(order, position[:, :, None] + 1, axis=2)[:, :, 0]
    columns = pair_column(i, j, m)
    k_pairs = m * (m - 1) // 2
    counts = np.zeros((n_rep, k_pairs))
    np.add.at(counts, (np.repeat(np.arange(n_rep), draws), columns.ravel()), 1.0)
    return counts


def allocation_weights(
    rule: str,
    fit: PairFit,
    target: Target,
    *,
    rng: np.random.Generator,
    draws: int = 256,
    n_votes: np.ndarray | int | None = None,
    floor: float = UNIFORM_FLOOR,
) -> np.ndarray:
    """Share of the next votes per pair under ``rule``, (R, K), each row summing to 1.

    ``uniform`` and ``random`` return equal shares (the balanced design is ``balanced_counts``).
    ``n_votes`` (the next round's votes; default ``DESIGN_ROUND_SHARE`` of the votes so far) and
    ``floor`` (its uniform share) are read by ``design`` only.
    """
    if rule not in RULES:
        raise StatisticsError(f"allocation rule must be one of {', '.join(RULES)}, got {rule!r}")
    n_rep, k_pairs = fit.votes.shape
    if rule in ("uniform", "random"):
        return np.full((n_rep, k_pairs), 1.0 / k_pairs)
    if rule == "shrinkage":
        w = _shrinkage_weights(fit)
    elif rule == "information":
        w = _information_weights(fit, target)
    elif rule == "design":
        w = _design_weights(
            fit, target, rng, min(draws, 64), None if n_votes is None else np.asarray(n_votes), floor
        )
    else:
        w = _thompson_weights(fit, target, rng, draws)
    w = np.where(np.isfinite(w) & (w > 0), w, 0.0)
    total = w.sum(axis=1, keepdims=True)
    flat = np.full_like(w, 1.0 / k_pairs)
    return np.where(total > 0, w / np.where(total > 0, total, 1.0), flat)


def balanced_counts(total: int, order: np.ndarray) -> np.ndarray:
    """Votes per pair after ``total`` votes of the fixed design: equal ±1, the first ``total mod K``
    pairs of ``order`` (one permutation of the K pairs per replicate, (R, K)) one more."""
    n_rep, k_pairs = order.shape
    counts = np.full((n_rep, k_pairs), total // k_pairs, dtype=np.int64)
    extra = total % k_pairs
    if extra:
        rows = np.repeat(np.arange(n_rep), extra)
        counts[rows, order[:, :extra].ravel()] += 1
    return counts


def round_counts(
    n_votes: int, weights: np.ndarray, *, floor: float = UNIFORM_FLOOR, rng: np.random.Generator
) -> np.ndarray:
    """Votes per pair for one round of ``n_votes`` per replicate: ``ceil(floor × n)`` drawn uniformly
    over the pairs, the rest from ``weights`` (R, K) (multinomial draws)."""
    if not 0.0 <= floor <= 1.0:
        raise StatisticsError(f"floor must lie in [0, 1], got {floor!r}")
    if n_votes < 0:
        raise StatisticsError(f"n_votes must be non-negative, got {n_votes!r}")
    n_rep, k_pairs = weights.shape
    n_floor = min(n_votes, math.ceil(floor * n_votes))
    uniform = rng.multinomial(n_floor, np.full(k_pairs, 1.0 / k_pairs), size=n_rep)
    adaptive = rng.multinomial(n_votes - n_floor, weights)
    return uniform + adaptive


def draw_from_pairs(
    counts: np.ndarray, by_pair: dict[int, list], pool: list, size: int, *, rng: np.random.Generator
) -> list:
    """Pick ``size`` items of ``pool`` for one round: ``counts[k]`` of pair k's items (``by_pair[k]``,
    in a fixed order) drawn without replacement, and whatever a pair lacks drawn uniformly from
    the rest of ``pool`` (also in a fixed order), so the round is always full while the pool lasts.
    Items are hashable and distinct (comparisons, or their ids)."""
    chosen: list = []
    for column in np.flatnonzero(counts):
        available = by_pair.get(int(column), [])
        take = min(int(counts[column]), len(available))
        for i in sorted(rng.choice(len(available), size=take, replace=False)) if take else []:
            chosen.append(available[int(i)])
    if len(chosen) < size:
        taken = set(chosen)
        rest = [item for item in pool if item not in taken]
        extra = rng.choice(len(rest), size=min(size - len(chosen), len(rest)), replace=False)
        chosen.extend(rest[int(i)] for i in sorted(extra))
    return chosen


#: After the uniform start, each round of a judge budget spends this share of what was spent so far
#: (at least the start's size), so the fit is read often while it moves fast and seldom later.
BUDGET_ROUND_GROWTH = 0.12


def budget_rounds(start: int, budget: int, *, growth: float = BUDGET_ROUND_GROWTH) -> list[int]:
    """Cumulative units (comparisons, or calls) at the end of every round of a budget: ``start``
    first, then rounds of ``max(start, ceil(growth × spent))`` until ``budget``."""
    if start < 1 or budget < start:
        raise StatisticsError(f"a budget of {budget} is below the uniform start of {start}")
    grid = [start]
    while grid[-1] < budget:
        grid.append(min(budget, grid[-1] + max(start, math.ceil(growth * grid[-1]))))
    return grid


@dataclass(frozen=True)
class ServedPair:
    """The pair chosen for one trial at serve time and the probability it was chosen with (what the
    weighted fit of ``stats.adaptive_estimation`` reads), plus every pair's probability."""

    column: int
    probability: float
    probabilities: np.ndarray


def serve_time_choice(
    rule: str,
    fit: PairFit,
    target: Target,
    *,
    rng: np.random.Generator,
    available: np.ndarray | None = None,
    floor: float = UNIFORM_FLOOR,
) -> ServedPair:
    """Choose the pair of the next trial when a rater asks for it (issue 39: adapting at the speed
    raters answer), from the fit of the votes stored so far (one replicate, R = 1).

    Every pair's probability is ``floor / K' + (1 − floor) w_k`` over the K' pairs ``available``
    (those with a comparison this rater may still be served; all when None), w the rule's shares
    renormalised over them, so the floor's share holds for every trial and each served trial's
    probability is known exactly. Raises when no pair is available.
    """
    if not 0.0 <= floor <= 1.0:
        raise StatisticsError(f"floor must lie in [0, 1], got {floor!r}")
    if fit.theta.shape[0] != 1:
        raise StatisticsError(f"serve-time choice reads one study's fit, got {fit.theta.shape[0]} replicates")
    k_pairs = fit.votes.shape[1]
    mask = np.ones(k_pairs, dtype=bool) if available is None else np.asarray(available, dtype=bool)
    if mask.shape != (k_pairs,):
        raise StatisticsError(f"available must hold one flag per pair ({k_pairs}), got shape {mask.shape}")
    if not mask.any():
        raise StatisticsError("no pair has a comparison left to serve")
    shares = allocation_weights(rule, fit, target, rng=rng, n_votes=1, floor=floor)[0]
    chosen = served_pair_probabilities(shares.tolist(), floor, [int(c) for c in np.flatnonzero(mask)])
    probabilities = np.zeros(k_pairs)
    probabilities[list(chosen)] = list(chosen.values())
    probabilities /= probabilities.sum()
    column = int(rng.choice(k_pairs, p=probabilities))
    return ServedPair(column=column, probability=float(probabilities[column]), probabilities=probabilities)
