"""docs/protocol.md "Deployment leaderboard" (Proxy outcome): ``p̂_i(A) = clip(Σ_j β_j v_ij, 0, 1)`` from one
canonical vote per judge.

Pure module: numpy in, numpy out, no Django. ``v_ij`` is judge j's canonical vote on comparison i
(docs/protocol.md "Canonical answers" encoding A = 1, TIE = 0.5, B = 0), taken from its primary-order,
repeat-0 output; β the frozen coefficients. This is the same prediction as ``stats.judge_weights.predict``
(docs/protocol.md "Judges and calibration"; a test checks they agree); it is a module of its own so that the
leaderboard does not import the calibration fitting stack (statsmodels), which would cost a second at every
command start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["proxy_outcomes"]


def proxy_outcomes(votes: np.ndarray, coefficients: Sequence[float] | np.ndarray) -> np.ndarray:
    """``clip(votes @ β, 0, 1)`` per comparison; ``votes`` is (n, J) without missing values."""
    v = np.asarray(votes, dtype=np.float64)
    beta = np.asarray(coefficients, dtype=np.float64)
    if v.ndim != 2 or beta.ndim != 1 or v.shape[1] != beta.shape[0]:
        raise ValueError(f"votes must be (n, {beta.shape[0] if beta.ndim == 1 else '?'}), got {v.shape}")
    if not np.all(np.isfinite(v)) or not np.all(np.isfinite(beta)):
        raise ValueError("votes and coefficients must be finite")
    return np.clip(v @ beta, 0.0, 1.0)
