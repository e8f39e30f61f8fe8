"""docs/protocol.md "Canonical answers" canonicalization, the one implementation every layer calls."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from annotation.canonical import canonical_label, canonical_scores, swap_label
from stats.preference import VOTE_VALUE

LABELS = st.sampled_from(["A", "B", "TIE", "CANNOT_JUDGE"])
SCORES = st.dictionaries(st.sampled_from(["GLOBAL", "TEXT", "TABLE"]), st.integers(-2, 2))


def test_swapped_display_maps_back() -> None:
    assert canonical_label("A", swapped=True) == "B"
    assert canonical_label("B", swapped=True) == "A"
    assert canonical_label("TIE", swapped=True) == "TIE"
    assert canonical_label("CANNOT_JUDGE", swapped=True) == "CANNOT_JUDGE"
    assert canonical_label("A", swapped=False) == "A"
    assert canonical_scores({"TABLE": -2, "TEXT": 0}, swapped=True) == {"TABLE": 2, "TEXT": 0}
    assert VOTE_VALUE == {"A": 1.0, "TIE": 0.5, "B": 0.0}


@given(LABELS, SCORES)
def test_mapping_twice_is_the_identity_and_mirrors_the_encoding(label: str, scores: dict[str, int]) -> None:
    assert canonical_label(canonical_label(label, swapped=True), swapped=True) == label
    assert canonical_scores(canonical_scores(scores, swapped=True), swapped=True) == scores
    if label in VOTE_VALUE:
        assert VOTE_VALUE[swap_label(label)] == 1.0 - VOTE_VALUE[label]
