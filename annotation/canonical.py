"""Canonical answers (docs/protocol.md "Canonical answers"). Pure: no Django, importable from every layer and
app.

A display with ``swapped = true`` shows canonical B in the "A" slot. Its answer is mapped back by
exchanging A and B and negating every axis score; TIE and CANNOT_JUDGE are unchanged. Downstream
everything uses canonical values, encoded A = 1, TIE = 0.5, B = 0 (``stats.preference.VOTE_VALUE``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def swap_label(label: str) -> str:
    """A ↔ B; every other label (TIE, CANNOT_JUDGE, ...) is unchanged."""
    return {"A": "B", "B": "A"}.get(label, label)


def negate_scores(scores: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """Axis scores seen from the other side (``0`` stays ``0``, never ``-0``)."""
    return [(axis, -score if score else 0) for axis, score in scores]


def canonical_label(label: str, *, swapped: bool) -> str:
    return swap_label(label) if swapped else label


def canonical_scores(scores: Mapping[str, int], *, swapped: bool) -> dict[str, int]:
    return dict(negate_scores(scores.items())) if swapped else dict(scores)
