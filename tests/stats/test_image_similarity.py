"""``stats.image_similarity.structural_similarity`` against a direct computation of Wang et al.'s
formula window by window (plain loops, numpy's own variance and covariance with N − 1)."""

from __future__ import annotations

import numpy as np
import pytest

from stats.errors import StatisticsError
from stats.image_similarity import structural_similarity


def by_windows(x: np.ndarray, y: np.ndarray, window: int = 7, data_range: float = 255.0) -> float:
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    values = []
    for i in range(x.shape[0] - window + 1):
        for j in range(x.shape[1] - window + 1):
            a = x[i : i + window, j : j + window].ravel().astype(float)
            b = y[i : i + window, j : j + window].ravel().astype(float)
            cov = np.cov(a, b, ddof=1)
            values.append(
                ((2 * a.mean() * b.mean() + c1) * (2 * cov[0, 1] + c2))
                / ((a.mean() ** 2 + b.mean() ** 2 + c1) * (cov[0, 0] + cov[1, 1] + c2))
            )
    return float(np.mean(values))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_the_window_by_window_formula(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, size=(23, 31)).astype(float)
    y = np.clip(x + rng.normal(0, 40, size=x.shape), 0, 255)
    assert structural_similarity(x, y) == pytest.approx(by_windows(x, y), abs=1e-9)


def test_identical_is_one_and_more_noise_is_less_alike() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, size=(40, 40)).astype(float)
    assert structural_similarity(x, x) == pytest.approx(1.0)
    noisy = [structural_similarity(x, np.clip(x + rng.normal(0, s, x.shape), 0, 255)) for s in (5, 30, 90)]
    assert noisy[0] > noisy[1] > noisy[2]


def test_refuses_other_shapes_and_tiny_images() -> None:
    with pytest.raises(StatisticsError, match="one shape"):
        structural_similarity(np.zeros((8, 8)), np.zeros((8, 9)))
    with pytest.raises(StatisticsError, match="smaller than"):
        structural_similarity(np.zeros((5, 8)), np.zeros((5, 8)))
