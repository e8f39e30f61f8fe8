"""Tests of the docs/protocol.md "Human reference and agreement" agreement statistics against independent
computations.

References: the ``krippendorff`` package, ``statsmodels`` (Fleiss κ, Wilson interval), scipy,
brute-force pair enumeration, Krippendorff's published 2011 example, and the
docs/protocol.md "Human reference and agreement" example.
"""

from __future__ import annotations

import itertools
import json
import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.proportion import proportion_confint

from stats.agreement import (
    ORDINAL_VALUE,
    agreement_report,
    bootstrap_agreement,
    coincidence_matrix,
    coverage,
    exact_agreement,
    fleiss_kappa,
    hidden_repeat_agreement,
    human_ranking,
    krippendorff_alpha_ordinal,
    n_agreement_pairs,
    ordinal_alpha_from_coincidences,
    reliability_to_counts,
    unanimous_share,
    unique_plurality_share,
    validate_votes,
    wilson_interval,
)
from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, comparison_weights
from stats.errors import InvalidVotes
from stats.preference import label_counts, preference_of_counts

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", §C: 4 coders × 12 units.
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
        [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
    ]
)

SPEC_KEYS = {
    "n_comparisons",
    "n_main_annotations",
    "n_valid_annotations",
    "coverage",
    "n_repeat_pairs",
    "exact_agreement",
    "fleiss_kappa",
    "krippendorff_alpha_ordinal",
    "unanimous_share",
    "unique_plurality_share",
    "hidden_repeat_agreement",
    "human_reference",
    "human_ranking",
    "leave_one_rater_out",
    "bootstrap",
}
EXTRA_KEYS = {"per_axis_alpha", "confidence_agreement", "position_bias", "rater_quality", "n_bootstrap_units"}


def random_reliability(rng: np.random.Generator, coders: int, units: int, missing: float = 0.3) -> np.ndarray:
    """Coders × units labels 0/1/2 with NaN missing, correlated within a unit."""
    truth = rng.integers(0, 3, units)
    data = np.where(rng.random((coders, units)) < 0.6, truth[None, :], rng.integers(0, 3, (coders, units)))
    return np.where(rng.random((coders, units)) < missing, np.nan, data.astype(float))


def brute_force_exact(data: np.ndarray) -> float:
    agree = pairs = 0
    for u in range(data.shape[1]):
        vals = [v for v in data[:, u] if not np.isnan(v)]
        for x, y in itertools.combinations(vals, 2):
            pairs += 1
            agree += x == y
    return agree / pairs


def spec_kappa_loop(counts: np.ndarray) -> float:
    """docs/protocol.md "Human reference and agreement" κ written as the plain loop of the formula."""
    items = [row for row in counts if row.sum() >= 2]
    p_i = [sum(n * (n - 1) for n in row) / (row.sum() * (row.sum() - 1)) for row in items]
    p_bar = sum(p_i) / len(p_i)
    total = sum(row.sum() for row in items)
    p_k = [sum(row[k] for row in items) / total for k in range(counts.shape[1])]
    p_e = sum(p * p for p in p_k)
    return (p_bar - p_e) / (1 - p_e)


# ------------------------------------------------------------------ elementary quantities


def test_coverage() -> None:
    assert coverage(9, 10) == pytest.approx(0.9)
    assert math.isnan(coverage(0, 0))
    with pytest.raises(ValueError):
        coverage(3, 2)


@pytest.mark.parametrize("seed", range(5))
def test_exact_agreement_equals_brute_force_pairs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = random_reliability(rng, 6, 40)
    counts = reliability_to_counts(data, [0, 1, 2])
    assert exact_agreement(counts) == pytest.approx(brute_force_exact(data), abs=1e-12)
    n = (~np.isnan(data)).sum(axis=0)
    assert n_agreement_pairs(counts) == int(sum(k * (k - 1) // 2 for k in n))


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_kappa_equals_statsmodels_with_equal_raters(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = random_reliability(rng, 5, 60, missing=0.0)
    counts = reliability_to_counts(data, [0, 1, 2])
    assert fleiss_kappa(counts) == pytest.approx(sm_fleiss_kappa(counts, method="fleiss"), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_kappa_unequal_raters_equals_formula_loop(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    counts = reliability_to_counts(random_reliability(rng, 6, 50, missing=0.5), [0, 1, 2])
    assert (counts.sum(axis=1) < 2).any()  # items with n_i < 2 are present and must be ignored
    assert fleiss_kappa(counts) == pytest.approx(spec_kappa_loop(counts), abs=1e-12)


def test_fleiss_kappa_undefined_is_nan() -> None:
    assert math.isnan(fleiss_kappa(np.array([[2, 0, 0], [3, 0, 0]])))  # P_e = 1
    assert math.isnan(fleiss_kappa(np.array([[1, 0, 0], [0, 0, 1]])))  # no item with n_i ≥ 2


def test_krippendorff_2011_published_example() -> None:
    # Published values (Krippendorff 2011): nominal 0.743, ordinal 0.815; checked with the package.
    assert krippendorff.alpha(KRIPPENDORFF_2011, level_of_measurement="nominal") == pytest.approx(
        0.743, abs=5e-4
    )
    package = krippendorff.alpha(
        KRIPPENDORFF_2011, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
    )
    assert package == pytest.approx(0.815, abs=5e-4)
    counts = reliability_to_counts(KRIPPENDORFF_2011, [1, 2, 3, 4, 5])
    assert krippendorff_alpha_ordinal(counts) == pytest.approx(package, abs=1e-12)
    by_hand = ordinal_alpha_from_coincidences(coincidence_matrix(counts))
    assert by_hand == pytest.approx(package, abs=1e-9)
    # The published coincidence matrix has n.. = 40 pairable values; value 3 appears 10 times.
    o = coincidence_matrix(counts)
    assert o.sum() == pytest.approx(40)
    assert o.sum(axis=0) == pytest.approx([9, 13, 10, 5, 3])
    assert o[0, 0] == pytest.approx(7) and o[0, 1] == pytest.approx(4 / 3)


@pytest.mark.parametrize("seed", range(20))
def test_hand_alpha_equals_package_on_random_data(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = random_reliability(
        rng, int(rng.integers(2, 8)), int(rng.integers(5, 80)), missing=rng.uniform(0, 0.6)
    )
    counts = reliability_to_counts(data, [0, 1, 2])
    package = krippendorff.alpha(data, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    assert ordinal_alpha_from_coincidences(coincidence_matrix(counts)) == pytest.approx(package, abs=1e-9)
    assert krippendorff_alpha_ordinal(counts) == pytest.approx(package, abs=1e-9)
    assert krippendorff_alpha_ordinal(counts, np.ones(len(counts))) == pytest.approx(package, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_weights_equal_repeating_comparisons(seed: int) -> None:
    """A comparison weight of w is the comparison appearing w times (what a resample means)."""
    rng = np.random.default_rng(seed)
    data = random_reliability(rng, 5, 30)
    counts = reliability_to_counts(data, [0, 1, 2])
    w = rng.integers(0, 4, len(counts))
    expanded = np.repeat(counts, w, axis=0)
    data_expanded = np.repeat(data, w, axis=1)
    assert exact_agreement(counts, w) == pytest.approx(exact_agreement(expanded), abs=1e-12)
    assert fleiss_kappa(counts, w) == pytest.approx(spec_kappa_loop(expanded), abs=1e-12)
    package = krippendorff.alpha(data_expanded, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    assert krippendorff_alpha_ordinal(counts, w) == pytest.approx(package, abs=1e-9)


def test_vectorized_bootstrap_equals_naive_loop() -> None:
    rng = np.random.default_rng(11)
    n_comp = 60
    data = random_reliability(rng, 5, n_comp)
    counts = reliability_to_counts(data, [0, 1, 2])
    pages = [f"p{i // 3}" for i in range(n_comp)]
    blocks = [f"b{i // 30}" for i in range(n_comp)]
    units = bootstrap_units(pages, blocks)
    w = comparison_weights(units, bootstrap_page_blocks(units, resamples=40, seed=5))
    boot = bootstrap_agreement(counts, w)
    for r in range(40):
        data_r = np.repeat(data, w[r], axis=1)
        counts_r = reliability_to_counts(data_r, [0, 1, 2])
        assert boot.exact_agreement[r] == pytest.approx(brute_force_exact(data_r), abs=1e-12)
        assert boot.fleiss_kappa[r] == pytest.approx(spec_kappa_loop(counts_r), abs=1e-12)
        package = krippendorff.alpha(data_r, level_of_measurement="ordinal", value_domain=[0, 1, 2])
        assert boot.krippendorff_alpha_ordinal[r] == pytest.approx(package, abs=1e-9)


def test_unanimous_and_unique_plurality() -> None:
    counts = np.array(
        [
            [0, 0, 3],  # unanimous, plurality
            [1, 0, 2],  # plurality A
            [1, 1, 0],  # tie between B and TIE: no unique plurality
            [0, 1, 0],  # single vote: unanimous
            [0, 0, 0],  # no valid vote: not counted
            [2, 2, 1],  # no unique plurality
        ]
    )
    assert unanimous_share(counts) == pytest.approx(2 / 5)
    assert unique_plurality_share(counts) == pytest.approx(3 / 5)
    assert math.isnan(unanimous_share(np.zeros((2, 3))))


def test_hidden_repeat_agreement_counts_cannot_judge_as_label() -> None:
    result = hidden_repeat_agreement(["A", "CANNOT_JUDGE", "TIE", "B"], ["A", "CANNOT_JUDGE", "A", "B"])
    assert (result.agree, result.n, result.value) == (3, 4, 0.75)
    assert math.isnan(hidden_repeat_agreement([], []).value)
    with pytest.raises(ValueError):
        hidden_repeat_agreement(["A"], [])


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (57, 120), (1, 1)])
def test_wilson_interval_equals_statsmodels(k: int, n: int) -> None:
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((lo, hi), abs=1e-12)


# ------------------------------------------------------------------ the votes frame and the report


def vote(comp: str, rater: str, label: str, **kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "comparison": comp,
        "page": kw.pop("page", "pg" + comp[-1]),
        "block": kw.pop("block", "b1"),
        "rater": rater,
        "label": label,
        "is_repeat": kw.pop("is_repeat", False),
        "swapped": kw.pop("swapped", False),
        "confidence": kw.pop("confidence", 3),
        "system_a": kw.pop("system_a", "s1"),
        "system_b": kw.pop("system_b", "s2"),
    }
    row.update(kw)
    return row


def small_votes() -> pd.DataFrame:
    """Hand-checkable study: 3 systems, 4 comparisons, 5 raters, 2 hidden repeats."""
    rows = []
    # c1: s1 vs s2, 3 A / 1 TIE / 1 B -> h = 0.7 (docs/protocol.md "Human reference and agreement" example).
    for r, lab in zip(["r1", "r2", "r3", "r4", "r5"], ["A", "A", "A", "TIE", "B"], strict=True):
        rows.append(vote("c1", r, lab, swapped=r in ("r2", "r4"), **{"axis:LAYOUT": 1.0}))
    # c2: s2 vs s3, 2 B / 1 CANNOT_JUDGE.
    for r, lab in zip(["r1", "r2", "r3"], ["B", "B", "CANNOT_JUDGE"], strict=True):
        rows.append(
            vote("c2", r, lab, system_a="s2", system_b="s3", swapped=r == "r2", **{"axis:LAYOUT": -1.0})
        )
    # c3: s1 vs s3, only CANNOT_JUDGE: not a compared comparison.
    rows.append(vote("c3", "r1", "CANNOT_JUDGE", system_a="s1", system_b="s3", block="b2", page="pgX"))
    # c4: s3 vs s1, 1 A / 1 B.
    rows.append(
        vote("c4", "r4", "A", system_a="s3", system_b="s1", block="b2", page="pgX", **{"axis:LAYOUT": 2.0})
    )
    rows.append(vote("c4", "r5", "B", system_a="s3", system_b="s1", block="b2", page="pgX", swapped=True))
    # Hidden repeats: r1 on c1 agrees, r3 on c2 (CANNOT_JUDGE) now says B.
    rows.append(vote("c1", "r1", "A", is_repeat=True))
    rows.append(vote("c2", "r3", "B", is_repeat=True, system_a="s2", system_b="s3"))
    frame = pd.DataFrame(rows)
    return frame


def test_validate_votes_rejects_bad_input() -> None:
    good = small_votes()
    validate_votes(good)
    with pytest.raises(InvalidVotes, match="missing column"):
        validate_votes(good.drop(columns=["rater"]))
    bad = good.copy()
    bad.loc[3, "label"] = "C"
    with pytest.raises(ValueError, match=r"label.*row 3"):
        validate_votes(bad)
    bad = good.copy()
    bad["axis:LAYOUT"] = bad["axis:LAYOUT"].astype(object)
    bad.loc[0, "axis:LAYOUT"] = 3.0
    with pytest.raises(ValueError, match="axis:LAYOUT"):
        validate_votes(bad)
    bad = good.copy()
    bad.loc[0, "confidence"] = 7
    with pytest.raises(ValueError, match="confidence"):
        validate_votes(bad)
    bad = good.copy()
    bad.loc[0, "page"] = "other"
    with pytest.raises(ValueError, match="more than one 'page'"):
        validate_votes(bad)
    bad = pd.concat([good, good.iloc[[0]]], ignore_index=True)
    with pytest.raises(ValueError, match="more than one main vote"):
        validate_votes(bad)
    bad = good.copy()
    bad["swapped"] = bad["swapped"].astype(object)
    bad.loc[0, "swapped"] = "maybe"
    with pytest.raises(ValueError, match="swapped"):
        validate_votes(bad)
    with pytest.raises(ValueError):
        agreement_report(good, resamples=0, seed=1)


def test_report_on_hand_checked_study() -> None:
    result = agreement_report(small_votes(), resamples=200, seed=1)
    d = result.to_dict()
    assert set(d) >= SPEC_KEYS
    assert d["n_comparisons"] == 3
    assert d["n_main_annotations"] == 11
    assert d["n_valid_annotations"] == 9
    assert d["coverage"] == pytest.approx(9 / 11)
    assert d["n_repeat_pairs"] == 2
    assert d["hidden_repeat_agreement"] == {"agree": 1, "n": 2, "value": 0.5}
    assert d["human_reference"] == [
        {"comparison": "c1", "h": pytest.approx(0.7), "n_A": 3, "n_T": 1, "n_B": 1},
        {"comparison": "c2", "h": 0.0, "n_A": 0, "n_T": 0, "n_B": 2},
        {"comparison": "c4", "h": 0.5, "n_A": 1, "n_T": 0, "n_B": 1},
    ]
    # pairs: c1 C(5,2)=10 with 3 agreeing; c2 1 agreeing; c4 1 pair, no agreement.
    assert d["exact_agreement"]["n_pairs"] == 12
    assert d["exact_agreement"]["value"] == pytest.approx(4 / 12)
    counts = np.array([[1, 1, 3], [2, 0, 0], [1, 0, 1]])
    assert d["fleiss_kappa"]["value"] == pytest.approx(spec_kappa_loop(counts))
    reliability = np.full((5, 3), np.nan)
    for j, col in enumerate([[2, 2, 2, 1, 0], [0, 0, np.nan, np.nan, np.nan], [np.nan] * 3 + [2, 0]]):
        reliability[:, j] = col
    package = krippendorff.alpha(reliability, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    assert d["krippendorff_alpha_ordinal"]["value"] == pytest.approx(package, abs=1e-9)
    assert d["unanimous_share"] == pytest.approx(1 / 3)
    assert d["unique_plurality_share"] == pytest.approx(2 / 3)
    assert d["bootstrap"]["resamples"] == 200 and d["bootstrap"]["seed"] == 1
    for key in ("exact_agreement", "fleiss_kappa", "krippendorff_alpha_ordinal"):
        lo, hi = d[key]["ci95"]
        assert lo is None or lo <= hi
    # s1 beats s2 (h = 0.7), s3 beats s2 (h = 0), s3 ties s1 (h = 0.5): s2 is last.
    assert [r["rank"] for r in d["human_ranking"]] == [1, 2, 3]
    assert d["human_ranking"][-1]["system"] == "s2"
    # Position bias: decisive main votes; left = A when not swapped, B when swapped.
    # c1: r1 A L, r2 A swapped -> right, r3 A L, r5 B -> right; c2: r1 B -> right, r2 B swapped -> left;
    # c4: r4 A -> left, r5 B swapped -> left.  Left: r1(c1), r3, r2(c2), r4, r5(c4) = 5 of 8.
    assert d["position_bias"]["overall"]["n_decisive"] == 8
    assert d["position_bias"]["overall"]["n_left"] == 5
    # Per-axis α equals the package on the axis reliability data (−2…2).
    axis = np.full((5, 3), np.nan)
    axis[:, 0] = [1, 1, 1, 1, 1]
    axis[:2, 1] = [-1, -1]  # r3's CANNOT_JUDGE on c2 carries no judgement
    axis[3, 2] = 2
    (entry,) = d["per_axis_alpha"]
    assert entry["axis"] == "LAYOUT"
    assert entry["n_scores"] == 8
    package_axis = krippendorff.alpha(axis, level_of_measurement="ordinal", value_domain=[-2, -1, 0, 1, 2])
    assert entry["value"] == pytest.approx(package_axis, abs=1e-9)
    json.dumps(d, allow_nan=False)


def test_confidence_and_rater_quality() -> None:
    rows = []
    # c1: r1 A (conf 5), r2 A (conf 5), r3 B (conf 1).
    rows += [
        vote("c1", "r1", "A", confidence=5),
        vote("c1", "r2", "A", confidence=5),
        vote("c1", "r3", "B", confidence=1),
    ]
    # c2: r1 B (conf 5), r2 B (conf 4), r3 B (conf 1).
    rows += [
        vote("c2", "r1", "B", confidence=5, system_a="s2", system_b="s3"),
        vote("c2", "r2", "B", confidence=4, system_a="s2", system_b="s3"),
        vote("c2", "r3", "B", confidence=1, system_a="s2", system_b="s3"),
    ]
    rows.append(vote("c1", "r3", "A", is_repeat=True))
    d = agreement_report(pd.DataFrame(rows), resamples=50, seed=2).to_dict()
    by_conf = {row["confidence"]: row for row in d["confidence_agreement"]}
    # Leave-self-out plurality: c1 r1 -> others {A, B}: no plurality; r2 likewise; r3 -> others A,A: disagree.
    # c2: every vote agrees with the others' B.
    assert by_conf[5]["agree"] == 1 and by_conf[5]["n"] == 1
    assert by_conf[4]["agree"] == 1 and by_conf[4]["n"] == 1
    assert by_conf[1]["agree"] == 1 and by_conf[1]["n"] == 2
    quality = {row["rater"]: row for row in d["rater_quality"]}
    assert quality["r3"]["hidden_repeat_agreement"]["agree"] == 0
    assert quality["r3"]["hidden_repeat_agreement"]["n"] == 1
    assert quality["r1"]["hidden_repeat_agreement"]["n"] == 0
    assert quality["r1"]["hidden_repeat_agreement"]["value"] is None
    assert quality["r3"]["majority_agreement"] == {
        "agree": 1,
        "n": 2,
        "value": 0.5,
        "ci95": pytest.approx(list(proportion_confint(1, 2, method="wilson"))),
    }


def synthetic_votes(seed: int, n_blocks: int = 2, per_block: int = 18, raters: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    systems = [f"s{m}" for m in range(5)]
    theta = rng.normal(0, 1, len(systems))
    rows = []
    for block in range(n_blocks):
        for k in range(per_block):
            comp = f"c{block}_{k:02d}"
            a, b = rng.choice(len(systems), 2, replace=False)
            p = 1 / (1 + np.exp(-(theta[a] - theta[b])))
            for j in range(raters):
                u = rng.random()
                label = (
                    "CANNOT_JUDGE" if u < 0.05 else "TIE" if u < 0.2 else ("A" if rng.random() < p else "B")
                )
                rows.append(
                    {
                        "comparison": comp,
                        "page": f"p{block}_{k // 3}",
                        "block": f"b{block}",
                        "rater": f"r{block}_{j}",
                        "label": label,
                        "is_repeat": False,
                        "swapped": bool((j + k) % 2),
                        "confidence": int(rng.integers(1, 6)),
                        "system_a": systems[a],
                        "system_b": systems[b],
                        "axis:X": float(rng.integers(-2, 3)) if label != "CANNOT_JUDGE" else np.nan,
                    }
                )
            if k < 2:
                rep = dict(rows[-1])
                rep["is_repeat"] = True
                rep["label"] = rep["label"] if rng.random() < 0.7 else "TIE"
                rows.append(rep)
    return pd.DataFrame(rows)


def test_report_is_deterministic_in_seed_and_vectorized_ci_matches_naive() -> None:
    votes = synthetic_votes(3)
    a = agreement_report(votes, resamples=300, seed=9).to_dict()
    b = agreement_report(votes.sample(frac=1.0, random_state=1), resamples=300, seed=9).to_dict()
    assert a == b  # same seed, any row order: identical numbers
    c = agreement_report(votes, resamples=300, seed=10).to_dict()
    assert c["fleiss_kappa"]["ci95"] != a["fleiss_kappa"]["ci95"]
    assert c["fleiss_kappa"]["value"] == a["fleiss_kappa"]["value"]
    # The CI is the percentile interval of a naive per-resample loop on the same W.
    main = votes[~votes["is_repeat"]]
    info = main.groupby("comparison", sort=True)[["page", "block"]].first()
    units = bootstrap_units(info["page"].tolist(), info["block"].tolist())
    w = comparison_weights(units, bootstrap_page_blocks(units, resamples=300, seed=9))
    counts = label_counts(main["label"].to_numpy(), main["comparison"].to_numpy(), info.index.tolist())
    naive = np.array([spec_kappa_loop(np.repeat(counts, w[r], axis=0)) for r in range(300)])
    assert a["fleiss_kappa"]["ci95"] == pytest.approx(np.percentile(naive, [2.5, 97.5]).tolist(), abs=1e-12)
    json.dumps(a, allow_nan=False)


def test_leave_one_rater_out_equals_refitting_without_the_rater() -> None:
    from stats.bradley_terry import fit_bradley_terry

    votes = synthetic_votes(5)
    d = agreement_report(votes, resamples=20, seed=1).to_dict()
    systems = sorted(r["system"] for r in d["human_ranking"])
    full_scores = np.array(
        [next(r["score"] for r in d["human_ranking"] if r["system"] == s) for s in systems]
    )
    full_ranks = np.array([next(r["rank"] for r in d["human_ranking"] if r["system"] == s) for s in systems])
    main = votes[~votes["is_repeat"] & votes["label"].isin(["A", "B", "TIE"])]
    per = {p["rater"]: p for p in d["leave_one_rater_out"]["per_rater"]}
    assert set(per) == set(main["rater"])
    for rater in sorted(per):
        rest = main[main["rater"] != rater]
        g = rest.groupby("comparison").agg(
            a=("system_a", "first"),
            b=("system_b", "first"),
            h=("label", lambda s: ((s == "A").sum() + 0.5 * (s == "TIE").sum()) / len(s)),
        )
        fit = fit_bradley_terry(
            g["a"].map(systems.index).to_numpy(),
            g["b"].map(systems.index).to_numpy(),
            g["h"].to_numpy(),
            len(systems),
        )
        rho = stats.spearmanr(full_scores, fit.scores).statistic
        assert per[rater]["spearman"] == pytest.approx(rho, abs=1e-12)
        assert per[rater]["max_rank_movement"] == int(np.abs(fit.ranks - full_ranks).max())
    assert d["leave_one_rater_out"]["min_spearman"] == pytest.approx(min(p["spearman"] for p in per.values()))
    assert d["leave_one_rater_out"]["max_rank_movement"] == max(p["max_rank_movement"] for p in per.values())


def refit_leave_one_rater_out_scores(votes: pd.DataFrame) -> dict[str, list[float]]:
    """Each system's human score with each rater left out, refitted from the votes.

    The recomputation the HTML report module used to do itself (issue 13), kept here as the
    independent reference for ``AgreementResult.leave_one_rater_out_scores``.
    """
    main = validate_votes(votes).main
    valid = main[main["label"].isin(["B", "TIE", "A"])]
    if valid.empty:
        return {}
    info = valid.groupby("comparison", sort=True)[["system_a", "system_b"]].first()
    comps = info.index.tolist()
    systems = sorted(set(info["system_a"]) | set(info["system_b"]))
    total = label_counts(valid["label"].to_numpy(), valid["comparison"].to_numpy(), comps)
    out: dict[str, list[float]] = {s: [] for s in systems}
    sys_a = info["system_a"].to_numpy(dtype=object)
    sys_b = info["system_b"].to_numpy(dtype=object)
    for _, group in valid.groupby("rater", sort=True):
        counts = total - label_counts(group["label"].to_numpy(), group["comparison"].to_numpy(), comps)
        ranking = human_ranking(sys_a, sys_b, preference_of_counts(counts), systems)
        for system, score in zip(ranking.systems, ranking.scores, strict=True):
            out[system].append(float(score))
    return out


@pytest.mark.parametrize(
    "votes",
    [
        synthetic_votes(5),
        small_votes(),  # a comparison with only CANNOT_JUDGE, hidden repeats
        pd.DataFrame([vote("c1", "r1", "A"), vote("c2", "r1", "B", system_b="s3", page="p2")]),  # one rater
        pd.DataFrame([vote("c1", "r1", "CANNOT_JUDGE"), vote("c1", "r2", "CANNOT_JUDGE")]),  # no valid vote
    ],
    ids=["synthetic", "small", "one-rater", "only-cannot-judge"],
)
def test_leave_one_rater_out_scores_equal_refitting_from_the_votes(votes: pd.DataFrame) -> None:
    result = agreement_report(votes, resamples=10, seed=0)
    assert result.leave_one_rater_out_scores() == refit_leave_one_rater_out_scores(votes)
    assert "scores" not in json.dumps(result.to_dict()["leave_one_rater_out"])  # not in the report JSON


def test_human_ranking_orders_systems_by_human_preference() -> None:
    rows = []
    order = ["s3", "s1", "s2"]  # s3 beats everyone, s1 beats s2
    k = 0
    for i, j in itertools.combinations(range(3), 2):
        for rep in range(3):
            k += 1
            a, b = (order[i], order[j]) if rep % 2 == 0 else (order[j], order[i])
            label = "A" if a == order[i] else "B"
            rows += [vote(f"c{k:02d}", r, label, system_a=a, system_b=b, page=f"p{k}") for r in ("r1", "r2")]
    d = agreement_report(pd.DataFrame(rows), resamples=10, seed=0).to_dict()
    assert [r["system"] for r in d["human_ranking"]] == order
    assert [r["rank"] for r in d["human_ranking"]] == [1, 2, 3]
    assert d["human_ranking"][0]["score"] > d["human_ranking"][1]["score"] > d["human_ranking"][2]["score"]
    assert d["leave_one_rater_out"]["max_rank_movement"] == 0


def test_empty_and_degenerate_inputs_give_none() -> None:
    only_cj = pd.DataFrame([vote("c1", "r1", "CANNOT_JUDGE"), vote("c1", "r2", "CANNOT_JUDGE")])
    d = agreement_report(only_cj, resamples=10, seed=0).to_dict()
    assert d["n_comparisons"] == 0
    assert d["coverage"] == 0.0
    assert d["exact_agreement"]["value"] is None
    assert d["fleiss_kappa"]["ci95"] == [None, None]
    assert d["human_reference"] == [] and d["human_ranking"] == []
    json.dumps(d, allow_nan=False)


# ------------------------------------------------------------------ properties


@st.composite
def vote_frames(draw: st.DrawFn) -> pd.DataFrame:
    n_comp = draw(st.integers(2, 8))
    n_raters = draw(st.integers(2, 5))
    labels = st.sampled_from(["A", "B", "TIE", "CANNOT_JUDGE", None])
    rows = []
    for c in range(n_comp):
        a, b = draw(st.sampled_from([("s1", "s2"), ("s2", "s3"), ("s1", "s3"), ("s3", "s1")]))
        for r in range(n_raters):
            label = draw(labels)
            if label is None:
                continue
            rows.append(
                {
                    "comparison": f"c{c}",
                    "page": f"p{c // 2}",
                    "block": f"b{c % 2}",
                    "rater": f"r{r}",
                    "label": label,
                    "is_repeat": False,
                    "swapped": draw(st.booleans()),
                    "confidence": draw(st.integers(1, 5)),
                    "system_a": a,
                    "system_b": b,
                    "axis:X": float(draw(st.integers(-2, 2))),
                }
            )
    frame = pd.DataFrame(rows)
    if frame.empty:
        frame = pd.DataFrame([vote("c0", "r0", "A", **{"axis:X": 0.0})])
    return frame


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CORE = ("exact_agreement", "fleiss_kappa", "krippendorff_alpha_ordinal")


@SETTINGS
@given(frame=vote_frames(), seed=st.integers(0, 1000))
def test_relabelling_raters_changes_nothing(frame: pd.DataFrame, seed: int) -> None:
    before = agreement_report(frame, resamples=30, seed=seed).to_dict()
    raters = sorted(set(frame["rater"]))
    perm = np.random.default_rng(seed).permutation(len(raters))
    mapping = {r: f"z{perm[i]}" for i, r in enumerate(raters)}
    after = agreement_report(
        frame.assign(rater=frame["rater"].map(mapping)), resamples=30, seed=seed
    ).to_dict()
    # Everything but the rater names is identical (rater-named lists compared as multisets).
    for key in set(before) - {"leave_one_rater_out", "position_bias", "rater_quality"}:
        assert after[key] == before[key], key
    assert after["position_bias"]["overall"] == before["position_bias"]["overall"]
    for key in ("min_spearman", "max_rank_movement"):
        assert after["leave_one_rater_out"][key] == before["leave_one_rater_out"][key]

    def nameless(rows: list[dict[str, object]]) -> list[str]:
        return sorted(
            json.dumps({k: v for k, v in row.items() if k != "rater"}, sort_keys=True) for row in rows
        )

    assert nameless(after["leave_one_rater_out"]["per_rater"]) == nameless(
        before["leave_one_rater_out"]["per_rater"]
    )
    assert nameless(after["rater_quality"]) == nameless(before["rater_quality"])
    assert nameless(after["position_bias"]["per_rater"]) == nameless(before["position_bias"]["per_rater"])


def _ci_close(x: list[float | None], y: list[float | None]) -> bool:
    return all(
        (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)
        for a, b in zip(x, y, strict=True)
    )


@SETTINGS
@given(frame=vote_frames(), seed=st.integers(0, 1000))
def test_swapping_a_and_b_maps_h_to_one_minus_h(frame: pd.DataFrame, seed: int) -> None:
    before = agreement_report(frame, resamples=30, seed=seed).to_dict()
    flipped = frame.assign(
        label=frame["label"].map({"A": "B", "B": "A", "TIE": "TIE", "CANNOT_JUDGE": "CANNOT_JUDGE"}),
        system_a=frame["system_b"],
        system_b=frame["system_a"],
        swapped=~frame["swapped"].astype(bool),  # the same physical left candidate
        **{"axis:X": -frame["axis:X"]},
    )
    after = agreement_report(flipped, resamples=30, seed=seed).to_dict()
    h_before = {r["comparison"]: r for r in before["human_reference"]}
    for row in after["human_reference"]:
        assert row["h"] == pytest.approx(1 - h_before[row["comparison"]]["h"], abs=1e-12)
        assert (row["n_A"], row["n_B"]) == (
            h_before[row["comparison"]]["n_B"],
            h_before[row["comparison"]]["n_A"],
        )
    for key in CORE:
        b, a = before[key]["value"], after[key]["value"]
        assert (a is None and b is None) or a == pytest.approx(b, abs=1e-9)
        assert _ci_close(before[key]["ci95"], after[key]["ci95"])
    assert after["position_bias"] == before["position_bias"]
    ranks_before = {r["system"]: r["rank"] for r in before["human_ranking"]}
    scores_before = {r["system"]: r["score"] for r in before["human_ranking"]}
    for r in after["human_ranking"]:
        assert r["score"] == pytest.approx(scores_before[r["system"]], abs=1e-6)
        if len(set(np.round(list(scores_before.values()), 6))) == len(scores_before):
            assert r["rank"] == ranks_before[r["system"]]
    assert after["per_axis_alpha"][0]["value"] == pytest.approx(
        before["per_axis_alpha"][0]["value"], abs=1e-9
    ) or (after["per_axis_alpha"][0]["value"] is None and before["per_axis_alpha"][0]["value"] is None)


def test_ordinal_values_follow_spec() -> None:
    assert ORDINAL_VALUE == {"B": 0, "TIE": 1, "A": 2}
