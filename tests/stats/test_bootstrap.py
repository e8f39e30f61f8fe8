"""Tests of the stratified page-block bootstrap (docs/protocol.md "Human reference and agreement" (Confidence
intervals))."""

from __future__ import annotations

import numpy as np
import pytest

from stats.bootstrap import (
    bootstrap_page_blocks,
    bootstrap_units,
    comparison_weights,
    percentile_interval,
)

PAGES = ["p1", "p1", "p2", "p3", "p3", "p3", "q1", "q2", "p1"]
BLOCKS = ["b1", "b1", "b1", "b1", "b1", "b1", "b2", "b2", "b2"]


def test_units_group_comparisons_by_block_and_page() -> None:
    units = bootstrap_units(PAGES, BLOCKS)
    # (b1,p1) (b1,p2) (b1,p3) (b2,p1) (b2,q1) (b2,q2): page p1 in two blocks is two units.
    assert units.unit_keys == (
        ("b1", "p1"),
        ("b1", "p2"),
        ("b1", "p3"),
        ("b2", "p1"),
        ("b2", "q1"),
        ("b2", "q2"),
    )
    assert units.unit_of.tolist() == [0, 0, 1, 2, 2, 2, 4, 5, 3]
    assert units.stratum_of_unit.tolist() == [0, 0, 0, 1, 1, 1]
    assert units.n_units == 6


def test_unit_numbering_does_not_depend_on_comparison_order() -> None:
    perm = np.random.default_rng(0).permutation(len(PAGES))
    a = bootstrap_units(PAGES, BLOCKS)
    b = bootstrap_units([PAGES[i] for i in perm], [BLOCKS[i] for i in perm])
    assert a.unit_keys == b.unit_keys
    assert b.unit_of.tolist() == a.unit_of[perm].tolist()


def test_single_stratum_when_no_strata() -> None:
    units = bootstrap_units(["x", "y", "x"])
    assert units.stratum_of_unit.tolist() == [0, 0]
    assert units.unit_of.tolist() == [0, 1, 0]


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError):
        bootstrap_units(["a", "b"], ["s"])
    units = bootstrap_units(PAGES, BLOCKS)
    with pytest.raises(ValueError):
        bootstrap_page_blocks(units, resamples=0, seed=1)


def test_resamples_are_stratified_and_deterministic() -> None:
    units = bootstrap_units(PAGES, BLOCKS)
    w = bootstrap_page_blocks(units, resamples=500, seed=7)
    assert w.shape == (500, 6)
    assert (w >= 0).all()
    # Each stratum draws exactly as many units as it has, in every resample.
    for s in (0, 1):
        members = units.stratum_of_unit == s
        assert (w[:, members].sum(axis=1) == members.sum()).all()
    assert np.array_equal(w, bootstrap_page_blocks(units, resamples=500, seed=7))
    assert not np.array_equal(w, bootstrap_page_blocks(units, resamples=500, seed=8))


def test_draws_are_uniform_within_a_stratum() -> None:
    # 4 units in one stratum: each count is Binomial(4, 1/4), mean 1, variance 0.75.
    units = bootstrap_units(["a", "b", "c", "d"], ["s"] * 4)
    w = bootstrap_page_blocks(units, resamples=40_000, seed=3)
    assert np.allclose(w.mean(axis=0), 1.0, atol=0.02)
    assert np.allclose(w.var(axis=0), 0.75, atol=0.03)
    # Multinomial counts are negatively correlated: cov = −n p q = −0.25.
    cov = np.cov(w.T)
    assert np.allclose(cov[np.triu_indices(4, 1)], -0.25, atol=0.03)


def test_empty_input_gives_empty_matrix() -> None:
    units = bootstrap_units([], [])
    assert bootstrap_page_blocks(units, resamples=3, seed=1).shape == (3, 0)


def test_comparison_weights_map_units_to_comparisons() -> None:
    units = bootstrap_units(PAGES, BLOCKS)
    w = bootstrap_page_blocks(units, resamples=20, seed=1)
    cw = comparison_weights(units, w)
    assert cw.shape == (20, len(PAGES))
    for r in range(20):
        for i, u in enumerate(units.unit_of):
            assert cw[r, i] == w[r, u]


def test_percentile_interval_ignores_nan() -> None:
    values = np.array([np.nan, *range(1, 101)], dtype=float)
    lo, hi = percentile_interval(values)
    assert lo == pytest.approx(np.percentile(np.arange(1, 101), 2.5))
    assert hi == pytest.approx(np.percentile(np.arange(1, 101), 97.5))
    matrix = np.stack([np.arange(100.0), 2 * np.arange(100.0)], axis=1)
    out = percentile_interval(matrix, axis=0)
    assert out.shape == (2, 2)
    assert out[:, 1] == pytest.approx(2 * out[:, 0])
