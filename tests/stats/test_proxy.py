"""docs/protocol.md "Deployment leaderboard" proxy outcome (``stats.proxy``) equals the
docs/protocol.md "Judges and calibration" prediction of the calibration module."""

from __future__ import annotations

import numpy as np
import pytest

from stats.judge_weights import predict
from stats.proxy import proxy_outcomes


def test_proxy_equals_calibration_predict_and_clips() -> None:
    rng = np.random.default_rng(1)
    votes = rng.choice([0.0, 0.5, 1.0], size=(500, 4))
    beta = np.array([0.6, 0.5, -0.2, 0.4])  # unconstrained weights can push p̂ outside [0, 1]
    got = proxy_outcomes(votes, beta)
    assert np.array_equal(got, predict(votes, beta))
    assert got.min() == 0.0 and got.max() == 1.0
    brute = [min(1.0, max(0.0, sum(b * v for b, v in zip(beta, row, strict=True)))) for row in votes]
    assert np.allclose(got, brute, atol=1e-15)


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        proxy_outcomes(np.array([[1.0, np.nan]]), [0.5, 0.5])
    with pytest.raises(ValueError):
        proxy_outcomes(np.ones((2, 3)), [0.5, 0.5])
