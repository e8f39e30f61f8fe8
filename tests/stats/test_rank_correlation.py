"""Tie grouping of θ by a tolerance on sorted differences (issue 29, item 4), checked against scipy
on the de-noised values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from stats.bradley_terry import RANK_TOLERANCE, ranks_from_theta, tie_grouped_theta
from stats.rank_correlation import (
    correlation_reason,
    kendall_tie_aware,
    rowwise_spearman_tie_aware,
    spearman_tie_aware,
)

# The issue's reproduction: two equal values on a 9-decimal rounding half-point.
CLEAN = np.array([1.5e-9, 1.5e-9, 0.3, -0.2])


def noisy_copies() -> list[np.ndarray]:
    """Every ±1e-14 noise pattern on the issue's values (the two ties split both ways)."""
    return [CLEAN + 1e-14 * np.array(signs) for signs in itertools.product((-1.0, 0.0, 1.0), repeat=4)]


def test_rounding_would_split_the_issue_tie() -> None:
    """The scenario is real: rounding to 9 decimals splits the tie for some noise."""
    split = [x for x in noisy_copies() if np.round(x[0], 9) != np.round(x[1], 9)]
    assert split, "the reproduction must exercise the half-point"
    x = split[0]
    assert stats.spearmanr(np.round(x, 9), CLEAN).statistic == pytest.approx(0.9486832980505138, abs=1e-12)


@pytest.mark.parametrize("x", noisy_copies())
def test_noisy_ties_give_rho_one_against_the_noiseless_ranking(x: np.ndarray) -> None:
    assert spearman_tie_aware(x, CLEAN) == 1.0
    assert kendall_tie_aware(x, CLEAN) == 1.0
    # Against another ranking, the value equals scipy's on the de-noised values.
    other = np.array([2.0, 1.0, 3.0, 0.0])
    assert spearman_tie_aware(x, other) == pytest.approx(stats.spearmanr(CLEAN, other).statistic, abs=1e-12)
    assert kendall_tie_aware(x, other) == pytest.approx(stats.kendalltau(CLEAN, other).statistic, abs=1e-12)
    np.testing.assert_array_equal(ranks_from_theta(x), ranks_from_theta(CLEAN))
    np.testing.assert_array_equal(ranks_from_theta(x), [2, 3, 1, 4])  # tie: the lower index first


def test_grouping_keeps_order_chains_and_leaves_nan_alone() -> None:
    t = np.array([0.5, 0.0, 0.8e-9, 1.6e-9, 1.0, np.nan, 0.5 + 2e-9])
    g = tie_grouped_theta(t)
    assert g[1] == g[2] == g[3] == 0.0  # a chain of gaps ≤ tolerance is one tie
    assert g[0] == 0.5 and g[6] == 0.5 + 2e-9  # a gap over the tolerance is not a tie
    assert math.isnan(g[5]) and g[4] == 1.0
    assert tie_grouped_theta(np.array([-0.0, 0.0]))[0] == 0.0 and not np.signbit(tie_grouped_theta(np.array([-0.0]))[0])
    # Row-wise along the last axis, as the bootstrap ranks use it.
    rows = np.stack([CLEAN + 1e-14 * np.array([1, -1, 0, 0]), CLEAN + 1e-14 * np.array([-1, 1, 0, 0])])
    np.testing.assert_array_equal(ranks_from_theta(rows), [[2, 3, 1, 4], [2, 3, 1, 4]])
    np.testing.assert_allclose(rowwise_spearman_tie_aware(rows, np.stack([CLEAN, CLEAN])), [1.0, 1.0])
    assert RANK_TOLERANCE == 1e-9


def test_constant_after_grouping_is_undefined_with_a_reason() -> None:
    x = np.array([0.0, 1e-12, -1e-12])
    assert math.isnan(spearman_tie_aware(x, np.array([1.0, 2.0, 3.0])))
    assert "tied" in str(correlation_reason(x, np.array([1.0, 2.0, 3.0])))
