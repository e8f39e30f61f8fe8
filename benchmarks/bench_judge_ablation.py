"""Benchmark of the nested judge-subset ablation (paper B.4) and the Davidson leaderboard bootstrap
on paper-sized data.

Ablation: 1,872 comparisons in 8 blocks (pages of 1–2 comparisons), 5 judges (31 subsets),
overall and axis evidence, valid human votes 5,5,5,5,5,4,2,2 per block, the default shrinkage
grid (6 values) and 10,000 page-block resamples (the paper's count). No baseline: the figure is
reported (the paper gives none).

Davidson: 10 systems, 10,000 comparisons on 1,113 pages, 2,000 resamples
(docs/protocol.md "Deployment leaderboard"'s paper sizes), against Bradley–Terry's batched bootstrap on the
same data.

Run: .venv/bin/python benchmarks/bench_judge_ablation.py   (figures reported; no target)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.bootstrap import bootstrap_units
from stats.bradley_terry import bootstrap_bradley_terry
from stats.davidson import bootstrap_davidson
from stats.judge_ablation import judge_ablation


def ablation_data(seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    n = 1872
    latent = rng.normal(0, 1, n)
    votes = np.repeat([5, 5, 5, 5, 5, 4, 2, 2], n // 8).astype(float)
    h = np.clip(0.5 + 0.25 * latent + rng.normal(0, 0.15, n), 0, 1)
    noise = [0.25, 0.35, 0.3, 0.45, 0.5]
    overall = np.stack([np.round(4 * np.clip(0.5 + 0.25 * latent + rng.normal(0, s, n), 0, 1)) / 4 for s in noise], 1)
    axis = np.stack([np.clip(0.5 + 0.2 * latent + rng.normal(0, s, n), 0, 1) for s in noise], 1)
    blocks = [f"b{i // (n // 8)}" for i in range(n)]
    pages = [f"p{i // 2}" for i in range(n)]
    return {
        "overall": overall, "axis": axis, "h": h, "valid_votes": votes, "blocks": blocks, "pages": pages,
        "judges": ["opus", "sonnet", "gemini", "sol", "terra"],
    }


def main() -> None:
    data = ablation_data()
    t0 = time.perf_counter()
    result = judge_ablation(**data, costs=[5.0, 3.0, 2.0, 2.5, 1.0], cost_unit="relative", resamples=10_000, seed=20260830)
    elapsed = time.perf_counter() - t0
    d = result.to_dict()
    print(f"judge_ablation: 31 subsets × 8 outer folds × 7 inner folds × 6 λ, 10,000 resamples: {elapsed:.2f} s")
    for s in d["sizes"]:
        print(f"  size {s['size']}: Brier {s['brier']['value']:.4f} {s['brier']['ci95']}")
    print("  one-SE choices:", sorted({"+".join(c["judges"]) for c in d["one_se"]["selected"]}))

    rng = np.random.default_rng(1)
    m, n = 10, 10_000
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    strength = np.linspace(1, -1, m)
    p = np.clip(0.5 + 0.3 * (strength[a] - strength[b]) + rng.normal(0, 0.2, n), 0, 1)
    units = bootstrap_units([f"pg{i % 1113}" for i in range(n)])
    t0 = time.perf_counter()
    bootstrap_davidson(a, b, p, m, units, resamples=2000, seed=20260831)
    dav = time.perf_counter() - t0
    t0 = time.perf_counter()
    bootstrap_bradley_terry(a, b, p, m, units, resamples=2000, seed=20260831)
    bt = time.perf_counter() - t0
    print(f"Davidson bootstrap, 10 systems, 10,000 comparisons, 2,000 resamples: {dav:.2f} s "
          f"(baseline: Bradley–Terry batched bootstrap {bt:.2f} s)")


if __name__ == "__main__":
    main()
