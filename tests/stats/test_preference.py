"""docs/protocol.md "Canonical answers" vote encoding and the docs/protocol.md "Human reference and agreement"
human preference h_i, computed in one place."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stats.errors import StatisticsError
from stats.preference import (
    ORDINAL_LABELS,
    VOTE_VALUE,
    human_preferences,
    human_reference,
    label_counts,
    preference_of_counts,
)


def test_human_reference_spec_example() -> None:
    assert human_reference(3, 1, 1) == pytest.approx(0.7)
    assert math.isnan(human_reference(0, 0, 0))
    out = human_reference([3, 0, 0, 1], [1, 2, 0, 0], [1, 0, 2, 1])
    assert out == pytest.approx([0.7, 0.5, 0.0, 0.5])
    with pytest.raises(StatisticsError):
        human_reference(-1, 0, 0)


def test_label_counts_columns_are_b_tie_a_and_skip_cannot_judge() -> None:
    counts = label_counts(["A", "B", "TIE", "CANNOT_JUDGE", "A"], ["x", "x", "y", "y", "y"], ["x", "y", "z"])
    assert counts.tolist() == [[1, 0, 1], [0, 1, 1], [0, 0, 0]]
    assert ORDINAL_LABELS == ("B", "TIE", "A")


def test_h_is_the_mean_vote_value_of_the_valid_votes() -> None:
    labels = ["A", "A", "A", "TIE", "B", "CANNOT_JUDGE", "B", "TIE"]
    comps = ["c1", "c1", "c1", "c1", "c1", "c2", "c3", "c3"]
    counts, h = human_preferences(labels, comps, ["c1", "c2", "c3"])
    assert counts.tolist() == [[1, 1, 3], [0, 0, 0], [1, 1, 0]]
    assert h[0] == pytest.approx(0.7) and math.isnan(h[1]) and h[2] == pytest.approx(0.25)
    for i, cid in enumerate(["c1", "c3"]):
        values = [VOTE_VALUE[lab] for lab, c in zip(labels, comps, strict=True) if c == cid and lab in VOTE_VALUE]
        assert h[[0, 2][i]] == pytest.approx(np.mean(values))
    np.testing.assert_array_equal(preference_of_counts(counts), h)


def test_no_comparison_gives_empty_arrays() -> None:
    counts, h = human_preferences([], [], [])
    assert counts.shape == (0, 3) and h.shape == (0,) and h.dtype == float
