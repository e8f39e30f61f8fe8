"""Bradley–Terry leaderboard maths (docs/protocol.md "Deployment leaderboard" (Soft preference),
"Bradley–Terry", "Uncertainty").

Pure module: numpy/scipy in, frozen dataclasses out, no Django, no project app (it uses only the
pure ``stats.bootstrap`` module for the shared page-block resampling).

Objective (docs/protocol.md "Deployment leaderboard"), with fractional outcomes ``p_i`` (the outcome for the
canonical A):

    maximize  Σ_i w_i [p_i log σ(θ_a − θ_b) + (1 − p_i) log σ(θ_b − θ_a)] − λ Σ_m θ_m²,  λ = 10⁻³

It is strictly concave (the penalty makes the negative Hessian positive definite), so the optimum
is unique; we find it with damped Newton steps on the exact M×M Hessian until the gradient norm is
below 10⁻¹⁰. The reported score is ``400 θ / ln 10`` (Elo points) of the centered optimum
(mean θ = 0; at the optimum the likelihood gradient sums to zero, so the penalty already centres
it and the explicit centring only removes rounding).

Only the *points matrix* enters the objective: ``P[i, j]`` = weighted preference points of system
``i`` against system ``j`` (p as A, 1 − p as B), so that the objective is
``Σ_{i≠j} P[i, j] log σ(θ_i − θ_j) − λ‖θ‖²``; internally it is kept in *pair form* (for each pair
i < j: the points of i against j and of j against i).

Bootstrap (docs/protocol.md "Deployment leaderboard" (Uncertainty): page-block resampling, refit each time).
Per unit (page) and ordered pair we keep the sufficient statistics (count, Σ p̂) in points form, a linear
function of them; with the shared count matrix ``W`` of ``stats.bootstrap.bootstrap_page_blocks`` a
resample's statistics are one sparse product, and all resamples are refitted together by a batched
Newton iteration (batched ``np.linalg.solve`` on (R, M, M)). Chunking: ``chunk=(start, stop)``
refits rows ``start..stop`` of the *same* W (drawn from ``(units, resamples, seed)``), and every
resample's iterates depend only on its own row (fixed-order sums, converged rows frozen), so
chunks merged with :func:`merge_bootstrap_results` equal one run bit for bit.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.special import expit

from stats.bootstrap import BootstrapUnits, bootstrap_page_blocks, percentile_interval
from stats.errors import StatisticsError

L2_PENALTY = 1e-3  # docs/protocol.md "Deployment leaderboard"
SCORE_SCALE = 400.0 / math.log(10.0)  # docs/protocol.md "Deployment leaderboard": score = 400 θ / ln 10
GRADIENT_TOLERANCE = 1e-10
MAX_NEWTON_ITERATIONS = 200
# Ranks treat thetas whose sorted neighbours differ by at most this much as tied (then the lower
# system index wins), so that rounding noise never decides between two systems whose data are
# symmetric. A tolerance on differences, not rounding to 9 decimals: two equal values on a
# rounding half-point (1.5e-9) would be split by 1e-14 of noise (issue 29, item 4).
RANK_TOLERANCE = 1e-9
# Memory bound for the batched Newton iteration: about this many float64 per (R, M, M) array.
_BATCH_ELEMENTS = 2_000_000


@dataclass(frozen=True, eq=False)
class BradleyTerryFit:
    """A fitted Bradley–Terry model (docs/protocol.md "Deployment leaderboard").

    ``theta`` is centered (mean 0); ``scores = 400 θ / ln 10``; ``ranks[m]`` is system ``m``'s rank
    (1 = best; θ tied within ``RANK_TOLERANCE`` (:func:`tie_grouped_theta`) is broken by the lower
    system index).
    """

    theta: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray
    iterations: int
    gradient_norm: float
    log_likelihood: float


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Page-block bootstrap of the Bradley–Terry fit (docs/protocol.md "Deployment leaderboard"
    (Uncertainty)).

    ``scores`` and ``ranks`` hold one row per resample (rows ``start..stop`` of the count matrix
    drawn by ``bootstrap_page_blocks(units, resamples=resamples, seed=seed)``), so chunk results can
    be merged with :func:`merge_bootstrap_results`. ``ci95`` and ``rank_ci95`` have shape (M, 2):
    ``[low, high]`` per system. ``rank1_share[m]`` is the share of resamples where ``m`` ranks first.
    """

    resamples: int
    seed: int
    start: int
    stop: int
    scores: np.ndarray
    ranks: np.ndarray
    ci95: np.ndarray
    rank_ci95: np.ndarray
    rank1_share: np.ndarray
    max_iterations: int
    max_gradient_norm: float

    @property
    def n_resamples(self) -> int:
        """Resamples in this result (``stop - start``)."""
        return self.stop - self.start


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Run the batched small solves on one BLAS thread.

    numpy solves a (R, M, M) batch one matrix at a time; BLAS threads inside each M×M solve only
    contend (several times slower on a busy 2-core machine). threadpoolctl is optional.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# --------------------------------------------------------------------------- validation


def _validate(
    a: np.ndarray,
    b: np.ndarray,
    p: np.ndarray,
    n_systems: int,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(n_systems, bool) or not isinstance(n_systems, int | np.integer) or n_systems < 1:
        raise StatisticsError(f"n_systems must be a positive integer, got {n_systems!r}")
    a_arr = np.asarray(a)
    b_arr = np.asarray(b)
    p_arr = np.asarray(p, dtype=np.float64)
    if a_arr.ndim != 1 or b_arr.ndim != 1 or p_arr.ndim != 1:
        raise StatisticsError("a, b and p must be one-dimensional arrays")
    if not (len(a_arr) == len(b_arr) == len(p_arr)):
        raise StatisticsError(
            f"a, b and p must have the same length, got {len(a_arr)}, {len(b_arr)}, {len(p_arr)}"
        )
    for name, arr in (("a", a_arr), ("b", b_arr)):
        if (
            len(arr)
            and not np.issubdtype(arr.dtype, np.integer)
            and (not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)))
        ):
            raise StatisticsError(f"{name} must hold integer system indices")
        if len(arr) and (arr.min() < 0 or arr.max() >= n_systems):
            raise StatisticsError(f"{name} must hold system indices in [0, {n_systems - 1}]")
    a_arr = a_arr.astype(np.int64)
    b_arr = b_arr.astype(np.int64)
    if np.any(a_arr == b_arr):
        i = int(np.flatnonzero(a_arr == b_arr)[0])
        raise StatisticsError(f"comparison {i} compares system {int(a_arr[i])} with itself")
    if not np.all(np.isfinite(p_arr)) or np.any((p_arr < 0) | (p_arr > 1)):
        raise StatisticsError("p must hold outcomes in [0, 1]")
    if weights is None:
        w_arr = np.ones(len(p_arr))
    else:
        w_arr = np.asarray(weights, dtype=np.float64)
        if w_arr.shape != p_arr.shape:
            raise StatisticsError(f"weights must have shape {p_arr.shape}, got {w_arr.shape}")
        if not np.all(np.isfinite(w_arr)) or np.any(w_arr < 0):
            raise StatisticsError("weights must be finite and non-negative")
    return a_arr, b_arr, p_arr, w_arr


# --------------------------------------------------------------------------- core maths


def points_matrix(
    a: np.ndarray, b: np.ndarray, p: np.ndarray, n_systems: int, *, weights: np.ndarray | None = None
) -> np.ndarray:
    """``P[i, j]``: weighted preference points of ``i`` against ``j`` (p as A, 1 − p as B)."""
    a_arr, b_arr, p_arr, w_arr = _validate(a, b, p, n_systems, weights)
    m = int(n_systems)
    flat = np.bincount(a_arr * m + b_arr, weights=w_arr * p_arr, minlength=m * m)
    flat += np.bincount(b_arr * m + a_arr, weights=w_arr * (1.0 - p_arr), minlength=m * m)
    return flat.reshape(m, m)


@dataclass(frozen=True, eq=False)
class _Pairs:
    """The unordered pairs (i < j) in row-major order: the K = M(M−1)/2 columns of pair form.

    ``first``/``second``: i and j of each pair; ``first_starts``: where each i's run of pairs starts
    (they are contiguous); ``by_second`` orders the pairs by j, ``second_starts`` where each j's run
    starts in that order. Sums over a system's pairs are then ``np.add.reduceat`` calls, which add
    in a fixed order (results do not depend on the batch size).
    """

    m: int
    first: np.ndarray
    second: np.ndarray
    first_starts: np.ndarray
    by_second: np.ndarray
    second_starts: np.ndarray
    flat_upper: np.ndarray

    @classmethod
    def of(cls, m: int) -> _Pairs:
        first, second = np.triu_indices(m, 1)
        by_second = np.argsort(second, kind="stable")
        # Runs exist for i = 0..M−2 (as first) and j = 1..M−1 (as second).
        first_starts = np.searchsorted(first, np.arange(m - 1))
        second_starts = np.searchsorted(second[by_second], np.arange(1, m))
        return cls(m, first, second, first_starts, by_second, second_starts, first * m + second)

    def sum_by_system(self, as_first: np.ndarray, as_second: np.ndarray) -> np.ndarray:
        """(R, M): Σ over pairs (m, ·) of ``as_first`` plus Σ over pairs (·, m) of ``as_second``."""
        out = np.zeros((as_first.shape[0], self.m))
        if self.m < 2:
            return out
        out[:, :-1] += np.add.reduceat(as_first, self.first_starts, axis=1)
        out[:, 1:] += np.add.reduceat(as_second[:, self.by_second], self.second_starts, axis=1)
        return out


def _objective(
    upper: np.ndarray, lower: np.ndarray, theta: np.ndarray, pairs: _Pairs, l2: float
) -> np.ndarray:
    """docs/protocol.md "Deployment leaderboard" objective for a batch in pair form -> (R,).

    ``upper[r, k]``/``lower[r, k]``: points of i against j / of j against i for pair k = (i, j);
    P_ij log σ(d) + P_ji log σ(−d) = N log σ(d) − P_ji d with d = θ_i − θ_j and N = P_ij + P_ji.
    """
    diff = theta[:, pairs.first] - theta[:, pairs.second]
    log_sigma = -np.logaddexp(0.0, -diff)
    return (
        np.einsum("rk,rk->r", upper + lower, log_sigma)
        - np.einsum("rk,rk->r", lower, diff)
        - l2 * np.einsum("rm,rm->r", theta, theta)
    )


def _gradient_and_system(
    upper: np.ndarray, totals: np.ndarray, theta: np.ndarray, pairs: _Pairs, l2: float
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient g (R, M) and the positive definite negative Hessian (R, M, M) of the objective.

    g_k = Σ_j (P_kj − N_kj σ(θ_k − θ_j)) − 2λθ_k; −H = Laplacian of A_kj = N_kj σ(1 − σ), plus 2λ I.
    """
    n_batch, m = theta.shape
    sig = expit(theta[:, pairs.first] - theta[:, pairs.second])
    residual = upper - totals * sig  # the pair's term in g_i; −residual in g_j
    curvature = totals * sig * (1.0 - sig)
    gradient = pairs.sum_by_system(residual, -residual) - 2.0 * l2 * theta
    half = np.zeros((n_batch, m * m))
    half[:, pairs.flat_upper] = -curvature
    half = half.reshape(n_batch, m, m)
    neg_hessian = half + half.transpose(0, 2, 1)
    diag = np.arange(m)
    neg_hessian[:, diag, diag] = pairs.sum_by_system(curvature, curvature) + 2.0 * l2
    return gradient, neg_hessian


def _newton_batch(
    upper: np.ndarray, lower: np.ndarray, m: int, l2: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximize the docs/protocol.md "Deployment leaderboard" objective for every resample of a batch given in
    pair form (R, K).

    Damped Newton (Armijo backtracking) from θ = 0. Each resample's iterates depend only on its own
    row (converged resamples are frozen), so the result does not depend on the batch it is in.
    Returns centered theta (R, M), iterations (R,), final gradient norm (R,).
    """
    pairs = _Pairs.of(m)
    n_batch = upper.shape[0]
    totals = upper + lower
    theta = np.zeros((n_batch, m))
    iterations = np.zeros(n_batch, dtype=np.int64)
    grad_norm = np.full(n_batch, np.inf)
    value = _objective(upper, lower, theta, pairs, l2)  # objective at the current θ
    active = np.arange(n_batch)
    for _ in range(MAX_NEWTON_ITERATIONS):
        if active.size == 0:
            break
        up, low, tot, th = upper[active], lower[active], totals[active], theta[active]
        gradient, neg_hessian = _gradient_and_system(up, tot, th, pairs, l2)
        norms = np.sqrt(np.einsum("rm,rm->r", gradient, gradient))
        grad_norm[active] = norms
        keep = norms >= GRADIENT_TOLERANCE
        if not keep.all():
            active, up, low, th = active[keep], up[keep], low[keep], th[keep]
            gradient, neg_hessian = gradient[keep], neg_hessian[keep]
            if active.size == 0:
                break
        step = np.linalg.solve(neg_hessian, gradient[:, :, None])[:, :, 0]
        f0 = value[active]
        slope = np.einsum("rm,rm->r", gradient, step)  # > 0: an ascent direction
        slack = 1e-13 * (1.0 + np.abs(f0))  # rounding in f, so a converged step is not refused
        t = np.ones(active.size)
        new = th + step
        f1 = _objective(up, low, new, pairs, l2)
        for _halving in range(60):
            bad = np.flatnonzero(f1 < f0 + 1e-4 * t * slope - slack)
            if bad.size == 0:
                break
            t[bad] *= 0.5
            new[bad] = th[bad] + t[bad, None] * step[bad]
            f1[bad] = _objective(up[bad], low[bad], new[bad], pairs, l2)
        iterations[active] += 1
        moved = np.max(np.abs(new - th), axis=1)
        theta[active] = new
        value[active] = f1
        # Floating-point floor: a step too small to change θ cannot reduce the gradient further.
        stalled = moved <= 1e-15 * (1.0 + np.max(np.abs(new), axis=1))
        active = active[~stalled]
    theta = theta - theta.mean(axis=1, keepdims=True)
    return theta, iterations, grad_norm


def tie_grouped_theta(theta: np.ndarray, tolerance: float = RANK_TOLERANCE) -> np.ndarray:
    """θ with tied values made equal, along the last axis.

    Sorted, a value within ``tolerance`` of the one below it is tied with it; each run of tied
    values takes the run's smallest value. Ties chain: 0, 0.8e-9 and 1.6e-9 are one run. NaN is
    never tied with anything and stays NaN. The order of untied values is unchanged, so ranks
    and rank correlations of the result treat exact-but-noisy ties as ties.
    """
    t = np.asarray(theta, dtype=np.float64)
    if t.ndim == 0 or t.shape[-1] == 0:
        return t + 0.0
    order = np.argsort(t, axis=-1, kind="stable")
    ordered = np.take_along_axis(t, order, axis=-1)
    # ~(gap <= tol), not gap > tol: a NaN gap starts a new run, so NaN never joins a finite run.
    starts = np.concatenate(
        [np.ones((*t.shape[:-1], 1), dtype=bool), ~(np.diff(ordered, axis=-1) <= tolerance)], axis=-1
    )
    position = np.broadcast_to(np.arange(t.shape[-1]), t.shape)
    leader = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    out = np.empty_like(t)
    np.put_along_axis(out, order, np.take_along_axis(ordered, leader, axis=-1), axis=-1)
    return out + 0.0  # + 0.0: no −0.0


def ranks_from_theta(theta: np.ndarray) -> np.ndarray:
    """Rank of every system (1 = best) along the last axis; ties (:func:`tie_grouped_theta`) go to
    the lower system index."""
    key = -tie_grouped_theta(theta) + 0.0  # + 0.0: no −0.0
    order = np.argsort(key, axis=-1, kind="stable")
    ranks = np.empty(order.shape, dtype=np.int64)
    positions = np.broadcast_to(np.arange(1, order.shape[-1] + 1), order.shape)
    np.put_along_axis(ranks, order, positions, axis=-1)
    return ranks


def fit_points(points: np.ndarray, *, l2: float = L2_PENALTY) -> BradleyTerryFit:
    """Fit docs/protocol.md "Deployment leaderboard" Bradley–Terry from a points matrix ``P`` (M, M) (see
    :func:`points_matrix`)."""
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[0] != pts.shape[1] or pts.shape[0] < 1:
        raise StatisticsError("points must be a square (M, M) matrix")
    if not np.all(np.isfinite(pts)) or np.any(pts < 0):
        raise StatisticsError("points must be finite and non-negative")
    if not (l2 > 0 and math.isfinite(l2)):
        raise StatisticsError('l2 must be positive (the docs/protocol.md "Deployment leaderboard" objective is then strictly concave)')
    m = pts.shape[0]
    pairs = _Pairs.of(m)
    upper, lower = pts[None, pairs.first, pairs.second], pts[None, pairs.second, pairs.first]
    theta, iterations, grad_norm = _newton_batch(upper, lower, m, l2)
    th = theta[0]
    log_lik = float(_objective(upper, lower, th[None], pairs, 0.0)[0])
    return BradleyTerryFit(
        theta=th,
        scores=SCORE_SCALE * th,
        ranks=ranks_from_theta(th),
        iterations=int(iterations[0]),
        gradient_norm=float(grad_norm[0]),
        log_likelihood=log_lik,
    )


def fit_bradley_terry(
    a: np.ndarray,
    b: np.ndarray,
    p: np.ndarray,
    n_systems: int,
    *,
    weights: np.ndarray | None = None,
    l2: float = L2_PENALTY,
) -> BradleyTerryFit:
    """Fit the docs/protocol.md "Deployment leaderboard" Bradley–Terry model to comparisons.

    ``a[i]``, ``b[i]``: indices (0..n_systems−1) of comparison i's canonical A and B systems;
    ``p[i]`` ∈ [0, 1]: the outcome for A (1 = A preferred, 0.5 = tie, fractional proxy p̂ allowed);
    ``weights[i]`` ≥ 0 multiplies comparison i's log-likelihood term (default 1).
    """
    return fit_points(points_matrix(a, b, p, n_systems, weights=weights), l2=l2)


# --------------------------------------------------------------------------- descriptive


def appearances(a: np.ndarray, b: np.ndarray, n_systems: int) -> np.ndarray:
    """How many comparisons each system appears in (as A or as B)."""
    a_arr, b_arr, _, _ = _validate(a, b, np.zeros(len(np.asarray(a))), n_systems)
    return np.bincount(a_arr, minlength=n_systems) + np.bincount(b_arr, minlength=n_systems)


def soft_preference(a: np.ndarray, b: np.ndarray, p: np.ndarray, n_systems: int) -> np.ndarray:
    """docs/protocol.md "Deployment leaderboard" soft preference: mean of each system's preference points (p̂
    as A, 1 − p̂ as B).

    NaN for a system without comparisons.
    """
    a_arr, b_arr, p_arr, _ = _validate(a, b, p, n_systems)
    points = np.bincount(a_arr, weights=p_arr, minlength=n_systems) + np.bincount(
        b_arr, weights=1.0 - p_arr, minlength=n_systems
    )
    count = np.bincount(a_arr, minlength=n_systems) + np.bincount(b_arr, minlength=n_systems)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, points / np.maximum(count, 1), np.nan)


# --------------------------------------------------------------------------- bootstrap


def penalty_set(a: np.ndarray, b: np.ndarray, p: np.ndarray, n_systems: int) -> list[str | None]:
    """Per system: ``"no win"`` when no outcome gives it a point (p̂ = 0 whenever it is A, 1
    whenever it is B), ``"no loss"`` when none takes one from it, else None.

    Such a system's maximum-likelihood θ is infinite; the 10⁻³ penalty of docs/protocol.md
    "Deployment leaderboard" alone makes it finite, so its score (and the side of its interval the
    data cannot bound) says how strong the penalty is, not how far the system is from the others
    (docs/protocol.md "Scores set by the penalty")."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    p = np.asarray(p, dtype=np.float64)
    won = np.bincount(a, weights=p, minlength=n_systems) + np.bincount(b, weights=1.0 - p, minlength=n_systems)
    lost = np.bincount(a, weights=1.0 - p, minlength=n_systems) + np.bincount(b, weights=p, minlength=n_systems)
    seen = appearances(a, b, n_systems) > 0
    return [
        ("no win" if won[k] <= 0 else "no loss" if lost[k] <= 0 else None) if seen[k] else None
        for k in range(n_systems)
    ]


def pairs_without_outcomes(a: np.ndarray, b: np.ndarray, n_systems: int) -> list[tuple[int, int]]:
    """The system pairs (i < j) that no outcome compares: their order comes only from the
    other pairs (docs/protocol.md "Scores set by the penalty")."""
    low = np.minimum(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    high = np.maximum(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    seen = set(zip(low.tolist(), high.tolist(), strict=True))
    return [(i, j) for i in range(n_systems) for j in range(i + 1, n_systems) if (i, j) not in seen]


def _pair_column(first: np.ndarray, second: np.ndarray, m: int) -> np.ndarray:
    """Column of the ordered pair (first, second) in the pair form [upper | lower] of length 2K."""
    low = np.minimum(first, second)
    high = np.maximum(first, second)
    k = low * m - low * (low + 1) // 2 + (high - low - 1)  # row-major index among i < j
    return np.where(first < second, k, m * (m - 1) // 2 + k)


def unit_points(
    a: np.ndarray, b: np.ndarray, p: np.ndarray, n_systems: int, unit_of: np.ndarray, n_units: int
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """Sufficient statistics per unit and ordered pair, in points form.

    Returns ``(ST, columns)``: ``ST`` is a sparse (C, n_units) matrix, row c holding for every unit
    the points of one ordered pair (i, j); ``columns[c]`` is that pair's column in the pair form
    ``[upper | lower]`` (upper k: i against j for the k-th pair i < j; lower k: j against i). Only
    the C ordered pairs that occur are kept. For a unit u and ordered pair (i, j) the entry is Σ p̂
    over its comparisons with A = i, B = j plus (count − Σ p̂) over those with A = j, B = i — a
    linear function of the (count, Σ p̂) statistics, so a resample's statistics are ``ST @ W[r]``.
    """
    a_arr, b_arr, p_arr, _ = _validate(a, b, p, n_systems)
    unit_arr = np.asarray(unit_of, dtype=np.int64)
    if unit_arr.shape != a_arr.shape:
        raise StatisticsError("units.unit_of must have one entry per comparison")
    m = int(n_systems)
    cols = np.concatenate([_pair_column(a_arr, b_arr, m), _pair_column(b_arr, a_arr, m)])
    rows = np.concatenate([unit_arr, unit_arr])
    data = np.concatenate([p_arr, 1.0 - p_arr])
    columns, col_index = np.unique(cols, return_inverse=True)
    stats = sparse.coo_matrix((data, (col_index, rows)), shape=(len(columns), n_units)).tocsr()
    stats.sum_duplicates()
    stats.sort_indices()
    return stats, columns


def _batch_size(n_systems: int) -> int:
    return max(1, _BATCH_ELEMENTS // max(1, n_systems * n_systems))


def _summaries(scores: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score ci95 (percentile 2.5/97.5,
    docs/protocol.md "Human reference and agreement", "Deployment leaderboard"), rank ci95 and rank-1 share.

    Rank intervals are integers: the 2.5th percentile rounded down to an observed rank
    (``method="lower"``) and the 97.5th rounded up (``method="higher"``), so they never claim more
    precision than the resampled ranks have.
    """
    ci95 = percentile_interval(scores, axis=0).T
    low = np.percentile(ranks, 2.5, axis=0, method="lower")
    high = np.percentile(ranks, 97.5, axis=0, method="higher")
    rank_ci95 = np.stack([low, high], axis=1).astype(np.int64)
    rank1_share = (ranks == 1).mean(axis=0)
    return ci95, rank_ci95, rank1_share


def _fit_rows(
    counts: np.ndarray,
    stats: sparse.csr_matrix,
    columns: np.ndarray,
    m: int,
    l2: float,
    start: int,
    stop: int,
    size: int,
    theta: np.ndarray,
    iterations: np.ndarray,
    grad_norm: np.ndarray,
) -> None:
    """Refit rows ``start..stop`` of the count matrix in batches of ``size``; fill the outputs."""
    for lo in range(start, stop, size):
        hi = min(stop, lo + size)
        # (K, U) @ (U, R): each output element accumulates over units in a fixed order,
        # independent of how many resamples the batch holds.
        weights_t = np.ascontiguousarray(counts[lo:hi].T, dtype=np.float64)
        pair_points = np.asarray(stats @ weights_t).T  # (R_batch, K)
        n_pairs = m * (m - 1) // 2
        flat = np.zeros((hi - lo, 2 * n_pairs))
        flat[:, columns] = pair_points
        th, it, gn = _newton_batch(flat[:, :n_pairs], flat[:, n_pairs:], m, l2)
        theta[lo - start : hi - start] = th
        iterations[lo - start : hi - start] = it
        grad_norm[lo - start : hi - start] = gn


def bootstrap_bradley_terry(
    a: np.ndarray,
    b: np.ndarray,
    p: np.ndarray,
    n_systems: int,
    units: BootstrapUnits,
    *,
    resamples: int,
    seed: int,
    chunk: tuple[int, int] | None = None,
    counts: np.ndarray | None = None,
    l2: float = L2_PENALTY,
) -> BootstrapResult:
    """docs/protocol.md "Deployment leaderboard" page-block bootstrap: refit Bradley–Terry on every resample,
    all at once.

    The resamples are the rows of ``W = bootstrap_page_blocks(units, resamples=resamples, seed=seed)``
    (or of ``counts`` when given, which must be that matrix). ``chunk=(start, stop)`` fits only rows
    ``start..stop`` of the *same* W: chunks are therefore the same resamples as one run, and
    :func:`merge_bootstrap_results` of chunks covering ``0..resamples`` equals the unchunked result
    exactly (each resample's Newton iterates depend only on its own row).

    Vectorized: sufficient statistics per (unit, ordered pair) are aggregated per resample with one
    sparse product, then a batched Newton iteration solves all resamples' (M, M) systems together.
    """
    if not (l2 > 0 and math.isfinite(l2)):
        raise StatisticsError("l2 must be positive")
    start, stop, counts = bootstrap_rows(units, resamples=resamples, seed=seed, chunk=chunk, counts=counts)
    stats, columns = unit_points(a, b, p, n_systems, units.unit_of, units.n_units)
    m = int(n_systems)
    theta = np.empty((stop - start, m))
    iterations = np.zeros(stop - start, dtype=np.int64)
    grad_norm = np.zeros(stop - start)
    size = _batch_size(m)
    with _single_threaded_blas():
        _fit_rows(counts, stats, columns, m, l2, start, stop, size, theta, iterations, grad_norm)
    return bootstrap_result(theta, iterations, grad_norm, resamples=resamples, seed=seed, start=start, stop=stop)


def bootstrap_rows(
    units: BootstrapUnits, *, resamples: int, seed: int, chunk: tuple[int, int] | None, counts: np.ndarray | None
) -> tuple[int, int, np.ndarray]:
    """Checked ``(start, stop, W)`` of a (chunk of a) docs/protocol.md "Deployment leaderboard" page-block
    bootstrap."""
    if resamples < 1:
        raise StatisticsError("resamples must be at least 1")
    start, stop = (0, resamples) if chunk is None else (int(chunk[0]), int(chunk[1]))
    if not 0 <= start < stop <= resamples:
        raise StatisticsError(f"chunk must satisfy 0 <= start < stop <= resamples, got {chunk!r}")
    if counts is None:
        counts = bootstrap_page_blocks(units, resamples=resamples, seed=seed)
    elif counts.shape != (resamples, units.n_units):
        raise StatisticsError(f"counts must have shape {(resamples, units.n_units)}, got {counts.shape}")
    return start, stop, counts


def bootstrap_result(
    theta: np.ndarray,
    iterations: np.ndarray,
    grad_norm: np.ndarray,
    *,
    resamples: int,
    seed: int,
    start: int,
    stop: int,
) -> BootstrapResult:
    """Scores, ranks and their summaries of resampled θ (rows ``start..stop``)."""
    scores = SCORE_SCALE * theta
    ranks = ranks_from_theta(theta)
    ci95, rank_ci95, rank1_share = _summaries(scores, ranks)
    return BootstrapResult(
        resamples=int(resamples),
        seed=int(seed),
        start=start,
        stop=stop,
        scores=scores,
        ranks=ranks,
        ci95=ci95,
        rank_ci95=rank_ci95,
        rank1_share=rank1_share,
        max_iterations=int(iterations.max(initial=0)),
        max_gradient_norm=float(grad_norm.max(initial=0.0)),
    )


def merge_bootstrap_results(parts: Sequence[BootstrapResult]) -> BootstrapResult:
    """Merge chunk results of one bootstrap (same resamples and seed) covering ``0..resamples``."""
    if not parts:
        raise StatisticsError("no bootstrap chunks to merge")
    ordered = sorted(parts, key=lambda part: part.start)
    resamples, seed = ordered[0].resamples, ordered[0].seed
    expected = 0
    for part in ordered:
        if part.resamples != resamples or part.seed != seed:
            raise StatisticsError("bootstrap chunks come from different runs (resamples or seed differ)")
        if part.start != expected:
            raise StatisticsError(f"bootstrap chunks leave a gap or overlap at resample {expected}")
        expected = part.stop
    if expected != resamples:
        raise StatisticsError(f"bootstrap chunks cover {expected} of {resamples} resamples")
    scores = np.concatenate([part.scores for part in ordered], axis=0)
    ranks = np.concatenate([part.ranks for part in ordered], axis=0)
    ci95, rank_ci95, rank1_share = _summaries(scores, ranks)
    return BootstrapResult(
        resamples=resamples,
        seed=seed,
        start=0,
        stop=resamples,
        scores=scores,
        ranks=ranks,
        ci95=ci95,
        rank_ci95=rank_ci95,
        rank1_share=rank1_share,
        max_iterations=max(part.max_iterations for part in ordered),
        max_gradient_norm=max(part.max_gradient_norm for part in ordered),
    )


def fit_pair_points_batch(
    upper: np.ndarray, lower: np.ndarray, *, l2: float = L2_PENALTY
) -> tuple[np.ndarray, np.ndarray]:
    """Fit many docs/protocol.md "Deployment leaderboard" objectives given in pair form at once (one per row).

    ``upper[r, k]`` / ``lower[r, k]``: points of i against j / of j against i for the k-th pair
    i < j in row-major ``np.triu_indices(M, 1)`` order; both (R, K) with K = M(M−1)/2. Returns the
    centred θ (R, M) and the negative Hessian (R, M, M) of the objective there (the observed Fisher
    information of the fit, penalty included). Used by the sequential-study simulator and the
    adaptive allocator (``stats.allocation``), which refit every replicate of a study together.
    """
    up = np.atleast_2d(np.asarray(upper, dtype=np.float64))
    low = np.atleast_2d(np.asarray(lower, dtype=np.float64))
    if up.shape != low.shape:
        raise StatisticsError(f"upper and lower must have the same shape, got {up.shape} and {low.shape}")
    n_pairs = up.shape[1]
    m = round((1 + math.sqrt(1 + 8 * n_pairs)) / 2)
    if m * (m - 1) // 2 != n_pairs or m < 2:
        raise StatisticsError(f"{n_pairs} columns is not M(M-1)/2 pairs for any M >= 2")
    if not np.all(np.isfinite(up)) or np.any(up < 0) or not np.all(np.isfinite(low)) or np.any(low < 0):
        raise StatisticsError("points must be finite and non-negative")
    if not (l2 > 0 and math.isfinite(l2)):
        raise StatisticsError("l2 must be positive")
    with _single_threaded_blas():
        theta, _, _ = _newton_batch(up, low, m, l2)
        _, neg_hessian = _gradient_and_system(up, up + low, theta, _Pairs.of(m), l2)
    return theta, neg_hessian
