"""Tests of the optional Davidson tie model (beyond the paper), against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from stats.bradley_terry import fit_bradley_terry
from stats.davidson import fit_davidson

SCALE = 400.0 / math.log(10.0)


def scipy_davidson(a, b, labels, n_systems, l2=1e-3):
    """The Davidson likelihood written out directly (π form) and maximized by scipy BFGS."""
    y = np.array([{"A": 1, "TIE": 0, "B": -1}[label] for label in labels])

    def negative(params):
        theta, log_nu = params[:n_systems], params[n_systems]
        pi_a, pi_b = np.exp(theta[a]), np.exp(theta[b])
        tie = np.exp(log_nu) * np.sqrt(pi_a * pi_b)
        total = pi_a + pi_b + tie
        prob = np.where(y > 0, pi_a, np.where(y < 0, pi_b, tie)) / total
        return -(np.sum(np.log(prob)) - l2 * np.sum(theta**2))

    result = minimize(negative, np.zeros(n_systems + 1), method="BFGS", options={"gtol": 1e-9})
    theta = result.x[:n_systems] - result.x[:n_systems].mean()
    return SCALE * theta, math.exp(result.x[n_systems])


def simulate(rng, n_systems, n, nu):
    theta = rng.normal(0, 0.8, n_systems)
    a = rng.integers(0, n_systems, n)
    b = (a + rng.integers(1, n_systems, n)) % n_systems
    half = 0.5 * (theta[a] - theta[b])
    weights = np.stack([np.exp(half), np.full(n, nu), np.exp(-half)], axis=1)
    prob = weights / weights.sum(axis=1, keepdims=True)
    draws = (rng.random(n)[:, None] > np.cumsum(prob, axis=1)).sum(axis=1)
    labels = np.array(["A", "TIE", "B"])[draws]
    return a, b, labels, theta


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_independent_scipy_fit(seed):
    rng = np.random.default_rng(seed)
    a, b, labels, _ = simulate(rng, 5, 500, nu=0.7)
    fit = fit_davidson(a, b, labels, 5)
    scores, nu = scipy_davidson(a, b, labels, 5)
    np.testing.assert_allclose(fit.scores, scores, atol=0.05)
    assert fit.tie_parameter == pytest.approx(nu, rel=1e-4)
    assert fit.gradient_norm < 1e-10
    p_a, p_t, p_b = fit.probabilities(0, 1)
    assert p_a + p_t + p_b == pytest.approx(1.0)


def test_equal_systems_closed_form_tie_parameter():
    # Symmetric data: θ = 0 and P(TIE) = ν / (2 + ν) equals the tie share t, so ν = 2t / (1 − t).
    labels = ["A"] * 30 + ["B"] * 30 + ["TIE"] * 40
    a = np.zeros(100, dtype=int)
    b = np.ones(100, dtype=int)
    fit = fit_davidson(a, b, labels, 2)
    np.testing.assert_allclose(fit.theta, [0.0, 0.0], atol=1e-12)
    assert fit.tie_parameter == pytest.approx(2 * 0.4 / 0.6, rel=1e-10)


def test_recovers_abilities_and_tie_parameter():
    rng = np.random.default_rng(4)
    a, b, labels, theta = simulate(rng, 6, 60_000, nu=1.2)
    fit = fit_davidson(a, b, labels, 6)
    assert np.max(np.abs(fit.theta - (theta - theta.mean()))) < 0.05
    assert fit.tie_parameter == pytest.approx(1.2, rel=0.05)
    # Beside plain Bradley–Terry (ties as ½): same order on clearly separated systems.
    bt = fit_bradley_terry(a, b, np.array([{"A": 1.0, "TIE": 0.5, "B": 0.0}[x] for x in labels]), 6)
    assert np.corrcoef(bt.theta, fit.theta)[0, 1] > 0.99


def test_numeric_outcomes_equal_labels():
    rng = np.random.default_rng(2)
    a, b, labels, _ = simulate(rng, 4, 200, nu=0.5)
    numeric = np.array([{"A": 1.0, "TIE": 0.5, "B": 0.0}[x] for x in labels])
    np.testing.assert_allclose(fit_davidson(a, b, numeric, 4).theta, fit_davidson(a, b, labels, 4).theta)


@pytest.mark.parametrize(
    ("labels", "message"),
    [(["A", "MAYBE"], "expected A, TIE or B"), ([1.0, 0.3], "expected 1"), (["A", "B"], "at least one tie")],
)
def test_bad_labels_raise(labels, message):
    with pytest.raises(ValueError, match=message):
        fit_davidson(np.array([0, 1]), np.array([1, 0]), labels, 2)
