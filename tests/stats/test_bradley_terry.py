"""Tests of the pure Bradley–Terry module (docs/protocol.md "Deployment leaderboard"), against independent
computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, minimize

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.bradley_terry import (
    BradleyTerryFit,
    appearances,
    bootstrap_bradley_terry,
    fit_bradley_terry,
    merge_bootstrap_results,
    ranks_from_theta,
    soft_preference,
)

SCALE = 400.0 / math.log(10.0)


def scipy_scores(a, b, p, n_systems, weights=None, l2=1e-3):
    """The docs/protocol.md "Deployment leaderboard" objective written out independently and maximized with
    scipy (L-BFGS-B)."""
    a = np.asarray(a)
    b = np.asarray(b)
    p = np.asarray(p, dtype=float)
    w = np.ones(len(p)) if weights is None else np.asarray(weights, dtype=float)

    def negative(theta):
        d = theta[a] - theta[b]
        # log σ(x) = −log(1 + e^{−x})
        value = np.sum(w * (p * -np.logaddexp(0.0, -d) + (1 - p) * -np.logaddexp(0.0, d)))
        value -= l2 * np.sum(theta**2)
        resid = w * (p - 1.0 / (1.0 + np.exp(-d)))
        grad = np.zeros(n_systems)
        np.add.at(grad, a, resid)
        np.add.at(grad, b, -resid)
        grad -= 2 * l2 * theta
        return -value, -grad

    result = minimize(
        negative,
        np.zeros(n_systems),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-11, "ftol": 1e-15, "maxiter": 10000},
    )
    theta = result.x - result.x.mean()
    return SCALE * theta


def simulate(rng, n_systems, n, *, tie_share=0.2, fractional=False, strength=1.0):
    a = rng.integers(0, n_systems, n)
    b = (a + rng.integers(1, n_systems, n)) % n_systems
    true = rng.normal(0.0, strength, n_systems)
    prob = 1.0 / (1.0 + np.exp(-(true[a] - true[b])))
    if fractional:
        p = np.clip(prob + rng.normal(0, 0.15, n), 0, 1)
    else:
        p = (rng.random(n) < prob).astype(float)
        p[rng.random(n) < tie_share] = 0.5
    return a, b, p, true


@pytest.mark.parametrize("fractional", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_match_independent_scipy_fit(seed, fractional):
    rng = np.random.default_rng(seed)
    a, b, p, _ = simulate(rng, 7, 600, fractional=fractional)
    fit = fit_bradley_terry(a, b, p, 7)
    np.testing.assert_allclose(fit.scores, scipy_scores(a, b, p, 7), atol=0.01)
    assert fit.gradient_norm < 1e-10
    assert isinstance(fit, BradleyTerryFit)


def test_weights_and_l2_match_scipy():
    rng = np.random.default_rng(5)
    a, b, p, _ = simulate(rng, 5, 300, fractional=True)
    w = rng.integers(0, 4, len(p)).astype(float)
    fit = fit_bradley_terry(a, b, p, 5, weights=w, l2=0.05)
    np.testing.assert_allclose(fit.scores, scipy_scores(a, b, p, 5, weights=w, l2=0.05), atol=0.01)


def test_integer_weights_equal_repeated_rows():
    rng = np.random.default_rng(6)
    a, b, p, _ = simulate(rng, 4, 120, fractional=True)
    w = rng.integers(0, 3, len(p))
    repeated = np.repeat(np.arange(len(p)), w)
    weighted = fit_bradley_terry(a, b, p, 4, weights=w)
    expanded = fit_bradley_terry(a[repeated], b[repeated], p[repeated], 4)
    np.testing.assert_allclose(weighted.theta, expanded.theta, atol=1e-10)


def test_separated_data_and_isolated_system_still_match_scipy():
    # System 0 wins every comparison (θ held finite only by the L2 penalty); system 4 never plays.
    a = np.array([0, 0, 0, 1, 2, 1, 3] * 20)
    b = np.array([1, 2, 3, 2, 3, 3, 2] * 20)
    p = np.array([1.0, 1.0, 1.0, 0.7, 0.5, 0.2, 0.6] * 20)
    fit = fit_bradley_terry(a, b, p, 5)
    np.testing.assert_allclose(fit.scores, scipy_scores(a, b, p, 5), atol=0.01)
    assert fit.ranks[0] == 1
    assert fit.theta[0] > 5  # large but finite
    assert fit.gradient_norm < 1e-10


def test_two_systems_closed_form():
    # One pair, points s of n for system 0: stationarity s − n σ(2t) − 2λt = 0 with θ = (t, −t).
    s, n, lam = 70.0, 100, 1e-3
    t = brentq(lambda x: s - n / (1 + math.exp(-2 * x)) - 2 * lam * x, -10, 10, xtol=1e-14)
    p = np.r_[np.ones(70), np.zeros(30)]
    fit = fit_bradley_terry(np.zeros(100, dtype=int), np.ones(100, dtype=int), p, 2)
    np.testing.assert_allclose(fit.theta, [t, -t], atol=1e-12)
    np.testing.assert_allclose(fit.scores, SCALE * np.array([t, -t]), atol=1e-9)
    np.testing.assert_array_equal(fit.ranks, [1, 2])


def test_centered_scaled_and_symmetric_under_swapping_a_and_b():
    rng = np.random.default_rng(9)
    a, b, p, _ = simulate(rng, 6, 400, fractional=True)
    fit = fit_bradley_terry(a, b, p, 6)
    assert abs(fit.theta.mean()) < 1e-14
    np.testing.assert_allclose(fit.scores, 400 * fit.theta / np.log(10), rtol=0, atol=1e-12)
    swapped = fit_bradley_terry(b, a, 1 - p, 6)
    np.testing.assert_allclose(swapped.theta, fit.theta, atol=1e-10)


def test_ranks_best_first_and_ties_to_lower_index():
    np.testing.assert_array_equal(ranks_from_theta(np.array([0.1, 0.5, -0.2, 0.5])), [3, 1, 4, 2])
    # No data at all: every θ is 0, so ranks follow the system index.
    fit = fit_bradley_terry(np.array([], dtype=int), np.array([], dtype=int), np.array([]), 4)
    np.testing.assert_array_equal(fit.theta, np.zeros(4))
    np.testing.assert_array_equal(fit.ranks, [1, 2, 3, 4])
    # Perfectly symmetric data: 0 and 1 tie exactly in the model; the lower index ranks first.
    a = np.array([0, 1, 0, 1])
    b = np.array([2, 2, 1, 0])
    p = np.array([0.8, 0.8, 0.5, 0.5])
    np.testing.assert_array_equal(fit_bradley_terry(a, b, p, 3).ranks, [1, 2, 3])


def test_recovers_known_abilities():
    rng = np.random.default_rng(11)
    a, b, p, true = simulate(rng, 8, 60_000, tie_share=0.0, strength=1.0)
    fit = fit_bradley_terry(a, b, p, 8)
    centred = true - true.mean()
    assert np.max(np.abs(fit.theta - centred)) < 0.06
    np.testing.assert_array_equal(fit.ranks, ranks_from_theta(centred))


@settings(max_examples=25, deadline=None)
@given(
    n_systems=st.integers(2, 6),
    n=st.integers(1, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_matches_scipy_on_random_small_data(n_systems, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_systems, n)
    b = (a + rng.integers(1, n_systems, n)) % n_systems
    p = rng.choice([0.0, 0.25, 0.5, 0.9, 1.0], n)
    fit = fit_bradley_terry(a, b, p, n_systems)
    np.testing.assert_allclose(fit.scores, scipy_scores(a, b, p, n_systems), atol=0.01)


@pytest.mark.parametrize(
    ("a", "b", "p", "n_systems", "message"),
    [
        ([0, 1], [1, 1], [1.0, 0.0], 2, "itself"),
        ([0, 2], [1, 0], [1.0, 0.0], 2, "indices"),
        ([0], [1], [1.5], 2, r"\[0, 1\]"),
        ([0], [1], [np.nan], 2, r"\[0, 1\]"),
        ([0, 1], [1], [1.0], 2, "same length"),
        ([0], [1], [1.0], 0, "n_systems"),
        ([0.5], [1], [1.0], 2, "integer"),
    ],
)
def test_bad_input_raises_value_error(a, b, p, n_systems, message):
    with pytest.raises(ValueError, match=message):
        fit_bradley_terry(np.array(a), np.array(b), np.array(p), n_systems)


def test_bad_weights_and_l2_raise():
    with pytest.raises(ValueError, match="weights"):
        fit_bradley_terry(np.array([0]), np.array([1]), np.array([1.0]), 2, weights=np.array([-1.0]))
    with pytest.raises(ValueError, match="l2"):
        fit_bradley_terry(np.array([0]), np.array([1]), np.array([1.0]), 2, l2=0.0)


def test_soft_preference_and_appearances_against_loop():
    rng = np.random.default_rng(3)
    a, b, p, _ = simulate(rng, 5, 200, fractional=True)
    a[:] = np.where(a == 4, 0, a)  # system 4 never appears as A ...
    b[:] = np.where(b == 4, 1, b)  # ... nor as B
    keep = a != b
    a, b, p = a[keep], b[keep], p[keep]
    points = {m: [] for m in range(5)}
    for ai, bi, pi in zip(a, b, p, strict=True):
        points[int(ai)].append(pi)
        points[int(bi)].append(1 - pi)
    soft = soft_preference(a, b, p, 5)
    for m in range(4):
        assert soft[m] == pytest.approx(np.mean(points[m]), abs=1e-12)
    assert np.isnan(soft[4])
    np.testing.assert_array_equal(appearances(a, b, 5), [len(points[m]) for m in range(5)])


# --------------------------------------------------------------------------- bootstrap


def bootstrap_case(seed=0, n_systems=6, n=900, n_pages=120):
    rng = np.random.default_rng(seed)
    a, b, p, _ = simulate(rng, n_systems, n, fractional=True)
    pages = [f"page-{k}" for k in rng.integers(0, n_pages, n)]
    return a, b, p, bootstrap_units(pages)


def test_bootstrap_equals_per_resample_loop_of_fit():
    a, b, p, units = bootstrap_case()
    result = bootstrap_bradley_terry(a, b, p, 6, units, resamples=200, seed=7)
    counts = bootstrap_page_blocks(units, resamples=200, seed=7)
    loop = np.array(
        [fit_bradley_terry(a, b, p, 6, weights=counts[r, units.unit_of]).scores for r in range(200)]
    )
    np.testing.assert_allclose(result.scores, loop, atol=1e-8)
    loop_ranks = ranks_from_theta(loop)
    np.testing.assert_array_equal(result.ranks, loop_ranks)
    np.testing.assert_allclose(result.ci95, np.percentile(loop, [2.5, 97.5], axis=0).T, atol=1e-8)
    np.testing.assert_allclose(result.ci95, percentile_interval(result.scores).T)
    np.testing.assert_allclose(result.rank1_share, (loop_ranks == 1).mean(axis=0))
    for m in range(6):
        ranks_m = np.sort(loop_ranks[:, m])
        low, high = result.rank_ci95[m]
        assert low in ranks_m and high in ranks_m
        assert low <= np.percentile(ranks_m, 2.5) and high >= np.percentile(ranks_m, 97.5)
    assert result.rank1_share.sum() == pytest.approx(1.0)
    assert result.max_gradient_norm < 1e-10


def test_bootstrap_chunks_merge_to_the_unchunked_run_exactly():
    a, b, p, units = bootstrap_case(seed=1)
    whole = bootstrap_bradley_terry(a, b, p, 6, units, resamples=150, seed=42)
    parts = [
        bootstrap_bradley_terry(a, b, p, 6, units, resamples=150, seed=42, chunk=chunk)
        for chunk in [(100, 150), (0, 1), (1, 100)]
    ]
    merged = merge_bootstrap_results(parts)
    np.testing.assert_array_equal(merged.scores, whole.scores)
    np.testing.assert_array_equal(merged.ranks, whole.ranks)
    np.testing.assert_array_equal(merged.ci95, whole.ci95)
    np.testing.assert_array_equal(merged.rank_ci95, whole.rank_ci95)
    np.testing.assert_array_equal(merged.rank1_share, whole.rank1_share)
    np.testing.assert_array_equal(parts[0].scores, whole.scores[100:150])


def test_bootstrap_internal_batching_does_not_change_results(monkeypatch):
    import stats.bradley_terry as module

    a, b, p, units = bootstrap_case(seed=2)
    whole = bootstrap_bradley_terry(a, b, p, 6, units, resamples=64, seed=3)
    monkeypatch.setattr(module, "_BATCH_ELEMENTS", 36 * 5)  # batches of 5 resamples
    batched = bootstrap_bradley_terry(a, b, p, 6, units, resamples=64, seed=3)
    np.testing.assert_array_equal(batched.scores, whole.scores)


def test_bootstrap_seeded_and_reproducible():
    a, b, p, units = bootstrap_case(seed=4)
    first = bootstrap_bradley_terry(a, b, p, 6, units, resamples=50, seed=20260831)
    again = bootstrap_bradley_terry(a, b, p, 6, units, resamples=50, seed=20260831)
    other = bootstrap_bradley_terry(a, b, p, 6, units, resamples=50, seed=1)
    np.testing.assert_array_equal(first.scores, again.scores)
    assert not np.array_equal(first.scores, other.scores)
    assert (first.resamples, first.seed, first.n_resamples) == (50, 20260831, 50)


def test_bootstrap_whole_page_blocks_are_resampled():
    # Every page holds the same two comparisons, so every resample sees the same data: no spread.
    a = np.tile([0, 1], 30)
    b = np.tile([1, 2], 30)
    p = np.tile([0.9, 0.3], 30)
    pages = np.repeat(np.arange(30), 2)
    result = bootstrap_bradley_terry(a, b, p, 3, bootstrap_units(pages), resamples=40, seed=0)
    full = fit_bradley_terry(a, b, p, 3)
    np.testing.assert_allclose(result.scores, np.tile(full.scores, (40, 1)), atol=1e-9)


def test_bootstrap_bad_chunks_and_merges_raise():
    a, b, p, units = bootstrap_case(seed=5)
    with pytest.raises(ValueError, match="chunk"):
        bootstrap_bradley_terry(a, b, p, 6, units, resamples=10, seed=0, chunk=(5, 11))
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_bradley_terry(a, b, p, 6, units, resamples=0, seed=0)
    first = bootstrap_bradley_terry(a, b, p, 6, units, resamples=10, seed=0, chunk=(0, 4))
    last = bootstrap_bradley_terry(a, b, p, 6, units, resamples=10, seed=0, chunk=(5, 10))
    with pytest.raises(ValueError, match="gap"):
        merge_bootstrap_results([first, last])
    with pytest.raises(ValueError, match="cover"):
        merge_bootstrap_results([first])
    stranger = bootstrap_bradley_terry(a, b, p, 6, units, resamples=10, seed=1, chunk=(4, 10))
    with pytest.raises(ValueError, match="different runs"):
        merge_bootstrap_results([first, stranger])


def test_rounding_noise_does_not_break_ties():
    theta = np.array([[0.3, 0.3 + 1e-13, -0.6], [0.3 + 1e-13, 0.3, -0.6]])
    np.testing.assert_array_equal(ranks_from_theta(theta), [[1, 2, 3], [1, 2, 3]])
