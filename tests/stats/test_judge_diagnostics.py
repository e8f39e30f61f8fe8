"""Judge diagnostics beside the docs/protocol.md "Judges and calibration" calibration, checked against hand
cases and brute-force loops."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from stats.judge_diagnostics import (
    LABELS,
    human_counts_from_votes,
    human_majority_agreement,
    human_noise_ceiling,
    order_consistency,
    reliability_bins,
    repeat_consistency,
    unique_plurality,
)


def frame(rows):
    return pd.DataFrame(rows, columns=["comparison", "judge", "order", "repeat", "status", "winner"])


@pytest.fixture
def outputs():
    return frame(
        [
            # c1, judge x: primary/swapped agree on repeat 0, disagree on repeat 1
            ("c1", "x", "primary", 0, "valid", "A"),
            ("c1", "x", "swapped", 0, "valid", "A"),
            ("c1", "x", "primary", 1, "valid", "A"),
            ("c1", "x", "swapped", 1, "valid", "B"),
            # c2, judge x: swapped repeat 0 invalid -> that order pair is skipped
            ("c2", "x", "primary", 0, "valid", "TIE"),
            ("c2", "x", "swapped", 0, "invalid", None),
            ("c2", "x", "primary", 1, "valid", "TIE"),
            ("c2", "x", "swapped", 1, "valid", "TIE"),
            # judge y only on c1
            ("c1", "y", "primary", 0, "valid", "B"),
            ("c1", "y", "swapped", 0, "valid", "B"),
        ]
    )


def test_order_consistency(outputs):
    got = order_consistency(outputs, judges=["x", "y", "z"])
    assert (got["x"].agree, got["x"].n) == (2, 3)
    assert (got["y"].agree, got["y"].n) == (1, 1)
    assert got["z"].n == 0 and np.isnan(got["z"].value)


def test_repeat_consistency(outputs):
    got = repeat_consistency(outputs, judges=["x", "y"])
    # pairs (c1, primary) A/A, (c1, swapped) A/B, (c2, primary) TIE/TIE; (c2, swapped) lacks repeat 0
    assert (got["x"].agree, got["x"].n) == (2, 3)
    assert got["y"].n == 0


def test_unique_plurality():
    counts = np.array([[0, 0, 3], [1, 1, 1], [2, 0, 2], [0, 0, 0], [3, 1, 0], [0, 2, 1]])
    assert unique_plurality(counts).tolist() == [2, -1, -1, -1, 0, 1]


def test_human_majority_agreement(outputs):
    counts = np.array([[0, 1, 3], [2, 2, 0]])  # c1 majority A; c2 B/TIE tie -> no majority
    got = human_majority_agreement(outputs, judges=["x", "y"], comparisons=["c1", "c2"], human_counts=counts)
    assert (got["x"].agree, got["x"].n) == (3, 4)
    assert (got["y"].agree, got["y"].n) == (0, 2)


def test_noise_ceiling_equals_brute_force():
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 4, size=(300, 3))
    agree = n = 0
    for row in counts:
        votes = [k for k in range(3) for _ in range(row[k])]
        for i, v in enumerate(votes):
            rest = Counter(votes[:i] + votes[i + 1 :])
            if not rest:
                continue
            top = max(rest.values())
            leaders = [k for k, c in rest.items() if c == top]
            if len(leaders) == 1:
                n += 1
                agree += leaders[0] == v
    got = human_noise_ceiling(counts)
    assert (got.agree, got.n) == (agree, n)
    assert 0 < got.value < 1


def test_reliability_bins_equal_loop():
    rng = np.random.default_rng(6)
    p = np.concatenate([rng.random(200), [0.0, 1.0, 0.5]])
    h = rng.random(len(p))
    bins = reliability_bins(p, h, bins=4)
    assert [b.n for b in bins] == [
        sum(1 for v in p if lo <= v < hi or (hi == 1.0 and v == 1.0))
        for lo, hi in [(0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    ]
    assert sum(b.n for b in bins) == len(p)
    for b in bins:
        sel = (p >= b.low) & ((p < b.high) | ((b.high == 1.0) & (p == 1.0)))
        assert b.mean_predicted == pytest.approx(p[sel].mean())
        assert b.mean_human == pytest.approx(h[sel].mean())
    empty = reliability_bins(np.array([0.05]), np.array([0.0]), bins=2)
    assert empty[1].n == 0 and np.isnan(empty[1].mean_human)


def test_human_counts_from_votes():
    votes = pd.DataFrame(
        list(itertools.chain([("c1", "A")] * 3, [("c1", "TIE"), ("c1", "CANNOT_JUDGE"), ("c2", "B")])),
        columns=["comparison", "label"],
    )
    got = human_counts_from_votes(votes, ["c1", "c2", "c3"])
    assert LABELS == ("B", "TIE", "A")
    assert got.tolist() == [[0, 1, 3], [1, 0, 0], [0, 0, 0]]
