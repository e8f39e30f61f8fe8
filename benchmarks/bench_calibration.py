"""Benchmark of the docs/protocol.md "Judges and calibration" calibration maths on paper-sized data.

1,872 comparisons in 8 blocks of 234 (pages carrying 1–3 comparisons per block), 10 systems,
human votes per block 5,5,5,5,5,4,2,2 (docs/protocol.md "Planning the human study"), 5 judges from 3 vendor
families × 2 orders × 2 repeats (37,440 outputs, ~1 % invalid), full ``calibrate`` with 5,000 page-block
resamples (proxy alignment, ranking Spearman interval, committee audit).

Run: .venv/bin/python benchmarks/bench_calibration.py   (target: < 5 s for the calibration)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.judge_weights import calibrate

LABELS = np.array(["B", "TIE", "A"])
JUDGES = {"opus": "anthropic", "sonnet": "anthropic", "gemini": "google", "sol": "openai", "terra": "openai"}
JUDGE_NOISE = {"opus": 0.6, "sonnet": 0.55, "gemini": 0.3, "sol": 0.45, "terra": 0.45}


def simulate(seed: int = 7, *, blocks: int = 8, block_size: int = 234, n_systems: int = 10):
    """Synthetic human reference + judge outputs shaped like the paper's human study."""
    rng = np.random.default_rng(seed)
    raters = [5, 5, 5, 5, 5, 4, 2, 2][:blocks] + [3] * max(0, blocks - 8)
    skill = rng.normal(0, 1, n_systems)
    rows, outputs = [], []
    cid = 0
    for blk in range(blocks):
        page = 0
        for _ in range(block_size):
            if rng.random() < 0.5:
                page += 1
            a, b = rng.choice(n_systems, 2, replace=False)
            latent = skill[a] - skill[b] + rng.normal(0, 0.7)
            q = 1 / (1 + np.exp(-latent))
            n = raters[blk]
            u = rng.random(n)
            labels = np.where(u < 0.15, 1, np.where(rng.random(n) < q, 2, 0))
            n_b, n_t, n_a = (labels == 0).sum(), (labels == 1).sum(), (labels == 2).sum()
            comp = f"c{cid:05d}"
            cid += 1
            rows.append(
                {
                    "comparison": comp,
                    "page": f"b{blk}-p{page}",
                    "block": f"PAPER-0{blk + 1}",
                    "h": (n_a + 0.5 * n_t) / n,
                    "n_valid": n,
                    "n_A": n_a,
                    "n_T": n_t,
                    "n_B": n_b,
                    "system_a": f"s{a}",
                    "system_b": f"s{b}",
                }
            )
            for judge, noise in JUDGE_NOISE.items():
                for order in ("primary", "swapped"):
                    for rep in (0, 1):
                        if rng.random() < 0.01:
                            outputs.append(
                                {
                                    "comparison": comp,
                                    "judge": judge,
                                    "order": order,
                                    "repeat": rep,
                                    "status": "invalid",
                                    "winner": None,
                                }
                            )
                            continue
                        z = latent + rng.normal(0, noise)
                        lab = 2 if z > 0.25 else (0 if z < -0.25 else 1)
                        outputs.append(
                            {
                                "comparison": comp,
                                "judge": judge,
                                "order": order,
                                "repeat": rep,
                                "status": "valid",
                                "winner": LABELS[lab],
                            }
                        )
    return pd.DataFrame(outputs), pd.DataFrame(rows)


def main() -> None:
    t0 = time.perf_counter()
    outputs, human = simulate()
    t1 = time.perf_counter()
    result = calibrate(outputs, human, resamples=5000, seed=20260830, pilot_size=320, families=JUDGES)
    t2 = time.perf_counter()
    report = result.to_dict()
    t3 = time.perf_counter()
    print(f"data: {len(human)} comparisons, {len(outputs)} judge outputs (simulated in {t1 - t0:.2f} s)")
    print(f"calibrate (5,000 resamples): {t2 - t1:.2f} s   to_dict: {(t3 - t2) * 1000:.1f} ms")
    print(f"n_comparisons={report['n_comparisons']} n_excluded={report['n_excluded']}")
    print("coefficients:", {k: round(v, 4) for k, v in report["coefficients"].items()})
    cv = report["cv"]
    print(
        f"brier={cv['brier']['value']:.4f} {cv['brier']['ci95']}  mae={cv['mae']['value']:.4f} {cv['mae']['ci95']}"
    )
    print(f"spearman={cv['spearman_ranking']['value']:.3f} {cv['spearman_ranking']['ci95']}")
    for c in report["committees"]:
        print(
            "committee",
            "+".join(c["judges"]),
            c["pilot"],
            {k: c["holdout"][k] for k in ("brier", "coverage", "rank")},
        )
    print("target < 5 s:", "OK" if t2 - t1 < 5 else "MISSED")
    t4 = time.perf_counter()
    calibrate(
        outputs,
        human,
        resamples=5000,
        seed=20260830,
        pilot_size=320,
        families=JUDGES,
        committee_resamples=10_000,
    )
    t5 = time.perf_counter()
    print(f"calibrate (5,000 resamples, committee audit 10,000 as in the paper): {t5 - t4:.2f} s")
    t6 = time.perf_counter()
    calibrate(
        outputs, human, resamples=5000, seed=20260830, pilot_size=320, families=JUDGES, ranking_interval=False
    )
    t7 = time.perf_counter()
    print(f"calibrate (5,000 resamples, no ranking-Spearman interval): {t7 - t6:.2f} s")


if __name__ == "__main__":
    main()
