"""Benchmark of a judge's call budget spent adaptively (docs/protocol.md "A judge's call budget").

Run:  cd /work/main && .venv/bin/python benchmarks/bench_judge_budget.py [--seeds 40] [--systems 10,20]

Seeded synthetic deployments from the project's simulator (``stats.study_simulation``): M systems
with true scores at the normal quantiles of a 100-Elo standard deviation, answered by one judge (a
panel of one rater: no noise spread, no sloppy share, a position bias of sd 0.25 logit, 5 % ties).
A call is one answer; a comparison is called in both orders, so calls go two by two. The rounds
are the command's (``stats.allocation.budget_rounds``: a uniform start of one comparison per pair,
then rounds of 12 % of what was spent, at least the start's size). ``uniform`` spreads the calls
equally over the pairs (``run_judges`` without a budget, on a balanced deployment schedule);
``adaptive`` is ``run_judges --max-calls``: ``BUDGET_RULE`` on the adjacent-separation target with
the 25 % uniform floor.

Figure: the calls until every adjacent pair of the fitted order has a 95 % interval of its score
difference narrower than 50 Elo, and stays so (median over seeds), with a 95 % percentile interval
over 1,000 bootstrap resamples of the seeds; the ratio adaptive / uniform is paired.

Oracle bound (``stats.optimal_design``): per seed, the fewest calls of any fixed allocation given
the judge's true Bradley–Terry strengths (``stats.study_simulation.bradley_terry_limit``), as a
share of uniform's (asymptotic): median and 2.5–97.5 % range over the seeds, with the command's 25 %
floor, and without a floor up to 10 systems (larger ones take minutes a seed). ``--oracle-only``
skips the simulated runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.allocation import UNIFORM_FLOOR, Target, adaptive_rule, budget_rounds
from stats.optimal_design import adjacent_oracle_design
from stats.study_simulation import (
    StudyAssumptions,
    bradley_terry_limit,
    run_sequential,
    simulated_truth,
    votes_to_width,
)

WIDTH_ELO = 50.0
# ``judges.services.budget.BUDGET_RULE``: the study allocator's rule for adjacent separation.
BUDGET_RULE = adaptive_rule("adjacent")
BOOTSTRAP = 1000
CALLS_PER_COMPARISON = 2  # both orders
COMPARISONS_PER_PAIR = 400  # the furthest the rounds go
UNFLOORED_UP_TO = 10  # systems: the oracle without a floor solves the full problem


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--systems", default="10,20")
    parser.add_argument("--oracle-only", action="store_true", help="only the oracle bound")
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(20261203)
    print(f"{'M':>3s} {'rule':9s} {'calls':>8s} {'interval':>19s} {'x uniform':>9s} {'interval':>15s}")
    for m in (int(x) for x in args.systems.split(",")):
        k_pairs = m * (m - 1) // 2
        seeds = [3000 + i for i in range(args.seeds)]
        judge = StudyAssumptions(n_systems=m, n_raters=1, rater_noise=0.0, sloppy_share=0.0, tie_rate=0.05)
        truth = simulated_truth(judge, seeds)
        looks = CALLS_PER_COMPARISON * np.array(budget_rounds(k_pairs, COMPARISONS_PER_PAIR * k_pairs))
        oracle = []
        for floor in (UNIFORM_FLOOR, 0.0) if m <= UNFLOORED_UP_TO else (UNIFORM_FLOOR,):
            theta = bradley_terry_limit(truth)
            ratio = np.array([adjacent_oracle_design(row, floor=floor).ratio for row in theta])
            lo, hi = np.percentile(ratio, [2.5, 97.5])
            oracle.append(f"floor {floor:.2f}: {np.median(ratio):.2f} x [{lo:.2f}, {hi:.2f}]")
        print(f"{m:3d} oracle    " + "; ".join(oracle))
        if args.oracle_only:
            continue
        target = Target(kind="adjacent", width_elo=WIDTH_ELO)
        calls = {}
        for rule in ("uniform", BUDGET_RULE):
            run = run_sequential(truth, rule, target, looks, seed=m, floor=UNIFORM_FLOOR)
            calls[rule] = votes_to_width(run.votes, run.max_adjacent_width, WIDTH_ELO)
        resamples = rng.integers(0, len(seeds), size=(BOOTSTRAP, len(seeds)))
        boot = {rule: np.median(values[resamples], axis=1) for rule, values in calls.items()}
        base = float(np.median(calls["uniform"]))
        for rule, values in calls.items():
            point = float(np.median(values))
            lo, hi = np.percentile(boot[rule], [2.5, 97.5])
            ratio = boot[rule] / boot["uniform"]
            rlo, rhi = np.percentile(ratio, [2.5, 97.5])
            label = "adaptive" if rule == BUDGET_RULE else rule
            print(
                f"{m:3d} {label:9s} {point:8.0f} [{lo:8.0f}, {hi:8.0f}] {point / base:9.2f} [{rlo:6.2f}, {rhi:6.2f}]"
            )
    print(
        f"(calls until every adjacent 95 % width < {WIDTH_ELO:.0f} Elo, median of {args.seeds} seeds; "
        f"rule {BUDGET_RULE}, floor {UNIFORM_FLOOR}); elapsed {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
