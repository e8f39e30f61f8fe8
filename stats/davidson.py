"""Davidson (1970) tie model on human labels A / TIE / B — reported beside plain Bradley–Terry.

Beyond the paper (docs/protocol.md "Deployment leaderboard" fits plain Bradley–Terry with ties as ½ points);
this is an optional second view for human-labelled comparisons where ties are frequent. Pure module, no
Django.

Model, with d = θ_a − θ_b and tie parameter ν = e^η > 0:

    P(A) = e^{d/2} / D,   P(TIE) = ν / D,   P(B) = e^{−d/2} / D,   D = e^{d/2} + e^{−d/2} + ν

Given that the comparison is not a tie, P(A | not tie) = σ(d): θ is on the same logit scale as
docs/protocol.md "Deployment leaderboard"'s Bradley–Terry, and we report the same ``400 θ / ln 10`` score. The
fit maximizes

    Σ_i w_i log P(y_i) − λ Σ_m θ_m²   (λ = 10⁻³ as in docs/protocol.md "Deployment leaderboard"; η
    unpenalized)

which is concave (−log D is −logsumexp of affine functions) and strictly concave in θ; we use
damped Newton steps on the exact (M+1)×(M+1) Hessian until the gradient norm is below 10⁻¹⁰, then
centre θ (the penalty already centres the optimum, as for Bradley–Terry).

Leaderboard option (``leaderboard --model davidson``, issue 16). The deployment outcome is the
fractional proxy p̂ (docs/protocol.md "Deployment leaderboard"), not a label, so each comparison enters as a
*soft label* (:func:`soft_labels`): ``q = (max(0, 2p̂ − 1), 1 − |2p̂ − 1|, max(0, 1 − 2p̂))`` for (A, TIE, B),
the decomposition with ``q_A + q_T / 2 = p̂`` in which p̂ = ½ is a pure tie and p̂ ∈ {0, 1} a
pure win (labels 1 / ½ / 0 map to themselves), and the likelihood is ``Σ_i Σ_k q_ik log P(k)``
(a weighted fit, ``weights = q``). The page-block bootstrap (:func:`bootstrap_davidson`) is the
docs/protocol.md "Deployment leaderboard" one: the same count matrix ``W`` of
``stats.bootstrap.bootstrap_page_blocks``; the data enter only through per (unit, ordered pair, label)
weights, so a resample is one sparse product and one small Newton fit on those cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from stats.bootstrap import BootstrapUnits, percentile_interval
from stats.bradley_terry import (
    L2_PENALTY,
    SCORE_SCALE,
    BootstrapResult,
    bootstrap_result,
    bootstrap_rows,
    merge_bootstrap_results,
    ranks_from_theta,
)
from stats.errors import StatisticsError

GRADIENT_TOLERANCE = 1e-10
MAX_NEWTON_ITERATIONS = 200
_LABEL_VALUE = {"A": 1, "TIE": 0, "B": -1}


@dataclass(frozen=True, eq=False)
class DavidsonFit:
    """Fitted Davidson model: θ centered, ``scores = 400 θ / ln 10``, ranks (1 = best), ν."""

    theta: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray
    tie_parameter: float
    log_likelihood: float
    iterations: int
    gradient_norm: float

    def probabilities(self, a: int, b: int) -> tuple[float, float, float]:
        """(P(A), P(TIE), P(B)) for system ``a`` shown as A against ``b``."""
        half = 0.5 * (self.theta[a] - self.theta[b])
        up, down, nu = np.exp(half), np.exp(-half), self.tie_parameter
        total = up + down + nu
        return float(up / total), float(nu / total), float(down / total)


def _outcomes(labels: Sequence[object] | np.ndarray) -> np.ndarray:
    """+1 (A), 0 (TIE), −1 (B) from labels "A"/"TIE"/"B" or outcomes 1 / 0.5 / 0 for A."""
    values = np.empty(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        if isinstance(label, str):
            if label.upper() not in _LABEL_VALUE:
                raise StatisticsError(f"label {i} is {label!r}; expected A, TIE or B")
            values[i] = _LABEL_VALUE[label.upper()]
        else:
            number = float(label)  # type: ignore[arg-type]
            if number not in (0.0, 0.5, 1.0):
                raise StatisticsError(f"outcome {i} is {number!r}; expected 1 (A), 0.5 (TIE) or 0 (B)")
            values[i] = round(2 * number) - 1
    return values


def _terms(
    d: np.ndarray, eta: float, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per comparison: log P(y), ∂/∂d, ∂/∂η, ∂²/∂d², ∂²/∂η², ∂²/∂d∂η (stable in d)."""
    half = 0.5 * d
    # Scale D by e^{−|d|/2} so no exponential overflows: D̃ = e^{h−m} + e^{−h−m} + e^{η−m}, m = |h|.
    shift = np.abs(half)
    up = np.exp(half - shift)
    down = np.exp(-half - shift)
    tie = np.exp(eta - shift)
    total = up + down + tie
    log_d = shift + np.log(total)
    log_p = np.where(y > 0, half, np.where(y < 0, -half, eta)) - log_d
    p_up, p_down, p_tie = up / total, down / total, tie / total
    d_d = 0.5 * y - 0.5 * (p_up - p_down)
    d_eta = (y == 0) - p_tie
    # −log D second derivatives: −Var-type terms of the three-point "softmax".
    dd = -0.25 * (p_up + p_down - (p_up - p_down) ** 2)
    ee = -(p_tie - p_tie**2)
    de = 0.5 * (p_up - p_down) * p_tie
    return log_p, d_d, d_eta, dd, ee, de


def fit_davidson(
    a: np.ndarray,
    b: np.ndarray,
    labels: Sequence[object] | np.ndarray,
    n_systems: int,
    *,
    weights: np.ndarray | None = None,
    l2: float = L2_PENALTY,
) -> DavidsonFit:
    """Fit the Davidson tie model to canonical human labels (A, TIE, B) of comparisons a vs b."""
    a_arr = np.asarray(a, dtype=np.int64)
    b_arr = np.asarray(b, dtype=np.int64)
    y = _outcomes(labels)
    if not (len(a_arr) == len(b_arr) == len(y)):
        raise StatisticsError("a, b and labels must have the same length")
    if n_systems < 1 or (
        len(a_arr) and (min(a_arr.min(), b_arr.min()) < 0 or max(a_arr.max(), b_arr.max()) >= n_systems)
    ):
        raise StatisticsError(f"system indices must lie in [0, {n_systems - 1}]")
    if np.any(a_arr == b_arr):
        raise StatisticsError("a comparison compares a system with itself")
    if not l2 > 0:
        raise StatisticsError("l2 must be positive")
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != y.shape or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise StatisticsError("weights must be finite, non-negative, one per comparison")
    n_ties = float(np.sum(w * (y == 0)))
    n_total = float(np.sum(w))
    if n_ties == 0 or n_ties == n_total:
        raise StatisticsError("the Davidson model needs at least one tie and one non-tie (ν is not identified)")

    m = int(n_systems)

    def objective(theta: np.ndarray, eta: float) -> float:
        log_p = _terms(theta[a_arr] - theta[b_arr], eta, y)[0]
        return float(np.sum(w * log_p) - l2 * theta @ theta)

    theta = np.zeros(m)
    tie_share = n_ties / n_total
    eta = float(np.log(2 * tie_share / (1 - tie_share)))  # the ν of equal systems
    value = objective(theta, eta)
    grad_norm = np.inf
    iterations = 0
    for iterations in range(1, MAX_NEWTON_ITERATIONS + 1):
        _, d_d, d_eta, dd, ee, de = _terms(theta[a_arr] - theta[b_arr], eta, y)
        grad = np.zeros(m + 1)
        grad[:m] = np.bincount(a_arr, w * d_d, m) - np.bincount(b_arr, w * d_d, m) - 2 * l2 * theta
        grad[m] = np.sum(w * d_eta)
        grad_norm = float(np.linalg.norm(grad))
        if grad_norm < GRADIENT_TOLERANCE:
            iterations -= 1
            break
        hess = np.zeros((m + 1, m + 1))
        flat_ab = a_arr * (m + 1) + b_arr
        flat_ba = b_arr * (m + 1) + a_arr
        size = (m + 1) * (m + 1)
        off = np.bincount(flat_ab, w * dd, size) + np.bincount(flat_ba, w * dd, size)
        hess += -off.reshape(m + 1, m + 1)
        diag = np.bincount(a_arr, w * dd, m) + np.bincount(b_arr, w * dd, m)
        hess[np.arange(m), np.arange(m)] += diag - 2 * l2
        cross = np.bincount(a_arr, w * de, m) - np.bincount(b_arr, w * de, m)
        hess[:m, m] = cross
        hess[m, :m] = cross
        hess[m, m] = np.sum(w * ee)
        step = np.linalg.solve(-hess, grad)
        slope = float(grad @ step)
        t = 1.0
        for _halving in range(60):
            new_theta, new_eta = theta + t * step[:m], eta + t * step[m]
            new_value = objective(new_theta, new_eta)
            if new_value >= value + 1e-4 * t * slope - 1e-13 * (1 + abs(value)):
                break
            t *= 0.5
        moved = float(np.max(np.abs(t * step)))
        theta, eta, value = new_theta, new_eta, new_value
        if moved <= 1e-15 * (1 + float(np.max(np.abs(theta)))):
            break
    theta = theta - theta.mean()
    log_p = _terms(theta[a_arr] - theta[b_arr], eta, y)[0]
    return DavidsonFit(
        theta=theta,
        scores=SCORE_SCALE * theta,
        ranks=ranks_from_theta(theta),
        tie_parameter=float(np.exp(eta)),
        log_likelihood=float(np.sum(w * log_p)),
        iterations=int(iterations),
        gradient_norm=grad_norm,
    )


# --------------------------------------------------------------------------- leaderboard option

#: Cell labels in the order of :func:`soft_labels` columns.
SOFT_LABELS: tuple[str, str, str] = ("A", "TIE", "B")


def soft_labels(p: np.ndarray) -> np.ndarray:
    """(n, 3) soft labels (A, TIE, B) of fractional outcomes p̂ ∈ [0, 1] (module docstring).

    ``q_A = max(0, 2p̂ − 1)``, ``q_T = 1 − |2p̂ − 1|``, ``q_B = max(0, 1 − 2p̂)``; rows sum to 1 and
    ``q_A + q_T / 2 = p̂``.
    """
    p_arr = np.asarray(p, dtype=np.float64)
    if p_arr.ndim != 1 or not np.all(np.isfinite(p_arr)) or np.any((p_arr < 0) | (p_arr > 1)):
        raise StatisticsError("outcomes must be a 1-D array of numbers in [0, 1]")
    two = 2.0 * p_arr - 1.0
    return np.stack([np.maximum(0.0, two), 1.0 - np.abs(two), np.maximum(0.0, -two)], axis=1)


@dataclass(frozen=True, eq=False)
class _Cells:
    """Distinct (A system, B system, label) cells and their weight per bootstrap unit."""

    a: np.ndarray
    b: np.ndarray
    labels: np.ndarray
    per_unit: sparse.csr_matrix  # (cells, units)


def _cells(a: np.ndarray, b: np.ndarray, p: np.ndarray, n_systems: int, unit_of: np.ndarray, n_units: int) -> _Cells:
    a_arr = np.asarray(a, dtype=np.int64)
    b_arr = np.asarray(b, dtype=np.int64)
    q = soft_labels(p)
    unit_arr = np.asarray(unit_of, dtype=np.int64)
    if not (len(a_arr) == len(b_arr) == len(q) == len(unit_arr)):
        raise StatisticsError("a, b, p and the units must have one entry per comparison")
    m = int(n_systems)
    ids = ((a_arr * m + b_arr)[:, None] * 3 + np.arange(3)[None, :]).ravel()
    cells, index = np.unique(ids, return_inverse=True)
    rows = np.repeat(unit_arr, 3)
    per_unit = sparse.coo_matrix((q.ravel(), (index, rows)), shape=(len(cells), n_units)).tocsr()
    per_unit.sum_duplicates()
    pair, label = np.divmod(cells, 3)
    cell_a, cell_b = np.divmod(pair, m)
    return _Cells(a=cell_a, b=cell_b, labels=np.asarray(SOFT_LABELS, dtype=object)[label], per_unit=per_unit)


def fit_davidson_outcomes(
    a: np.ndarray, b: np.ndarray, p: np.ndarray, n_systems: int, *, l2: float = L2_PENALTY
) -> DavidsonFit:
    """Davidson fit of fractional outcomes p̂ as soft labels (the leaderboard's point estimate)."""
    a_arr = np.asarray(a, dtype=np.int64)
    c = _cells(a_arr, b, p, n_systems, np.zeros(len(a_arr), dtype=np.int64), 1)
    weights = np.asarray(c.per_unit.sum(axis=1)).ravel()
    return fit_davidson(c.a, c.b, c.labels, n_systems, weights=weights, l2=l2)


@dataclass(frozen=True, eq=False)
class DavidsonBootstrap:
    """Page-block bootstrap of the Davidson fit: ``result`` as for Bradley–Terry (scores, ranks,
    intervals, rank-1 shares) and the resampled tie parameters ν (rows ``start..stop``)."""

    result: BootstrapResult
    tie_parameters: np.ndarray

    @property
    def tie_ci95(self) -> tuple[float, float]:
        lo, hi = percentile_interval(self.tie_parameters)
        return float(lo), float(hi)


def bootstrap_davidson(
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
) -> DavidsonBootstrap:
    """docs/protocol.md "Deployment leaderboard" page-block bootstrap of the Davidson fit (same ``W``, chunks
    as for Bradley–Terry).

    A resample in which the tie parameter is not identified (no tie or no win mass) raises
    ``StatisticsError``.
    """
    start, stop, counts = bootstrap_rows(units, resamples=resamples, seed=seed, chunk=chunk, counts=counts)
    c = _cells(a, b, p, n_systems, units.unit_of, units.n_units)
    weights = np.asarray(c.per_unit @ np.ascontiguousarray(counts[start:stop].T, dtype=np.float64)).T
    m = int(n_systems)
    theta = np.empty((stop - start, m))
    nu = np.empty(stop - start)
    iterations = np.zeros(stop - start, dtype=np.int64)
    grad_norm = np.zeros(stop - start)
    for r in range(stop - start):
        try:
            fit = fit_davidson(c.a, c.b, c.labels, m, weights=weights[r], l2=l2)
        except ValueError as exc:
            raise StatisticsError(f"bootstrap resample {start + r}: {exc}") from None
        theta[r], nu[r], iterations[r], grad_norm[r] = fit.theta, fit.tie_parameter, fit.iterations, fit.gradient_norm
    result = bootstrap_result(theta, iterations, grad_norm, resamples=resamples, seed=seed, start=start, stop=stop)
    return DavidsonBootstrap(result=result, tie_parameters=nu)


def merge_davidson_bootstraps(parts: Sequence[DavidsonBootstrap]) -> DavidsonBootstrap:
    """Chunks covering ``0..resamples`` merged into one (equal to the unchunked run)."""
    ordered = sorted(parts, key=lambda part: part.result.start)
    return DavidsonBootstrap(
        result=merge_bootstrap_results([part.result for part in ordered]),
        tie_parameters=np.concatenate([part.tie_parameters for part in ordered]),
    )
