"""Benchmark of the docs/protocol.md "Deployment leaderboard" leaderboard maths: vectorized page-block
bootstrap vs per-resample refits.

Run:  cd /work/main && .venv/bin/python benchmarks/bench_leaderboard.py [--quick]

Case 1 (the paper): 10 systems, 10,000 comparisons on 1,113 pages (schedule from
``make_deployment_schedule``, seed 20260831), simulated fractional p̂, 2,000 resamples.
Case 2: 100 systems, 1,000,000 comparisons on 10,000 pages, 2,000 resamples by default (--big-resamples).

Baselines, timed on a subset of the same resamples (same count matrix W) and extrapolated:
- scipy: one L-BFGS-B refit per resample of the docs/protocol.md "Deployment leaderboard" objective on the
row-level data
  (analytic gradient, weights = W[r, unit of row]);
- scikit-learn (arena style): LogisticRegression on the ±1 design matrix, each comparison twice
  (y = 1 with weight w·p̂, y = 0 with weight w·(1 − p̂)), no intercept, C = 1 / (2·10⁻³) so the
  penalty equals docs/protocol.md "Deployment leaderboard"'s.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ranking.deployment_schedule import make_deployment_schedule
from stats.bootstrap import bootstrap_page_blocks, bootstrap_units
from stats.bradley_terry import (
    L2_PENALTY,
    SCORE_SCALE,
    bootstrap_bradley_terry,
    fit_bradley_terry,
)

SEED = 20260831


def timed(function, repeats: int) -> tuple[float, object]:
    """Median wall time of ``repeats`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def simulate(n_systems: int, n_comparisons: int, n_pages: int, seed: int):
    systems = [f"sys{k:03d}" for k in range(n_systems)]
    pages = {f"page-{k:05d}": systems for k in range(n_pages)}
    start = time.perf_counter()
    schedule = make_deployment_schedule(systems, pages, [], n_comparisons, seed=seed)
    schedule_seconds = time.perf_counter() - start
    index = {s: k for k, s in enumerate(systems)}
    page_ids = [page for page, _, _ in schedule.comparisons]
    a = np.fromiter((index[x] for _, x, _ in schedule.comparisons), dtype=np.int64)
    b = np.fromiter((index[y] for _, _, y in schedule.comparisons), dtype=np.int64)
    rng = np.random.default_rng(seed)
    ability = rng.normal(0.0, 0.6, n_systems)
    page_effect = rng.normal(0.0, 0.3, n_pages)[np.array([int(p[5:]) for p in page_ids])]
    prob = 1.0 / (1.0 + np.exp(-(ability[a] - ability[b] + page_effect * (a % 2 - 0.5))))
    p = np.clip(prob + rng.normal(0.0, 0.2, len(a)), 0.0, 1.0)
    return a, b, p, bootstrap_units(page_ids), schedule, schedule_seconds


def scipy_refit(a, b, p, w, n_systems):
    """One per-resample refit: the docs/protocol.md "Deployment leaderboard" objective on row-level data with
    L-BFGS-B."""

    def negative(theta):
        d = theta[a] - theta[b]
        value = np.sum(w * (p * -np.logaddexp(0.0, -d) + (1 - p) * -np.logaddexp(0.0, d)))
        value -= L2_PENALTY * theta @ theta
        resid = w * (p - 1.0 / (1.0 + np.exp(-d)))
        grad = np.bincount(a, resid, n_systems) - np.bincount(b, resid, n_systems) - 2 * L2_PENALTY * theta
        return -value, -grad

    result = minimize(
        negative, np.zeros(n_systems), jac=True, method="L-BFGS-B", options={"gtol": 1e-8, "maxiter": 10000}
    )
    theta = result.x - result.x.mean()
    return SCORE_SCALE * theta


def sklearn_design(a, b, n_systems, dense: bool):
    n = len(a)
    rows = np.r_[np.arange(n), np.arange(n)]
    cols = np.r_[a, b]
    vals = np.r_[np.ones(n), -np.ones(n)]
    x = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n_systems))
    x = sparse.vstack([x, x]).tocsr()
    return x.toarray() if dense else x


def sklearn_refit(x, p, w, n_systems):
    from sklearn.linear_model import LogisticRegression

    y = np.r_[np.ones(len(p)), np.zeros(len(p))]
    sample_weight = np.r_[w * p, w * (1 - p)]
    model = LogisticRegression(C=1.0 / (2.0 * L2_PENALTY), fit_intercept=False, tol=1e-8, max_iter=1000)
    model.fit(x, y, sample_weight=sample_weight)
    theta = model.coef_[0] - model.coef_[0].mean()
    return SCORE_SCALE * theta


def run_case(name, n_systems, n_comparisons, n_pages, resamples, baseline_resamples, repeats, dense_sklearn):
    print(f"\n=== {name}: {n_systems} systems, {n_comparisons:,} comparisons, {n_pages:,} pages ===")
    a, b, p, units, schedule, schedule_seconds = simulate(n_systems, n_comparisons, n_pages, SEED)
    quota = schedule.quota
    print(
        f"schedule (make_deployment_schedule, seed {SEED}): {schedule_seconds:.3f} s; pair counts "
        f"{quota.pair_count_min}..{quota.pair_count_max} ({quota.pairs_at_max} pairs at max), "
        f"appearances {quota.appearances_min}..{quota.appearances_max}, page load {quota.page_load_min}..{quota.page_load_max}"
    )
    fit_seconds, fit = timed(lambda: fit_bradley_terry(a, b, p, n_systems), repeats)
    print(f"single fit_bradley_terry: {fit_seconds * 1e3:.2f} ms ({fit.iterations} Newton iterations)")

    draw_seconds, counts = timed(
        lambda: bootstrap_page_blocks(units, resamples=resamples, seed=SEED), repeats
    )
    refit_seconds, result = timed(
        lambda: bootstrap_bradley_terry(
            a, b, p, n_systems, units, resamples=resamples, seed=SEED, counts=counts
        ),
        repeats,
    )
    total_seconds, _ = timed(
        lambda: bootstrap_bradley_terry(a, b, p, n_systems, units, resamples=resamples, seed=SEED), repeats
    )
    print(f"bootstrap, {resamples:,} resamples (median of {repeats}):")
    print(f"  draw count matrix W (stats.bootstrap): {draw_seconds:8.3f} s")
    print(f"  vectorized refit of all resamples          : {refit_seconds:8.3f} s")
    print(
        f"  bootstrap_bradley_terry total              : {total_seconds:8.3f} s   (target for case 1: < 0.15 s)"
    )
    print(
        f"  max Newton iterations {result.max_iterations}, max gradient norm {result.max_gradient_norm:.1e}"
    )

    subset = min(baseline_resamples, resamples)
    start = time.perf_counter()
    scipy_scores = [
        scipy_refit(a, b, p, counts[r, units.unit_of].astype(float), n_systems) for r in range(subset)
    ]
    scipy_seconds = (time.perf_counter() - start) / subset * resamples
    scipy_gap = float(np.max(np.abs(np.array(scipy_scores) - result.scores[:subset])))

    x = sklearn_design(a, b, n_systems, dense_sklearn)
    sk_subset = max(1, subset // 2) if not dense_sklearn else subset
    start = time.perf_counter()
    sk_scores = [
        sklearn_refit(x, p, counts[r, units.unit_of].astype(float), n_systems) for r in range(sk_subset)
    ]
    sklearn_seconds = (time.perf_counter() - start) / sk_subset * resamples
    sk_gap = float(np.max(np.abs(np.array(sk_scores) - result.scores[:sk_subset])))

    print(
        f"per-resample baselines (timed on the first resamples of the same W, extrapolated to {resamples:,}):"
    )
    print(
        f"  scipy L-BFGS-B refit on rows  : {scipy_seconds:9.2f} s  (timed {subset}; "
        f"{scipy_seconds / total_seconds:7.1f}x slower; max |Δscore| {scipy_gap:.2e})"
    )
    print(
        f"  scikit-learn LogisticRegression: {sklearn_seconds:9.2f} s  (timed {sk_subset}, "
        f"{'dense' if dense_sklearn else 'sparse'} ±1 design; {sklearn_seconds / total_seconds:7.1f}x slower; "
        f"max |Δscore| {sk_gap:.2e})"
    )
    order = np.argsort(-fit.scores)[: min(5, n_systems)]
    print("top systems: rank, score, ci95, rank_ci95, rank1_share")
    for m in order:
        low, high = result.ci95[m]
        print(
            f"  sys{m:03d}: {fit.ranks[m]:3d} {fit.scores[m]:8.1f} [{low:7.1f}, {high:7.1f}] "
            f"[{result.rank_ci95[m, 0]}, {result.rank_ci95[m, 1]}] {result.rank1_share[m]:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller second case (for a smoke run)")
    parser.add_argument("--big-resamples", type=int, default=2000)
    parser.add_argument("--case", choices=["1", "2", "both"], default="both")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"numpy {np.__version__}; SCORE_SCALE 400/ln10 = {400 / math.log(10):.4f}")
    if args.case in ("1", "both"):
        run_case("case 1 (paper)", 10, 10_000, 1_113, 2_000, 50, args.repeats, dense_sklearn=True)
    if args.case == "1":
        return
    if args.quick:
        run_case("case 2 (quick)", 100, 100_000, 1_000, 50, 2, 1, dense_sklearn=False)
    else:
        run_case("case 2", 100, 1_000_000, 10_000, args.big_resamples, 2, 1, dense_sklearn=False)


if __name__ == "__main__":
    main()
