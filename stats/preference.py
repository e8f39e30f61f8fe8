"""The canonical vote encoding (docs/protocol.md "Canonical answers") and the human preference ``h_i``
(docs/protocol.md "Human reference and agreement", "Judges and calibration").

Pure: numpy in, numpy out, no Django. A canonical vote is worth A = 1, TIE = 0.5, B = 0
(``VOTE_VALUE``; CANNOT_JUDGE and anything else have no value): judge votes
(docs/protocol.md "Judges and calibration", "Deployment leaderboard") use it, and ``h_i``, the human
preference for A on comparison ``i``, is the mean of it over the valid main votes. ``human_preferences`` is
the one place that turns votes into ``h_i``: the agreement report, the calibration inputs and the
leaderboard's human labels all call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stats.bootstrap import ratio_of_sums
from stats.errors import StatisticsError

VOTE_VALUE: Mapping[str, float] = {"A": 1.0, "TIE": 0.5, "B": 0.0}
#: Valid labels in ordinal order (docs/protocol.md "Human reference and agreement": B = 0 < TIE = 1 < A = 2);
#: column order of count matrices.
ORDINAL_LABELS: tuple[str, ...] = ("B", "TIE", "A")


def label_counts(
    labels: Sequence[str] | np.ndarray, items: Sequence[object] | np.ndarray, item_order: Sequence[object]
) -> np.ndarray:
    """Per-item counts of valid labels, columns B, TIE, A (docs/protocol.md "Human reference and agreement").
    CANNOT_JUDGE is not counted."""
    index = {k: i for i, k in enumerate(item_order)}
    out = np.zeros((len(item_order), 3), dtype=np.int64)
    labels_arr = np.asarray(labels, dtype=object)
    items_arr = np.asarray(items, dtype=object)
    for col, lab in enumerate(ORDINAL_LABELS):
        sel = labels_arr == lab
        if sel.any():
            rows = np.fromiter((index[k] for k in items_arr[sel]), dtype=np.int64)
            np.add.at(out[:, col], rows, 1)
    return out


def human_reference(n_a: Any, n_t: Any, n_b: Any) -> np.ndarray | float:
    """docs/protocol.md "Human reference and agreement" human reference ``h_i = (n_A + 0.5 n_T) / (n_A + n_T +
    n_B)``; NaN when no valid vote.

    Example (docs/protocol.md "Human reference and agreement"): 3 A, 1 TIE, 1 B → 0.7. Accepts scalars or
    arrays.
    """
    a = np.asarray(n_a, dtype=float)
    t = np.asarray(n_t, dtype=float)
    b = np.asarray(n_b, dtype=float)
    if (a < 0).any() or (t < 0).any() or (b < 0).any():
        raise StatisticsError("vote counts must be non-negative")
    return ratio_of_sums(a + 0.5 * t, a + t + b)


def preference_of_counts(counts: np.ndarray) -> np.ndarray:
    """``h_i`` of every row of a ``(n, 3)`` B / TIE / A count matrix (``label_counts``); NaN for an empty row."""
    c = np.asarray(counts)
    return np.atleast_1d(np.asarray(human_reference(c[:, 2], c[:, 1], c[:, 0]), dtype=float))


def human_preferences(
    labels: Sequence[str] | np.ndarray, comparisons: Sequence[object] | np.ndarray, order: Sequence[object]
) -> tuple[np.ndarray, np.ndarray]:
    """Counts and ``h_i`` per comparison of ``order`` from the votes' ``labels``
    (docs/protocol.md "Human reference and agreement").

    ``labels`` and ``comparisons`` are the main votes (one entry per vote; CANNOT_JUDGE and other
    labels are not counted). Returns the ``(len(order), 3)`` B / TIE / A counts and ``h`` (NaN for
    a comparison without a valid vote).
    """
    counts = label_counts(labels, comparisons, order)
    return counts, preference_of_counts(counts)
