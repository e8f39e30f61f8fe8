"""docs/study-kinds.md "The kind report" score–preference analysis (kind ``pairwise``) against independent
computations.

References: a plain-Python loop over votes (scores, bins, counts), a naive bootstrap loop that
rebuilds each resample's votes from the same count matrix, and simulated raters who follow a
metric with known noise (expected agreement known in closed form).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from stats.bootstrap import brief_bootstrap
from stats.errors import InvalidKindData
from stats.score_preference import (
    GAP_BINS,
    choice_score,
    gap_bin,
    relative_gap,
    score_preference,
    scores_from_items,
)

BIN_LABELS = [b[0] for b in GAP_BINS]


# --------------------------------------------------------------------------------------------
# docs/study-kinds.md "Running the other study kinds" rules case by case
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "score_a", "score_b", "expected"),
    [
        ("A", 0.9, 0.1, 1.0),  # chose the higher
        ("B", 0.9, 0.1, 0.0),  # chose the lower
        ("TIE", 0.9, 0.1, 0.5),
        ("B", 0.1, 0.9, 1.0),  # B is the higher one
        ("A", 0.1, 0.9, 0.0),
        ("TIE", 0.1, 0.9, 0.5),
        ("A", 0.5, 0.5, math.nan),  # equal-score pair: reported apart
        ("TIE", 0.5, 0.5, math.nan),
        ("CANNOT_JUDGE", 0.9, 0.1, math.nan),  # no choice
    ],
)
def test_choice_score_rules(label: str, score_a: float, score_b: float, expected: float) -> None:
    got = choice_score(label, score_a, score_b)
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_choice_score_rejects_unknown_label() -> None:
    with pytest.raises(ValueError, match="label"):
        choice_score("LEFT", 1, 0)


@pytest.mark.parametrize(
    ("delta", "width", "label"),
    [
        (0.0499, 1.0, "< 5"),
        (0.05, 1.0, "5–15"),
        (0.35 - 0.30, 1.0, "5–15"),  # 4.999999999999999 before rounding
        (0.1499, 1.0, "5–15"),
        (0.15, 1.0, "≥ 15"),
        (0.45 - 0.30, 1.0, "≥ 15"),  # 15.000000000000002 before rounding
        (-2.0, 40.0, "5–15"),  # |Δ| and another range
        (1.0, 1.0, "≥ 15"),
        (1e-9, 1.0, "< 5"),
    ],
)
def test_gap_bins_at_boundaries(delta: float, width: float, label: str) -> None:
    gap = relative_gap(delta, width)
    assert BIN_LABELS[int(gap_bin(gap)[0])] == label


def test_relative_gap_needs_positive_range() -> None:
    with pytest.raises(ValueError):
        relative_gap(0.1, 0.0)


def _votes(rows: list[tuple[str, str, str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["comparison", "brief", "item_a", "item_b", "rater", "label"])


def _scores(mapping: dict[str, dict[str, float]]) -> pd.DataFrame:
    return scores_from_items([{"id": k, "metrics": v} for k, v in mapping.items()])


def test_small_study_by_hand() -> None:
    # metric m over items: range = 1.0 - 0.0 = 1.0 (item z is never compared but sets the range).
    scores = _scores(
        {
            "a": {"m": 0.80},
            "b": {"m": 0.20},  # a-b gap 60 → ≥ 15
            "c": {"m": 0.50},
            "d": {"m": 0.46},  # c-d gap 4 → < 5
            "e": {"m": 0.30},
            "f": {"m": 0.40},  # e-f gap 10 → 5–15, f is higher
            "g": {"m": 0.70},
            "h": {"m": 0.70},  # equal scores
            "z": {"m": 0.00},
            "y": {"m": 1.00},
        }
    )
    votes = _votes(
        [
            ("c1", "b1", "a", "b", "r1", "A"),  # 1
            ("c1", "b1", "a", "b", "r2", "TIE"),  # 0.5
            ("c1", "b1", "a", "b", "r3", "CANNOT_JUDGE"),  # excluded
            ("c2", "b1", "c", "d", "r1", "B"),  # 0
            ("c3", "b2", "e", "f", "r1", "B"),  # 1 (f higher)
            ("c3", "b2", "e", "f", "r2", "A"),  # 0
            ("c4", "b2", "g", "h", "r1", "TIE"),  # equal
            ("c4", "b2", "g", "h", "r2", "A"),  # equal
        ]
    )
    res = score_preference(votes, scores, resamples=50, seed=3)
    m = res.metric("m")
    assert (m.range_min, m.range_max) == (0.0, 1.0)
    assert m.overall.n_votes == 5
    assert m.overall.value == pytest.approx((1 + 0.5 + 0 + 1 + 0) / 5)
    assert (m.overall.n_higher, m.overall.n_tie, m.overall.n_lower) == (2, 1, 2)
    by = {b.bin: b for b in m.by_gap}
    assert by["< 5"].n_votes == 1 and by["< 5"].value == 0.0
    assert by["5–15"].n_votes == 2 and by["5–15"].value == 0.5
    assert by["≥ 15"].n_votes == 2 and by["≥ 15"].value == 0.75
    assert m.equal_score.n_pairs == 1
    assert (m.equal_score.n_votes, m.equal_score.n_tie, m.equal_score.n_a) == (2, 1, 1)
    assert m.equal_score.tie_share == 0.5
    assert res.n_cannot_judge == 1 and res.n_valid_votes == 7
    pairs = {p["comparison"]: p for p in m.pairs}
    assert pairs["c4"]["gap"] is None and pairs["c4"]["bin"] is None and pairs["c4"]["agreement"] is None
    assert pairs["c2"]["gap"] == pytest.approx(4.0)
    assert pairs["c3"]["agreement"] == 0.5


def test_range_comes_from_every_item_of_the_study() -> None:
    votes = _votes([("c1", "b1", "a", "b", "r1", "A")])
    narrow = _scores({"a": {"m": 0.6}, "b": {"m": 0.5}})
    wide = _scores({"a": {"m": 0.6}, "b": {"m": 0.5}, "x": {"m": 0.0}, "y": {"m": 3.0}})
    gap_narrow = score_preference(votes, narrow, resamples=5, seed=0).metric("m").pairs[0]
    gap_wide = score_preference(votes, wide, resamples=5, seed=0).metric("m").pairs[0]
    assert gap_narrow["gap"] == pytest.approx(100.0) and gap_narrow["bin"] == "≥ 15"
    assert gap_wide["gap"] == pytest.approx(0.1 / 3 * 100) and gap_wide["bin"] == "< 5"


def test_constant_metric_has_only_equal_pairs_and_missing_scores_are_counted() -> None:
    votes = _votes(
        [
            ("c1", "b1", "a", "b", "r1", "A"),
            ("c2", "b1", "a", "c", "r1", "B"),  # c has no score for m
        ]
    )
    scores = _scores({"a": {"m": 1.0, "k": 2.0}, "b": {"m": 1.0, "k": 1.0}, "c": {"k": 5.0}})
    res = score_preference(votes, scores, resamples=5, seed=0)
    m = res.metric("m")
    assert m.overall.n_votes == 0 and m.overall.value != m.overall.value  # NaN
    assert m.equal_score.n_pairs == 1 and m.equal_score.n_a == 1
    assert m.n_pairs_unscored == 1 and m.n_votes_unscored == 1
    k = res.metric("k")
    assert k.overall.n_votes == 2 and k.overall.value == 1.0  # a>b chose A; c>a chose B
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["metrics"][1]["overall"]["value"] is None


def test_repeats_are_not_data_and_metric_selection() -> None:
    votes = _votes([("c1", "b1", "a", "b", "r1", "A"), ("c1", "b1", "a", "b", "r1", "B")])
    votes["is_repeat"] = [False, True]
    scores = _scores({"a": {"m": 1.0, "k": 0.0}, "b": {"m": 0.0, "k": 1.0}})
    res = score_preference(votes, scores, resamples=5, seed=0, metrics=["k"])
    assert [m.metric for m in res.metrics] == ["k"]
    assert res.n_repeat_votes_excluded == 1
    assert res.metric("k").overall.value == 0.0


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda v, s: (v.assign(label=["LEFT"]), s), "label"),
        (lambda v, s: (v.drop(columns=["brief"]), s), "brief"),
        (lambda v, s: (pd.concat([v, v]), s), "more than one main vote"),
        (lambda v, s: (pd.concat([v, v.assign(rater="r2", brief="b9")]), s), "more than one 'brief'"),
        (lambda v, s: (v.assign(item_b="a"), s), "same image"),
        (lambda v, s: (v, s.assign(score=["x", 1.0])), "finite number"),
        (lambda v, s: (v, pd.concat([s, s])), "more than one score"),
    ],
)
def test_bad_input_raises(mutate, message: str) -> None:
    votes = _votes([("c1", "b1", "a", "b", "r1", "A")])
    scores = _scores({"a": {"m": 1.0}, "b": {"m": 0.0}})
    v, s = mutate(votes, scores)
    with pytest.raises(InvalidKindData, match=message):
        score_preference(v, s, resamples=5, seed=0)


def test_unknown_metric_and_bad_bootstrap_args() -> None:
    votes = _votes([("c1", "b1", "a", "b", "r1", "A")])
    scores = _scores({"a": {"m": 1.0}, "b": {"m": 0.0}})
    with pytest.raises(ValueError, match="nope"):
        score_preference(votes, scores, resamples=5, seed=0, metrics=["nope"])
    with pytest.raises(ValueError, match="resamples"):
        score_preference(votes, scores, resamples=0, seed=0)


# --------------------------------------------------------------------------------------------
# Simulation with a known answer + independent computations
# --------------------------------------------------------------------------------------------

# Probability of choosing (higher, TIE, lower) by relative-gap bin: expected agreement p_h + p_t / 2.
BIN_BEHAVIOUR = {"< 5": (0.50, 0.20, 0.30), "5–15": (0.65, 0.15, 0.20), "≥ 15": (0.85, 0.10, 0.05)}
EXPECTED = {k: h + t / 2 for k, (h, t, _) in BIN_BEHAVIOUR.items()}


def _simulate(seed: int, n_briefs: int = 120, raters: int = 3, cannot_judge: float = 0.05):
    """Five images per brief, ten within-brief pairs (AesCode §E.3), raters following the metric."""
    rng = np.random.default_rng(seed)
    items = {}
    rows = []
    for b in range(n_briefs):
        ids = [f"b{b}i{j}" for j in range(5)]
        # scores on a 0–100 grid so some pairs are equal
        for i in ids:
            items[i] = float(rng.integers(0, 101))
        for x in range(5):
            for y in range(x + 1, 5):
                a, bb = (ids[x], ids[y]) if rng.random() < 0.5 else (ids[y], ids[x])
                comp = f"{a}-{bb}"
                delta = items[a] - items[bb]
                gap = abs(delta) / 100 * 100
                label_bin = "< 5" if gap < 5 else ("5–15" if gap < 15 else "≥ 15")
                p = BIN_BEHAVIOUR[label_bin]
                for r in range(raters):
                    if rng.random() < cannot_judge:
                        label = "CANNOT_JUDGE"
                    elif delta == 0:
                        label = rng.choice(["A", "TIE", "B"])
                    else:
                        choice = rng.choice(["higher", "tie", "lower"], p=p)
                        higher = "A" if delta > 0 else "B"
                        lower = "B" if delta > 0 else "A"
                        label = {"higher": higher, "tie": "TIE", "lower": lower}[choice]
                    rows.append((comp, f"brief{b}", a, bb, f"r{b}_{r}", str(label)))
    # pin the range to exactly 0..100
    items["anchor_lo"] = 0.0
    items["anchor_hi"] = 100.0
    votes = _votes(rows)
    scores = pd.DataFrame({"item": list(items), "metric": "visual", "score": list(items.values())})
    return votes, scores


def _naive(votes: pd.DataFrame, scores: pd.DataFrame) -> dict[str, list[float]]:
    """Plain-Python scoring of every valid vote on an unequal-score pair, by bin."""
    s = dict(zip(scores["item"], scores["score"], strict=True))
    width = max(s.values()) - min(s.values())
    out: dict[str, list[float]] = {"all": [], "< 5": [], "5–15": [], "≥ 15": []}
    for row in votes.itertuples(index=False):
        if row.label == "CANNOT_JUDGE" or s[row.item_a] == s[row.item_b]:
            continue
        higher = "A" if s[row.item_a] > s[row.item_b] else "B"
        value = 0.5 if row.label == "TIE" else (1.0 if row.label == higher else 0.0)
        gap = round(abs(s[row.item_a] - s[row.item_b]) / width * 100, 9)
        out["all"].append(value)
        out["< 5" if gap < 5 else ("5–15" if gap < 15 else "≥ 15")].append(value)
    return out


def test_simulated_raters_recover_expected_agreement_and_match_a_loop() -> None:
    votes, scores = _simulate(seed=11)
    res = score_preference(votes, scores, resamples=400, seed=5)
    m = res.metric("visual")
    naive = _naive(votes, scores)
    assert m.overall.n_votes == len(naive["all"])
    assert m.overall.value == pytest.approx(np.mean(naive["all"]), abs=1e-12)
    for b in m.by_gap:
        assert b.n_votes == len(naive[b.bin])
        assert b.value == pytest.approx(np.mean(naive[b.bin]), abs=1e-12)
        # Known answer: the behaviour of the simulated raters, within sampling error.
        se = math.sqrt(0.25 / b.n_votes)
        assert abs(b.value - EXPECTED[b.bin]) < 4 * se, (b.bin, b.value, EXPECTED[b.bin])
        assert b.ci95[0] < EXPECTED[b.bin] < b.ci95[1]
    # Equal-score pairs: raters picked uniformly, so the TIE share is about 1/3.
    assert m.equal_score.n_pairs > 10
    assert abs(m.equal_score.tie_share - 1 / 3) < 4 * math.sqrt(2 / 9 / m.equal_score.n_votes)


def test_cluster_bootstrap_equals_naive_loop_over_briefs() -> None:
    votes, scores = _simulate(seed=3, n_briefs=15)
    resamples, seed = 60, 99
    res = score_preference(votes, scores, resamples=resamples, seed=seed)
    m = res.metric("visual")
    # The same count matrix as the module: briefs are the clusters, one stratum.
    boot = brief_bootstrap(votes["brief"].tolist(), resamples=resamples, seed=seed)
    per_bin: dict[str, list[float]] = {"all": [], "< 5": [], "5–15": [], "≥ 15": []}
    for r in range(resamples):
        parts = []
        for j, brief in enumerate(boot.briefs):
            for _ in range(int(boot.counts[r, j])):
                parts.append(votes[votes["brief"] == brief])
        resample = pd.concat(parts) if parts else votes.iloc[:0]
        naive = _naive(resample, scores)
        for k, vals in naive.items():
            per_bin[k].append(float(np.mean(vals)) if vals else math.nan)
    entries = {"all": m.overall, **{b.bin: b for b in m.by_gap}}
    for k, entry in entries.items():
        vals = np.array(per_bin[k])
        vals = vals[np.isfinite(vals)]
        expected = np.percentile(vals, [2.5, 97.5])
        assert entry.ci95 == pytest.approx(tuple(expected), abs=1e-12)


def test_deterministic_and_json_safe() -> None:
    votes, scores = _simulate(seed=2, n_briefs=10)
    a = score_preference(votes, scores, resamples=50, seed=1).to_dict()
    b = score_preference(votes.sample(frac=1, random_state=4), scores, resamples=50, seed=1).to_dict()
    assert json.dumps(a, allow_nan=False) == json.dumps(b, allow_nan=False)
    assert a["bootstrap"] == {"resamples": 50, "seed": 1, "clusters": "brief", "n_clusters": 10}
    assert a["gap_bins"] == ["< 5", "5–15", "≥ 15"]
