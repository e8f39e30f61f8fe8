"""The serve-time choice's arithmetic without NumPy (docs/protocol.md "Serve-time choice"), for the
rater's request, which loads no scientific package: a pair's column, and each available pair's
probability of being served. ``stats.allocation.serve_time_choice`` uses the same formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stats.errors import StatisticsError


def pair_column_of(i: int, j: int, n_systems: int) -> int:
    """Column of the unordered pair {i, j} (i ≠ j) in row-major pair order
    (``stats.allocation.pair_column`` for one pair)."""
    low, high = min(i, j), max(i, j)
    return low * n_systems - low * (low + 1) // 2 + (high - low - 1)


def served_pair_probabilities(rule_shares: Sequence[float], floor: float, available: Sequence[int]) -> Mapping[int, float]:
    """Each available pair's probability: ``floor / K'`` spread evenly over the K' available pairs,
    the rest by the rule's shares renormalised over them (evenly when they are all zero)."""
    if not available:
        raise StatisticsError("no pair has a comparison left to serve")
    if not 0.0 <= floor <= 1.0:
        raise StatisticsError(f"floor must lie in [0, 1], got {floor!r}")
    shares = [float(rule_shares[c]) for c in available]
    total = sum(shares)
    rule = [s / total for s in shares] if total > 0 else [1.0 / len(available)] * len(available)
    return {c: floor / len(available) + (1.0 - floor) * r for c, r in zip(available, rule, strict=True)}
