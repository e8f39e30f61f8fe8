"""Benchmark of the docs/protocol.md "Human reference and agreement" agreement report on a paper-sized
synthetic study.

Paper-sized: 1,872 comparisons in 8 blocks of 234, 33 raters (5,5,5,5,5,4,2,2 per block), each
rater judging its block's 234 comparisons plus 6 hidden repeats (7,722 main + 198 repeat
annotations), 10 systems, three axes. Times ``agreement_report`` with 2,000 resamples (target
< 10 s) and a naive per-resample loop (expanded data, the ``krippendorff`` package and a
per-resample κ / exact agreement) on a few resamples, extrapolated to 2,000.

Run: .venv/bin/python benchmarks/bench_agreement.py [--resamples 2000] [--naive 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stats.agreement import (
    ORDINAL_VALUE,
    agreement_report,
    bootstrap_agreement,
    exact_agreement,
    fleiss_kappa,
    validate_votes,
)
from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, comparison_weights

RATERS_PER_BLOCK = (5, 5, 5, 5, 5, 4, 2, 2)
BLOCK_SIZE = 234
COMPARISONS_PER_PAGE = 3
REPEATS = 6
N_SYSTEMS = 10
AXES = ("GLOBAL_LAYOUT_FIDELITY", "TEXT_CONTENT", "MEDIA_PLACEMENT")


def make_synthetic_votes(seed: int = 20260830) -> pd.DataFrame:
    """A paper-sized synthetic votes frame with the columns ``agreement_report`` takes."""
    rng = np.random.default_rng(seed)
    systems = [f"sys{m:02d}" for m in range(N_SYSTEMS)]
    theta = rng.normal(0.0, 0.8, N_SYSTEMS)
    rows: list[dict[str, object]] = []
    rater_no = 0
    for block, n_raters in enumerate(RATERS_PER_BLOCK):
        n_pages = BLOCK_SIZE // COMPARISONS_PER_PAGE
        comps = []
        for k in range(BLOCK_SIZE):
            page = f"p{block}_{k // COMPARISONS_PER_PAGE:03d}"
            a, b = rng.choice(N_SYSTEMS, size=2, replace=False)
            p_true = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
            has_media = (k // COMPARISONS_PER_PAGE) % 2 == 0
            comps.append((f"c{block}_{k:03d}", page, systems[a], systems[b], p_true, has_media))
        assert len({c[1] for c in comps}) == n_pages
        for j in range(n_raters):
            rater = f"r{rater_no:02d}"
            rater_no += 1
            bias = rng.normal(0.0, 0.3)
            answers: dict[str, tuple[str, bool]] = {}
            for k, (comp, page, sa, sb, p_true, has_media) in enumerate(comps):
                swapped = (j + k) % 2 == 1
                label = _draw_label(rng, p_true, swapped, bias)
                answers[comp] = (label, swapped)
                rows.append(_row(rng, comp, page, block, rater, label, swapped, False, sa, sb, has_media))
            for k in rng.choice(BLOCK_SIZE, size=REPEATS, replace=False):
                comp, page, sa, sb, p_true, has_media = comps[k]
                label = (
                    answers[comp][0]
                    if rng.random() < 0.75
                    else _draw_label(rng, p_true, answers[comp][1], bias)
                )
                rows.append(
                    _row(rng, comp, page, block, rater, label, answers[comp][1], True, sa, sb, has_media)
                )
    return pd.DataFrame(rows)


def _draw_label(rng: np.random.Generator, p_true: float, swapped: bool, bias: float) -> str:
    u = rng.random()
    if u < 0.02:
        return "CANNOT_JUDGE"
    if u < 0.17:
        return "TIE"
    # A rater's left-side bias shifts the log-odds towards the left candidate.
    logit = np.log(p_true / (1 - p_true)) + (-bias if swapped else bias)
    return "A" if rng.random() < 1.0 / (1.0 + np.exp(-logit)) else "B"


def _row(
    rng: np.random.Generator,
    comp: str,
    page: str,
    block: int,
    rater: str,
    label: str,
    swapped: bool,
    is_repeat: bool,
    sa: str,
    sb: str,
    has_media: bool,
) -> dict[str, object]:
    centre = {"A": 1.0, "B": -1.0, "TIE": 0.0, "CANNOT_JUDGE": 0.0}[label]
    row: dict[str, object] = {
        "comparison": comp,
        "page": page,
        "block": f"b{block}",
        "rater": rater,
        "label": label,
        "is_repeat": is_repeat,
        "swapped": swapped,
        "confidence": int(rng.integers(1, 6)),
        "system_a": sa,
        "system_b": sb,
    }
    for axis in AXES:
        if axis == "MEDIA_PLACEMENT" and not has_media:
            row[f"axis:{axis}"] = np.nan
        else:
            row[f"axis:{axis}"] = float(np.clip(np.round(centre + rng.normal(0, 0.8)), -2, 2))
    return row


def naive_bootstrap(votes: pd.DataFrame, *, resamples: int, seed: int) -> np.ndarray:
    """Per-resample loop: expand the resampled comparisons into reliability data, call the packages.

    Returns (resamples, 4): exact agreement, κ, α per resample (the same W as the report) and the
    largest absolute difference from the vectorized ``bootstrap_agreement`` on that W.
    """
    table = validate_votes(votes)
    main = table.main
    comp_info = main.groupby("comparison", sort=True)[["page", "block"]].first()
    comps = comp_info.index.tolist()
    comp_index = {c: i for i, c in enumerate(comps)}
    raters = sorted(set(main["rater"]))
    rater_index = {r: i for i, r in enumerate(raters)}
    reliability = np.full((len(raters), len(comps)), np.nan)
    valid = main[main["label"].isin(list(ORDINAL_VALUE))]
    reliability[
        valid["rater"].map(rater_index).to_numpy(), valid["comparison"].map(comp_index).to_numpy()
    ] = valid["label"].map(ORDINAL_VALUE).to_numpy(dtype=float)
    units = bootstrap_units(comp_info["page"].tolist(), comp_info["block"].tolist())
    counts_w = bootstrap_page_blocks(units, resamples=resamples, seed=seed)
    out = np.empty((resamples, 4))
    for r in range(resamples):
        take = np.repeat(np.arange(len(comps)), counts_w[r, units.unit_of])
        data = reliability[:, take]
        value_counts = np.stack([(data == v).sum(axis=0) for v in (0, 1, 2)], axis=1)
        out[r, 0] = exact_agreement(value_counts)
        out[r, 1] = fleiss_kappa(value_counts)
        out[r, 2] = krippendorff.alpha(data, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    # Check against the vectorized path on the same count matrix (not timed separately).
    counts = np.stack([(reliability == v).sum(axis=0) for v in (0, 1, 2)], axis=1)
    boot = bootstrap_agreement(counts, comparison_weights(units, counts_w))
    vectorized = np.stack([boot.exact_agreement, boot.fleiss_kappa, boot.krippendorff_alpha_ordinal], axis=1)
    out[:, 3] = np.abs(vectorized - out[:, :3]).max(axis=1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--naive", type=int, default=100, help="resamples for the naive loop (extrapolated)")
    parser.add_argument("--seed", type=int, default=20260830)
    args = parser.parse_args()

    t0 = time.perf_counter()
    votes = make_synthetic_votes()
    t_gen = time.perf_counter() - t0
    n_main = int((~votes["is_repeat"]).sum())
    print(
        f"synthetic study: {votes['comparison'].nunique()} comparisons, {votes['block'].nunique()} blocks, "
        f"{votes['rater'].nunique()} raters, {n_main} main + {int(votes['is_repeat'].sum())} repeat annotations, "
        f"{len(set(votes['system_a']) | set(votes['system_b']))} systems (generated in {t_gen:.2f} s)"
    )

    t0 = time.perf_counter()
    result = agreement_report(votes, resamples=args.resamples, seed=args.seed)
    t_report = time.perf_counter() - t0
    d = result.to_dict()
    print(f"agreement_report, {args.resamples} resamples: {t_report:.2f} s (target < 10 s)")
    print(
        f"  exact agreement {d['exact_agreement']['value']:.4f} {d['exact_agreement']['ci95']}, "
        f"kappa {d['fleiss_kappa']['value']:.4f} {d['fleiss_kappa']['ci95']}, "
        f"alpha {d['krippendorff_alpha_ordinal']['value']:.4f} {d['krippendorff_alpha_ordinal']['ci95']}"
    )
    print(
        f"  LORO min spearman {d['leave_one_rater_out']['min_spearman']:.4f}, "
        f"max rank movement {d['leave_one_rater_out']['max_rank_movement']}"
    )

    t0 = time.perf_counter()
    naive = naive_bootstrap(votes, resamples=args.naive, seed=args.seed)
    t_naive = time.perf_counter() - t0
    t_naive_full = t_naive * args.resamples / args.naive
    print(
        f"naive per-resample loop: {t_naive:.2f} s for {args.naive} resamples -> "
        f"{t_naive_full:.1f} s extrapolated to {args.resamples}; "
        f"ratio naive/report = {t_naive_full / t_report:.1f}x"
    )
    print(f"  naive vs vectorized on the same resamples: max |difference| = {naive[:, 3].max():.2e}")


if __name__ == "__main__":
    main()
