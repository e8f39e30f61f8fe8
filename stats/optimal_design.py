"""The oracle design for adjacent separation (docs/protocol.md "Adaptive allocation and stopping",
"How far below uniform the adjacent target can go").

Pure module: numpy/scipy in, a frozen dataclass out, no Django, no project app.

Given the TRUE strengths θ (M systems, so no estimation error), which shares w of the votes over
the K = M(M−1)/2 pairs (row-major ``np.triu_indices(M, 1)`` order, as in ``stats.allocation``)
need the fewest votes N until every adjacent score difference of the true order has variance at
most v*? The information of N votes is that of the project's Bradley–Terry fit (the negative
Hessian of ``stats.bradley_terry.fit_pair_points_batch``; a TIE counts half a point either way and
does not change it): ``N · L(w)``, ``L(w) = Σ_k w_k q_k b_k b_kᵀ``, ``b_k = e_i − e_j``,
``q_k = σ(θ_i − θ_j)(1 − σ(θ_i − θ_j))`` (``stats.allocation._vote_information``); the 10⁻³ penalty
is left out (it vanishes against N). The variance of the i-th adjacent contrast c_i is
``c_iᵀ L(w)⁺ c_i / N``, so the votes needed are ``max_i c_iᵀ L(w)⁺ c_i / v*`` and the best design
solves the convex minimax (MV-optimal) problem

    minimise over w in the simplex   F(w) = max_i f_i(w),   f_i(w) = c_iᵀ L(w)⁺ c_i,

f_i convex in w (a matrix-fractional function of a linear map). The ratio of the votes of the
optimum to those of the uniform design u is then ``F(w*) / F(u)``, whatever v*: the asymptotic
ratio that no allocation rule can beat with the same information (an adaptive rule ends with
*some* shares w̄ and the information N · L(w̄), and has to estimate θ on the way).

``floor`` constrains the design as the protocol constrains every adaptive round: w = floor · u +
(1 − floor) · w′, w′ in the simplex (docs/protocol.md "Uniform floor").

Solved in epigraph form, minimise t subject to t ≥ f_i(w), with SLSQP (exact gradients
∂f_i/∂w_k = −q_k (b_kᵀ L⁺ c_i)²). Certified by the dual: for contrast weights λ in the simplex,
φ_λ = Σ_i λ_i f_i is convex and homogeneous of degree −1 in w, and with d_k = q_k Σ_i λ_i
(b_kᵀ L(w)⁺ c_i)² (the negative gradient) every feasible w″ has φ_λ(w″) ≥ φ_λ(w)² / A with
A = floor · mean_k d_k + (1 − floor) · max_k d_k (convexity along s·w″, best s = φ_λ / A). So
``lower_bound`` ≤ F(w*) ≤ ``worst_variance``; λ is chosen by a linear programme maximising the
weaker bound 2 φ_λ − A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize
from scipy.special import expit

from stats.errors import StatisticsError


@dataclass(frozen=True, eq=False)
class OracleDesign:
    """The minimax design for the adjacent contrasts of one θ.

    ``shares`` (K,): the optimal w; ``worst_variance``: F(w) = max_i c_iᵀ L(w)⁺ c_i per vote;
    ``uniform_worst_variance``: F(u); ``lower_bound``: the dual certificate (≤ F(w*));
    ``contrast_weights`` (M − 1,): λ of the certificate (on the binding contrasts);
    ``better``, ``worse`` (M − 1,): the adjacent pairs of the true order, best first.
    """

    shares: np.ndarray
    worst_variance: float
    uniform_worst_variance: float
    lower_bound: float
    contrast_weights: np.ndarray
    better: np.ndarray
    worse: np.ndarray
    floor: float

    @property
    def ratio(self) -> float:
        """Votes of the oracle design / votes of the uniform design for the same adjacent target."""
        return self.worst_variance / self.uniform_worst_variance

    @property
    def ratio_lower_bound(self) -> float:
        """No design (with this floor) needs fewer than this share of uniform's votes."""
        return self.lower_bound / self.uniform_worst_variance


def pair_information(theta: np.ndarray) -> np.ndarray:
    """q_k = σ(θ_i − θ_j)(1 − σ(θ_i − θ_j)) of one vote on every pair i < j, (K,)."""
    t = np.asarray(theta, dtype=np.float64)
    first, second = np.triu_indices(len(t), 1)
    s = expit(t[first] - t[second])
    return s * (1.0 - s)


def design_information(shares: np.ndarray, q: np.ndarray, n_systems: int) -> np.ndarray:
    """L(w) = Σ_k w_k q_k b_k b_kᵀ, (M, M): the graph Laplacian with conductances w_k q_k."""
    first, second = np.triu_indices(n_systems, 1)
    conductance = np.asarray(shares, dtype=np.float64) * q
    lap = np.zeros((n_systems, n_systems))
    lap[first, second] = -conductance
    lap[second, first] = -conductance
    lap[np.arange(n_systems), np.arange(n_systems)] = -lap.sum(axis=1)
    return lap


def laplacian_pinv(lap: np.ndarray) -> np.ndarray:
    """L⁺ of a connected graph Laplacian: (L + 11ᵀ/M)⁻¹ − 11ᵀ/M (1 spans the null space)."""
    m = lap.shape[0]
    j = np.full((m, m), 1.0 / m)
    return np.linalg.inv(lap + j) - j


def adjacent_contrasts(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(better, worse): the M − 1 neighbours of the order of θ, best first."""
    order = np.argsort(-np.asarray(theta, dtype=np.float64), kind="stable")
    return order[:-1], order[1:]


def contrast_variances(
    shares: np.ndarray, q: np.ndarray, better: np.ndarray, worse: np.ndarray
) -> np.ndarray:
    """c_iᵀ L(w)⁺ c_i per vote for every contrast θ_better − θ_worse; inf if w leaves the graph
    of informative pairs disconnected."""
    m = _systems(len(q))
    lap = design_information(shares, q, m)
    if np.linalg.eigvalsh(lap)[1] <= 1e-12 * max(1.0, float(np.abs(lap).max())):
        return np.full(len(better), math.inf)
    s = laplacian_pinv(lap)
    return s[better, better] + s[worse, worse] - 2.0 * s[better, worse]


def _systems(k_pairs: int) -> int:
    m = round((1 + math.sqrt(1 + 8 * k_pairs)) / 2)
    if m * (m - 1) // 2 != k_pairs or m < 2:
        raise StatisticsError(f"{k_pairs} pairs is not M(M-1)/2 for any M >= 2")
    return m


def _variances_and_gradient(
    shares: np.ndarray, q: np.ndarray, better: np.ndarray, worse: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """(f (C,), G (C, K)) with G[i, k] = q_k (b_kᵀ L⁺ c_i)² = −∂f_i/∂w_k."""
    first, second = np.triu_indices(m, 1)
    s = laplacian_pinv(design_information(shares, q, m))
    sc = s[:, better] - s[:, worse]  # L⁺ c_i, (M, C)
    f = sc[better, np.arange(len(better))] - sc[worse, np.arange(len(better))]
    proj = sc[first, :] - sc[second, :]  # b_kᵀ L⁺ c_i, (K, C)
    return f, (q[:, None] * proj * proj).T


def _certificate(f: np.ndarray, g: np.ndarray, floor: float) -> tuple[float, np.ndarray]:
    """The dual lower bound φ_λ² / A at the current design and its λ (see the module docstring)."""
    n_c, k_pairs = g.shape
    # Variables (λ_1..λ_C, s): maximise Σ λ_i 2 f_i − floor · mean_k (Gᵀλ)_k − (1 − floor) s
    # subject to (Gᵀλ)_k ≤ s, Σ λ = 1, λ ≥ 0.
    scale = float(f.max())
    cost = np.concatenate([-(2.0 * f - floor * g.mean(axis=1)) / scale, [(1.0 - floor) / scale]])
    a_ub = np.hstack([g.T / scale, -np.ones((k_pairs, 1)) / scale])
    result = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(k_pairs),
        A_eq=np.concatenate([np.ones(n_c), [0.0]])[None, :],
        b_eq=[1.0],
        bounds=[(0.0, None)] * n_c + [(None, None)],
        method="highs",
    )
    if not result.success:
        raise StatisticsError(f"the dual certificate's linear programme failed: {result.message}")
    lam = np.maximum(result.x[:n_c], 0.0)
    lam /= lam.sum()
    d = g.T @ lam
    phi = float(lam @ f)
    a = floor * float(d.mean()) + (1.0 - floor) * float(d.max())
    return phi * phi / a, lam


#: Pairs the first solve may use: at most this far apart in the true order (more if the certificate
#: says the optimum needs them).
START_DISTANCE = 4


def adjacent_oracle_design(
    theta: np.ndarray, *, floor: float = 0.0, gap: float = 1e-4, max_iterations: int = 1000
) -> OracleDesign:
    """The minimax design for the adjacent contrasts of the order of the true ``theta`` (logit
    scale, (M,)), with a uniform ``floor`` share; certified by its dual lower bound.

    The design is solved on the pairs at most D apart in the true order (D = ``START_DISTANCE``
    first: far pairs carry little information, q small, and go through many steps), then the
    certificate is computed over *all* pairs; while the relative gap between the design and the
    certificate exceeds ``gap``, D is doubled (the last round is the full problem).
    """
    t = np.asarray(theta, dtype=np.float64)
    if t.ndim != 1 or len(t) < 2 or not np.all(np.isfinite(t)):
        raise StatisticsError(f"theta must be a finite vector of at least 2 strengths, got shape {t.shape}")
    if not 0.0 <= floor < 1.0:
        raise StatisticsError(f"floor must lie in [0, 1), got {floor!r}")
    m = len(t)
    k_pairs = m * (m - 1) // 2
    q = pair_information(t)
    better, worse = adjacent_contrasts(t)
    uniform = np.full(k_pairs, 1.0 / k_pairs)
    f_uniform, _ = _variances_and_gradient(uniform, q, better, worse, m)
    rank = np.empty(m, dtype=np.int64)
    rank[better] = np.arange(m - 1)
    rank[worse[-1]] = m - 1
    first, second = np.triu_indices(m, 1)
    distance = np.abs(rank[first] - rank[second])
    reach = START_DISTANCE
    while True:
        support = np.flatnonzero(distance <= reach)
        shares = _solve_on(support, q, better, worse, m, floor, max_iterations)
        f, g = _variances_and_gradient(shares, q, better, worse, m)
        if float(f.max()) > float(f_uniform.max()):  # never report worse than uniform
            shares, f = uniform, f_uniform
            g = _variances_and_gradient(uniform, q, better, worse, m)[1]
        lower, lam = _certificate(f, g, floor)
        if float(f.max()) - lower <= gap * float(f.max()) or reach >= m - 1:
            break
        reach *= 2
    return OracleDesign(
        shares=shares,
        worst_variance=float(f.max()),
        uniform_worst_variance=float(f_uniform.max()),
        lower_bound=min(lower, float(f.max())),
        contrast_weights=lam,
        better=better,
        worse=worse,
        floor=floor,
    )


def _solve_on(
    support: np.ndarray,
    q: np.ndarray,
    better: np.ndarray,
    worse: np.ndarray,
    m: int,
    floor: float,
    max_iterations: int,
    ftol: float = 1e-12,
) -> np.ndarray:
    """SLSQP on the epigraph form, w′ nonzero on ``support`` only; the full shares (K,)."""
    k_pairs = len(q)
    n = len(support)
    uniform = np.full(k_pairs, 1.0 / k_pairs)

    def shares_of(x: np.ndarray) -> np.ndarray:
        w = floor * uniform
        w[support] += (1.0 - floor) * np.maximum(x[:n], 0.0)
        return w

    # Scaled so that t starts at 1: SLSQP's tolerances are absolute.
    x0 = np.concatenate([np.full(n, 1.0 / n), [1.0]])
    scale = float(_variances_and_gradient(shares_of(x0), q, better, worse, m)[0].max())

    def constraint(x: np.ndarray) -> np.ndarray:
        f, _ = _variances_and_gradient(shares_of(x), q, better, worse, m)
        return x[n] - f / scale

    def constraint_jacobian(x: np.ndarray) -> np.ndarray:
        _, g = _variances_and_gradient(shares_of(x), q, better, worse, m)
        return np.hstack([(1.0 - floor) * g[:, support] / scale, np.ones((len(better), 1))])

    objective_gradient = np.concatenate([np.zeros(n), [1.0]])
    sum_gradient = np.concatenate([np.ones(n), [0.0]])
    # Without a floor a share may reach 0 but the graph must stay connected: a tiny lower bound
    # keeps L(w) invertible on the way.
    low = 0.0 if floor > 0 else 1e-9
    result = minimize(
        lambda x: x[n],
        x0,
        jac=lambda x: objective_gradient,
        method="SLSQP",
        bounds=[(low, 1.0)] * n + [(0.0, None)],
        constraints=[
            {"type": "ineq", "fun": constraint, "jac": constraint_jacobian},
            {"type": "eq", "fun": lambda x: x[:n].sum() - 1.0, "jac": lambda x: sum_gradient},
        ],
        options={"ftol": ftol, "maxiter": max_iterations},
    )
    x = np.maximum(result.x[:n], 0.0)
    x[:] = x / x.sum()
    return shares_of(np.concatenate([x, [0.0]]))
