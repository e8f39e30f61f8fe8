"""Benchmark of adaptive allocation and the stopping rule (docs/protocol.md "Adaptive allocation and stopping").

Run:  cd /work/main && .venv/bin/python benchmarks/bench_adaptive.py [--seeds 80] [--quick]

Seeded synthetic studies from the project's simulator (``stats.study_simulation``): 10 and 30
systems with true scores at the normal quantiles of a 100-Elo standard deviation, a 10 % tie rate,
a rater panel with log-normal noise (sd 0.3 of the log scale, 10 % sloppy raters three times
noisier) and position biases (sd 0.25 logit), every pair shown in both orders. Each case runs 2 × N
seeds: the first N (*tuning*) pick the adaptive rule and the floor, the other N (*held out*) are
what is reported, so no reported figure was tuned on its own seeds.

Targets, as votes needed:
(a) top-3 identified with probability ≥ 0.9: the share of seeds whose fitted top-3 set is the true
    one, made monotone in the votes (isotonic), first reaches 0.9;
(b) every adjacent pair of the fitted order has a 95 % interval of its score difference narrower
    than 50 Elo points, and stays so: the median over seeds of the votes at which that happens.
Intervals are 95 % percentile intervals over 1,000 bootstrap resamples of the seeds; ratios to
uniform are paired (the same resampled seeds for both rules).

Baselines: ``uniform`` (the fixed design: every pair's count equal ±1, what a study does today) and
``random`` (uniformly random pairs). Adaptive rules: ``shrinkage`` (Chatbot Arena), ``information``
(targeted expected information gain), ``thompson`` and ``design`` (greedy optimal design of the
round on the target's contrasts); every adaptive round has a uniform floor of 25 %. The tuning half
picks one rule per target (geometric mean over the sizes of the ratio to uniform). Stopping rule: the share of seeds (held out, every rule pooled) that ever declared a wrong
top-3, against its nominal α = 0.05, with a Clopper–Pearson 95 % upper bound.

Oracle bound for target (b) (``stats.optimal_design``): per held-out seed, the pair shares that
need the fewest votes for every adjacent 95 % width < 50 Elo *given the true strengths* — the
Bradley–Terry limit θ* of the seed's answer probabilities (what the fit converges to), with the
fit's information per vote — as a share of the votes of the uniform design (asymptotic, so the
same ratio for any width); median and 2.5–97.5 % range over the seeds, with the protocol's 25 %
uniform floor and without a floor (the latter on 30 systems for the first held-out seed only:
about 3 CPU minutes per seed, so the first one). ``--oracle-only`` prints this part alone.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta as beta_dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.allocation import ADAPTIVE_RULE_BY_TARGET, ADAPTIVE_RULES, UNIFORM_FLOOR, Z95, Target
from stats.bradley_terry import SCORE_SCALE
from stats.optimal_design import adjacent_oracle_design
from stats.stopping import STOPPING_ALPHA
from stats.study_simulation import (
    SequentialRun,
    StudyAssumptions,
    bradley_terry_limit,
    look_grid,
    run_sequential,
    simulated_truth,
    votes_to_share,
    votes_to_width,
)

WIDTH_ELO = 50.0
TOP_K = 3
LEVEL = 0.9
BOOTSTRAP = 1000
STOP_PER_PAIR = {10: 300.0, 30: 150.0}
#: Seeds of the 30-system case whose oracle without a floor is computed (the full-support solve).
UNFLOORED_SEEDS_30 = 1


def _interval(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if len(finite) < 0.975 * len(values):
        return (float(np.percentile(finite, 2.5)) if len(finite) else math.inf, math.inf)
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def _fmt(x: float) -> str:
    return "    >max" if math.isinf(x) else f"{x:8.0f}"


def _fmt_ratio(x: float) -> str:
    return "   n/a" if not math.isfinite(x) else f"{x:6.2f}"


def target_a(run: SequentialRun, idx: np.ndarray) -> float:
    return votes_to_share(run.votes, run.top_correct[:, idx], LEVEL)


def target_b(run: SequentialRun, idx: np.ndarray) -> float:
    return float(np.median(votes_to_width(run.votes, run.max_adjacent_width[:, idx], WIDTH_ELO)))


def summarize(runs: dict[str, SequentialRun], metric, n: int, rng: np.random.Generator) -> dict[str, tuple]:
    """Per rule: point value, interval, ratio to uniform and its paired interval."""
    resamples = rng.integers(0, n, size=(BOOTSTRAP, n))
    boot = {rule: np.array([metric(run, r) for r in resamples]) for rule, run in runs.items()}
    point = {rule: metric(run, np.arange(n)) for rule, run in runs.items()}
    out = {}
    for rule in runs:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = boot[rule] / boot["uniform"]
        ratio = point[rule] / point["uniform"] if math.isfinite(point["uniform"]) else math.nan
        out[rule] = (
            point[rule],
            _interval(boot[rule]),
            ratio,
            _interval(np.nan_to_num(ratios, nan=math.inf)),
        )
    return out


def run_case(m: int, seeds: list[int], rules_by_target: dict[str, tuple[str, ...]], floor: float) -> dict:
    truth = simulated_truth(StudyAssumptions(n_systems=m), seeds)
    looks = look_grid(m, stop_per_pair=STOP_PER_PAIR[m])
    runs: dict[str, dict[str, SequentialRun]] = {"top_k": {}, "adjacent": {}}
    for rule in ("uniform", "random", "shrinkage"):  # blind to the target: one run serves both
        run = run_sequential(
            truth, rule, Target(kind="top_k", k=TOP_K, width_elo=WIDTH_ELO), looks, seed=m, floor=floor
        )
        runs["top_k"][rule] = runs["adjacent"][rule] = run
    for kind, rules in rules_by_target.items():
        target = Target(kind=kind, k=TOP_K, width_elo=WIDTH_ELO)
        for rule in rules:
            if rule not in runs[kind]:
                runs[kind][rule] = run_sequential(truth, rule, target, looks, seed=m, floor=floor)
    return runs


def report_oracle(sizes: tuple[int, ...], seeds: list[int], quick: bool) -> None:
    v_star = (WIDTH_ELO / (2.0 * Z95 * SCORE_SCALE)) ** 2
    print(
        f"\n== oracle bound, target (b): fewest votes of any fixed design given the true strengths, "
        f"x uniform; seeds {seeds[0]}..{seeds[-1]} =="
    )
    for m in sizes:
        theta = bradley_terry_limit(simulated_truth(StudyAssumptions(n_systems=m), seeds))
        for floor in (UNIFORM_FLOOR, 0.0):
            count = len(seeds) if (m < 30 or floor > 0 or quick) else min(len(seeds), UNFLOORED_SEEDS_30)
            cpu, wall = time.process_time(), time.perf_counter()
            designs = [adjacent_oracle_design(theta[r], floor=floor) for r in range(count)]
            ratio = np.array([d.ratio for d in designs])
            lower = np.array([d.ratio_lower_bound for d in designs])
            uniform_votes = np.array([d.uniform_worst_variance / v_star for d in designs])
            print(
                f"  M = {m:2d}, floor {floor:.2f}: oracle {np.median(ratio):.3f} x uniform "
                f"[{np.percentile(ratio, 2.5):.3f}, {np.percentile(ratio, 97.5):.3f}] over {count} seeds; "
                f"certified >= {lower.min():.3f}; uniform's asymptotic votes {np.median(uniform_votes):.0f}; "
                f"{time.process_time() - cpu:.0f} s CPU, {time.perf_counter() - wall:.0f} s wall"
            )


def report_debias(
    n: int,
    rounds: tuple[int, ...],
    first_seed: int = 3000,
    m: int = 10,
    start_votes: int | None = None,
    clickers: float = 0.0,
) -> None:
    """Issue 39: bias and coverage of the adaptive leaderboard when the study adapts at serve time.

    Held-out seeds (``first_seed``.., never used to choose the estimator). The study starts with
    ``start_votes`` of the fixed design (default 2 votes per pair), then chooses its next votes by posterior sampling (25 %
    floor) in rounds of ``rounds`` votes (a round of 20 is close to choosing each comparison when a
    rater asks). Uniform is played in rounds of 300 (its allocation does not depend on them).
    Votes to top-3 at P >= 0.9 read the allocation's own fit (what the stopping rule reads).
    At that size (uniform at the same votes), per true top-3 system: mean error against the
    Bradley–Terry limit θ* (Elo; ± its standard error over seeds), and the share of the true
    top-4 whose 95 % interval covers θ*: the plain fit (model intervals), the inverse-propensity-
    weighted fit (sandwich intervals) and the same with its parametric-bootstrap bias correction
    (``stats.adaptive_estimation``; what the leaderboard of an adaptive study reports).
    """
    from stats.adaptive_estimation import WeightedFit, bias_corrected
    from stats.study_simulation import run_rounds

    seeds = [first_seed + i for i in range(n)]
    truth = simulated_truth(StudyAssumptions(n_systems=m, clicker_share=clickers), seeds)
    limit = bradley_terry_limit(truth)
    limit = limit - limit.mean(axis=1, keepdims=True)
    order = np.argsort(-truth.elo, axis=1, kind="stable")[:, :4]
    rows = np.arange(n)[:, None]
    target = Target(kind="top_k", k=TOP_K)
    k_pairs = m * (m - 1) // 2
    start = 2 * k_pairs if start_votes is None else start_votes
    total = max(60 * k_pairs, start + 30 * k_pairs)

    def figures(theta: np.ndarray, se: np.ndarray) -> str:
        theta = theta - theta.mean(axis=1, keepdims=True)
        err = (theta - limit)[rows, order[:, :3]] * SCORE_SCALE
        bias, sem = err.mean(axis=0), err.std(axis=0, ddof=1) / math.sqrt(n)
        cover = float((np.abs(theta - limit) <= Z95 * se)[rows, order].mean())
        ranks = ", ".join(f"{b:+5.1f}±{e:.1f}" for b, e in zip(bias, sem, strict=True))
        return f"bias top-3 [{ranks}] mean {bias.mean():+5.1f}; coverage top-4 {cover:.3f}"

    started = time.perf_counter()
    uniform = run_rounds(truth, "uniform", target, start_votes=start, round_votes=300,
                         total_votes=total, seed=m)
    needed_u = votes_to_share(uniform.votes, uniform.top_correct, LEVEL)
    print(
        f"\n== debiased leaderboard at serve-time granularity: M = {m}, {n} held-out seeds "
        f"({seeds[0]}..{seeds[-1]}); {clickers:.0%} random clickers; uniform start {start} votes ({start / k_pairs:.1f} per pair); uniform needs {needed_u:.0f} votes for P(top-{TOP_K}) >= {LEVEL} =="
    )
    for size in rounds:
        run = run_rounds(truth, ADAPTIVE_RULE_BY_TARGET["top_k"], target, start_votes=start,
                         round_votes=size, total_votes=total, seed=m)
        needed = votes_to_share(run.votes, run.top_correct, LEVEL)
        t = min(int(np.searchsorted(run.votes, needed)), len(run.votes) - 1)
        tu = min(int(np.searchsorted(uniform.votes, run.votes[t])), len(uniform.votes) - 1)
        cov = np.zeros((n, m, m))
        cov[:, np.arange(m), np.arange(m)] = run.ipw_se[t] ** 2
        corrected = bias_corrected(
            WeightedFit(run.ipw_theta[t], cov), run.groups[: t + 1], tie_rate=0.10, resamples=200,
            rng=np.random.default_rng([39, m, size]),
        )
        fitted = np.sort(np.argsort(-corrected.theta, axis=1, kind="stable")[:, :TOP_K], axis=1)
        debiased_top = float(np.all(fitted == truth.top(TOP_K), axis=1).mean())
        needed_ipw = votes_to_share(run.votes, run.ipw_top_correct, LEVEL)
        levels = []
        for level in (0.7, 0.75, 0.8, 0.85, 0.9):
            a_votes = votes_to_share(run.votes, run.top_correct, level)
            u_votes = votes_to_share(uniform.votes, uniform.top_correct, level)
            ratio = f"{a_votes / u_votes:.2f} x" if math.isfinite(a_votes) and math.isfinite(u_votes) else "-"
            levels.append(
                f"P >= {level}: {_fmt(a_votes).strip()} / {_fmt(u_votes).strip()} = {ratio}"
            )
        print(f"  rounds of {size:3d} votes, adaptive / uniform votes (inf: not by {total}): " + "; ".join(levels))
        print(
            f"  rounds of {size:3d} votes: top-{TOP_K} at P >= {LEVEL} in {needed:.0f} votes = "
            + (f"{needed / needed_u:.2f} x uniform" if math.isfinite(needed_u) else f"uniform not reached by {total}")
            + " (the allocation's fit); weighted fit's own order: "
            f"{needed_ipw:.0f} votes; at {run.votes[t]} votes "
            f"(uniform at {uniform.votes[tu]}):"
        )
        print(f"    uniform, plain fit           {figures(uniform.theta[tu], uniform.se[tu])}")
        print(f"    adaptive, plain fit          {figures(run.theta[t], run.se[t])}")
        print(f"    adaptive, weighted           {figures(run.ipw_theta[t], run.ipw_se[t])}")
        widened = np.sqrt(np.diagonal(corrected.covariance, axis1=1, axis2=2))
        print(
            f"    adaptive, weighted corrected {figures(corrected.theta, widened)}; "
            f"its top-{TOP_K} right in {debiased_top:.2f} of seeds"
        )
        print(f"      (with the sandwich alone:   {figures(corrected.theta, run.ipw_se[t])})")
    print(f"  elapsed {time.perf_counter() - started:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=80, help="seeds per half (tuning, held out); default 80")
    parser.add_argument("--quick", action="store_true", help="10 systems only, 25 seeds per half")
    parser.add_argument("--oracle-only", action="store_true", help="only the oracle bound of target (b)")
    parser.add_argument(
        "--debias-only",
        action="store_true",
        help="only the debiased leaderboard at serve-time granularity (issue 39; --seeds held-out seeds)",
    )
    parser.add_argument(
        "--debias-rounds",
        default="20,300",
        help="with --debias-only: votes per re-allocation round, comma-separated (1: every trial at serve time)",
    )
    parser.add_argument(
        "--start-votes",
        type=int,
        default=None,
        help="with --debias-only: votes of the uniform start (default 2 per pair; a block at the "
        "defaults holds 1,170)",
    )
    parser.add_argument(
        "--clickers",
        type=float,
        default=0.0,
        help="with --debias-only: share of votes from random A/B clickers (default 0)",
    )
    args = parser.parse_args()
    if args.debias_only:
        report_debias(
            args.seeds,
            tuple(int(r) for r in args.debias_rounds.split(",")),
            start_votes=args.start_votes,
            clickers=args.clickers,
        )
        return 0
    n = 25 if args.quick else args.seeds
    sizes = (10,) if args.quick else (10, 30)
    if args.oracle_only:
        started = time.perf_counter()
        report_oracle(sizes, [2000 + i for i in range(n)], args.quick)
        print(f"\nelapsed {time.perf_counter() - started:.0f} s")
        return 0
    rng = np.random.default_rng(20261203)
    all_rules = {kind: ("information", "thompson", "design") for kind in ("top_k", "adjacent")}
    started = time.perf_counter()

    # ---- tuning half: pick the adaptive rule per target (geometric mean of ratio to uniform over sizes)
    print(f"== tuning half: {n} seeds per case (seeds 1000..{1000 + n - 1}) ==")
    scores: dict[tuple[str, str], list[float]] = {
        (k, r): [] for k in ("top_k", "adjacent") for r in ADAPTIVE_RULES
    }
    tuning_runs = {}
    for m in sizes:
        runs = run_case(m, [1000 + i for i in range(n)], all_rules, UNIFORM_FLOOR)
        tuning_runs[m] = runs
        for kind, metric in (("top_k", target_a), ("adjacent", target_b)):
            base = metric(runs[kind]["uniform"], np.arange(n))
            for rule in ADAPTIVE_RULES:
                value = metric(runs[kind][rule], np.arange(n))
                log_ratio = (
                    math.log(value / base) if math.isfinite(value) and math.isfinite(base) else math.inf
                )
                scores[kind, rule].append(log_ratio)
    geo = {key: math.exp(sum(v) / len(v)) for key, v in scores.items()}
    winners = {}
    for kind in ("top_k", "adjacent"):
        winners[kind] = min(ADAPTIVE_RULES, key=lambda rule, kind=kind: geo[kind, rule])
        for rule in ADAPTIVE_RULES:
            print(f"  {kind:8s} {rule:12s} geometric-mean ratio to uniform {geo[kind, rule]:.3f}")
        chosen = ADAPTIVE_RULE_BY_TARGET[kind]
        print(
            f"  {kind} winner: {winners[kind]} (stats.allocation.ADAPTIVE_RULE_BY_TARGET[{kind!r}] = {chosen!r}: "
            f"{'matches' if winners[kind] == chosen else 'DIFFERS'})"
        )
    winner = winners["top_k"]

    # Floor sweep of the winner on the tuning half (what the 25 % floor costs).
    print("  floor sweep of the winner, top-3 target, tuning half (votes to P(top-3) >= 0.9):")
    for m in sizes:
        truth = simulated_truth(StudyAssumptions(n_systems=m), [1000 + i for i in range(n)])
        looks = look_grid(m, stop_per_pair=STOP_PER_PAIR[m])
        cells = []
        for floor in (0.1, UNIFORM_FLOOR, 0.5):
            if floor == UNIFORM_FLOOR:
                run = tuning_runs[m]["top_k"][winner]
            else:
                run = run_sequential(truth, winner, Target(kind="top_k", k=TOP_K), looks, seed=m, floor=floor)
            cells.append(f"floor {floor:.2f}: {_fmt(target_a(run, np.arange(n))).strip()}")
        uniform = _fmt(target_a(tuning_runs[m]["top_k"]["uniform"], np.arange(n))).strip()
        print(f"    M = {m:2d}: " + ", ".join(cells) + f" (uniform {uniform})")

    # ---- held-out half: report
    print(
        f"\n== held-out half: {n} seeds per case (seeds 2000..{2000 + n - 1}); 95 % intervals over seeds =="
    )
    wrong = declared = total = 0
    held_runs = {}
    for m in sizes:
        runs = run_case(m, [2000 + i for i in range(n)], all_rules, UNIFORM_FLOOR)
        held_runs[m] = runs
        for kind, metric, label in (
            ("top_k", target_a, f"(a) votes until P(top-{TOP_K} right) >= {LEVEL}"),
            ("adjacent", target_b, f"(b) median votes until every adjacent 95 % width < {WIDTH_ELO:.0f} Elo"),
        ):
            print(f"\n  M = {m}, {label}; adaptive rules steered by this target")
            print(f"  {'rule':12s} {'votes':>8s} {'interval':>19s} {'x uniform':>9s} {'interval':>15s}")
            summary = summarize(runs[kind], metric, n, rng)
            for rule in ("uniform", "random", *ADAPTIVE_RULES):
                point, (lo, hi), ratio, (rlo, rhi) = summary[rule]
                mark = "  <- adaptive" if rule == winners[kind] else ""
                print(
                    f"  {rule:12s} {_fmt(point)} [{_fmt(lo)}, {_fmt(hi)}] {_fmt_ratio(ratio):>9s} "
                    f"[{_fmt_ratio(rlo)}, {_fmt_ratio(rhi)}]{mark}"
                )
            point = summary[winners[kind]][2]
            verdict = "meets" if point <= 0.6 else "MISSES"
            print(f"  target adaptive <= 0.6 x uniform: {verdict} ({point:.2f})")
        seen = set()
        for kind in ("top_k", "adjacent"):
            for run in runs[kind].values():
                if id(run) in seen:
                    continue
                seen.add(id(run))
                dec = run.declared_at >= 0
                declared += int(dec.sum())
                wrong += int((dec & ~run.declared_correct).sum())
                total += len(dec)
        stop_u = runs["top_k"]["uniform"]
        stop_w = runs["top_k"][winner]
        for name, run in (("uniform", stop_u), (winner, stop_w)):
            dec = run.declared_at >= 0
            median = np.median(run.votes[run.declared_at[dec]]) if dec.any() else math.inf
            print(
                f"  stopping rule under {name:11s}: declared top-{TOP_K} on {dec.mean():.0%} of seeds by "
                f"{run.votes[-1]} votes, median votes at declaration {_fmt(float(median)).strip()}, "
                f"wrong {int((dec & ~run.declared_correct).sum())}"
            )
    upper = float(beta_dist.ppf(0.975, wrong + 1, total - wrong)) if wrong < total else 1.0
    print(
        f"\n== stopping rule (anytime-valid normal-mixture confidence sequence, nominal alpha = {STOPPING_ALPHA}) =="
    )
    print(
        f"  held-out studies (all rules, both sizes): {total}; declared {declared}; wrong top-{TOP_K} {wrong}; "
        f"rate {wrong / total:.4f} (Clopper-Pearson 95 % upper {upper:.4f}) vs nominal {STOPPING_ALPHA}: "
        f"{'at or below' if upper <= STOPPING_ALPHA or wrong / total <= STOPPING_ALPHA else 'ABOVE'}"
    )
    report_oracle(sizes, [2000 + i for i in range(n)], args.quick)
    print(f"\nelapsed {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
