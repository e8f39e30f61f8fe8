"""The oracle design for adjacent separation (stats.optimal_design), against a closed form, a
brute-force grid over the simplex and the project's own Bradley–Terry fit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from stats.allocation import _vote_information, contrast_variance, fit_pairs
from stats.errors import StatisticsError
from stats.optimal_design import (
    adjacent_contrasts,
    adjacent_oracle_design,
    contrast_variances,
    pair_information,
)
from stats.study_simulation import StudyAssumptions, bradley_terry_limit, simulated_truth


def _simplex_grid(k: int, steps: int) -> np.ndarray:
    """Every point of the simplex in R^k with coordinates in multiples of 1/steps."""
    rows = [
        np.diff(np.concatenate([[0], cuts, [steps]])) / steps
        for cuts in itertools.combinations_with_replacement(range(steps + 1), k - 1)
    ]
    return np.array(rows)


def _grid_worst(theta: np.ndarray, shares: np.ndarray) -> np.ndarray:
    """max_i c_iᵀ L(w)⁺ c_i for every row of ``shares``, by batched pseudo-inverses (inf when the
    design leaves the graph disconnected)."""
    m = len(theta)
    q = pair_information(theta)
    better, worse = adjacent_contrasts(theta)
    first, second = np.triu_indices(m, 1)
    lap = np.zeros((len(shares), m, m))
    lap[:, first, second] = -shares * q
    lap[:, second, first] = -shares * q
    lap[:, np.arange(m), np.arange(m)] = -lap.sum(axis=2)
    connected = np.linalg.eigvalsh(lap)[:, 1] > 1e-9
    s = np.linalg.pinv(lap[connected], hermitian=True)
    v = s[:, better, better] + s[:, worse, worse] - 2.0 * s[:, better, worse]
    out = np.full(len(shares), math.inf)
    out[connected] = v.max(axis=1)
    return out


def test_three_equal_systems_match_the_closed_form() -> None:
    # Triangle, equal strengths, contrasts (0,1) and (1,2): by symmetry w01 = w12 = a, w02 = 1 − 2a;
    # Var(θ0 − θ1) · q = 1 / (a + a(1 − 2a) / (1 − a)), least at a = 1 − 1/√3, value 1 + √3/2,
    # against 2 for uniform (and for the adjacent pairs alone).
    design = adjacent_oracle_design(np.zeros(3))
    a = 1.0 - 1.0 / math.sqrt(3.0)
    assert design.ratio == pytest.approx((1.0 + math.sqrt(3.0) / 2.0) / 2.0, rel=1e-6)
    assert design.lower_bound == pytest.approx(design.worst_variance, rel=1e-6)
    shares = dict(zip(zip(*np.triu_indices(3, 1), strict=True), design.shares, strict=True))
    far = shares[(0, 2)]
    assert far == pytest.approx(1.0 - 2.0 * a, abs=1e-4)
    assert shares[(0, 1)] == pytest.approx(a, abs=1e-4) and shares[(1, 2)] == pytest.approx(a, abs=1e-4)


@pytest.mark.parametrize("floor", [0.0, 0.25])
def test_four_unequal_systems_match_a_brute_force_grid(floor: float) -> None:
    theta = np.array([0.9, -0.4, 0.1, -1.2])  # an order that is not the index order
    design = adjacent_oracle_design(theta, floor=floor)
    grid = _simplex_grid(6, 24)
    worst = _grid_worst(theta, floor / 6 + (1.0 - floor) * grid)
    best = float(worst.min())
    # No grid design beats the optimum, which lies within the grid's resolution (steps of 1/24:
    # a few per cent) of the best of them; the certificate never exceeds any design.
    assert design.worst_variance <= best * (1 + 1e-9)
    assert design.worst_variance >= best * (1 - 0.05)
    assert design.lower_bound <= best and design.lower_bound >= design.worst_variance * (1 - 1e-4)
    assert design.ratio < 0.95  # uniform is not optimal here
    assert np.all(design.shares >= floor / 6 - 1e-12) and design.shares.sum() == pytest.approx(1.0)


def test_the_certificate_is_below_every_design_and_the_optimum_below_uniform() -> None:
    rng = np.random.default_rng(5)
    theta = rng.normal(0.0, 0.8, size=7)
    design = adjacent_oracle_design(theta)
    random_designs = rng.dirichlet(np.full(21, 0.5), size=4000)
    worst = _grid_worst(theta, random_designs)
    assert design.lower_bound <= worst.min()
    assert design.worst_variance <= worst.min()
    assert design.worst_variance < design.uniform_worst_variance
    assert design.ratio_lower_bound <= design.ratio <= 1.0
    # Every adjacent contrast of the true order is read, best first.
    order = np.argsort(-theta)
    assert list(design.better) == list(order[:-1]) and list(design.worse) == list(order[1:])


def test_information_is_the_bradley_terry_fits() -> None:
    # N votes in shares w with the true outcome rates: N × the fit's Var(θ_i − θ_j) tends to
    # c_iᵀ L(w)⁺ c_i, and q is the allocator's information per vote.
    theta = np.array([0.6, 0.0, -0.3, -0.9, 0.2])
    first, second = np.triu_indices(5, 1)
    shares = np.random.default_rng(3).dirichlet(np.ones(10))
    n = 1e7
    votes = n * shares
    points = votes / (1.0 + np.exp(-(theta[first] - theta[second])))
    fit = fit_pairs(votes[None, :], points[None, :])
    np.testing.assert_allclose(fit.theta[0], theta - theta.mean(), atol=1e-6)
    np.testing.assert_allclose(_vote_information(fit)[2][0], pair_information(theta), rtol=1e-6)
    better, worse = adjacent_contrasts(theta)
    fitted = n * contrast_variance(fit.covariance, better[None, :], worse[None, :])[0]
    np.testing.assert_allclose(
        fitted, contrast_variances(shares, pair_information(theta), better, worse), rtol=1e-4
    )


def test_a_disconnected_design_has_infinite_variance() -> None:
    theta = np.zeros(4)
    better, worse = adjacent_contrasts(theta)
    shares = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # only pair (0, 1)
    assert np.all(np.isinf(contrast_variances(shares, pair_information(theta), better, worse)))


@pytest.mark.parametrize(
    ("theta", "floor", "message"),
    [
        (np.array([0.3]), 0.0, "at least 2 strengths"),
        (np.array([0.0, np.nan, 1.0]), 0.0, "finite"),
        (np.zeros(3), 1.0, "floor must lie in"),
    ],
)
def test_bad_input_is_refused_in_one_line(theta: np.ndarray, floor: float, message: str) -> None:
    with pytest.raises(StatisticsError, match=message):
        adjacent_oracle_design(theta, floor=floor)


def test_the_bradley_terry_limit_solves_the_fits_score_equations_on_the_expected_answers() -> None:
    truth = simulated_truth(StudyAssumptions(n_systems=6), [11, 12])
    theta = bradley_terry_limit(truth)
    first, second = np.triu_indices(6, 1)
    p = truth.answer_probabilities
    expected = p[..., 0] + 0.5 * p[..., 1]
    fitted = 1.0 / (1.0 + np.exp(-(theta[:, first] - theta[:, second])))
    for r in range(2):
        # Every system's expected points over its pairs equal the fitted ones (the likelihood's
        # gradient is zero), and the order is the true scores' order.
        residual = np.zeros(6)
        np.add.at(residual, first, expected[r] - fitted[r])
        np.add.at(residual, second, fitted[r] - expected[r])
        np.testing.assert_allclose(residual, 0.0, atol=1e-6)
        assert list(np.argsort(-theta[r])) == list(np.argsort(-truth.elo[r]))
