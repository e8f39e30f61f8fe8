"""Structural similarity (SSIM) of two greyscale images: the measure the built-in local judge
compares each candidate with the reference by (docs/protocol.md "The built-in local judge").

Pure module: numpy and scipy in, a float out, no Django.

SSIM (Wang, Bovik, Sheikh and Simoncelli 2004) over square windows of ``window`` pixels:

    SSIM(x, y) = mean over windows of
        (2 μx μy + C1)(2 σxy + C2) / ((μx² + μy² + C1)(σx² + σy² + C2)),

C1 = (0.01 L)², C2 = (0.03 L)², L the data range (255 for 8-bit), local means, variances and
covariance over each window with the sample (N − 1) normalization, and only windows wholly inside
the image. These are scikit-image's ``structural_similarity`` defaults (7-pixel uniform windows,
``use_sample_covariance=True``); scikit-image is not a dependency of Arbiter (it would be for these
twenty lines only), so the formula is written here and the test checks it against a direct
window-by-window computation.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from stats.errors import StatisticsError

WINDOW = 7
K1 = 0.01
K2 = 0.03


def structural_similarity(x: np.ndarray, y: np.ndarray, *, data_range: float = 255.0, window: int = WINDOW) -> float:
    """The mean SSIM of two 2-D arrays of one shape (1 for identical images, lower the less alike)."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise StatisticsError(f"expected two 2-D images of one shape, got {a.shape} and {b.shape}")
    if min(a.shape) < window or window < 2:
        raise StatisticsError(f"images of {a.shape} are smaller than the {window}-pixel window")
    n = window * window
    mean = lambda image: ndimage.uniform_filter(image, size=window, mode="reflect")  # noqa: E731
    ux, uy = mean(a), mean(b)
    correction = n / (n - 1)  # sample (N − 1) statistics
    vx = correction * (mean(a * a) - ux * ux)
    vy = correction * (mean(b * b) - uy * uy)
    vxy = correction * (mean(a * b) - ux * uy)
    c1 = (K1 * data_range) ** 2
    c2 = (K2 * data_range) ** 2
    ssim = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    pad = (window - 1) // 2  # only windows wholly inside the image
    return float(ssim[pad : a.shape[0] - pad, pad : a.shape[1] - pad].mean())


__all__ = ["structural_similarity"]
