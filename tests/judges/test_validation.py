"""SPEC §6 reply validation and §3 canonicalization (pure module, no database)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judges.validation import InvalidReply, canonical_answer, parse_reply, to_canonical, unwrap_fence

AXES = ["GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION", "TABLE"]


def reply(**overrides: object) -> str:
    data: dict[str, object] = {
        "winner": "A",
        "confidence": 4,
        "reason": "table preserved",
        "axes": [{"id": a, "score": s} for a, s in zip(AXES, [1, 0, 2], strict=True)],
    }
    data.update(overrides)
    return json.dumps(data)


def test_valid_primary_reply_is_kept_as_is() -> None:
    answer = canonical_answer(reply(), active_axes=AXES, order="primary")
    assert answer.winner == "A"
    assert answer.confidence == 4
    assert answer.axes_list() == [
        {"id": "GLOBAL_LAYOUT_FIDELITY", "score": 1},
        {"id": "TEXT_VISUAL_PRESENTATION", "score": 0},
        {"id": "TABLE", "score": 2},
    ]


def test_example_fenced_swapped_reply_maps_back_to_canonical() -> None:
    # The second line of the SPEC §8 example file.
    raw = '```json\n{"winner": "B", "confidence": 3, "reason": "right one keeps the table", "axes": [{"id": "GLOBAL_LAYOUT_FIDELITY", "score": -1}, {"id": "TEXT_VISUAL_PRESENTATION", "score": 0}, {"id": "TABLE", "score": -2}]}\n```'
    answer = canonical_answer(raw, active_axes=AXES, order="swapped")
    assert answer.winner == "A"
    assert dict(answer.axes) == {"GLOBAL_LAYOUT_FIDELITY": 1, "TEXT_VISUAL_PRESENTATION": 0, "TABLE": 2}
    assert answer.confidence == 3


@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```JSON\n{}\n```", "```\n{}\n```", "  ```json\n{}```  "])
def test_fence_variants_unwrap(fence: str) -> None:
    assert unwrap_fence(fence.replace("{}", reply())) == reply()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("Candidate B looks better to me.", "not strict JSON"),
        ("", "empty"),
        ("Here you go:\n```json\n" + reply() + "\n```", "not strict JSON"),
        ("```json\n" + reply() + "\n```\n```json\n" + reply() + "\n```", "more than one fenced block"),
        ("[1, 2]", "not a JSON object"),
        (reply(winner="a"), "$.winner"),
        (reply(winner="CANNOT_JUDGE"), "$.winner"),
        (reply(confidence=0), "$.confidence"),
        (reply(confidence=6), "$.confidence"),
        (reply(confidence=True), "$.confidence"),
        (reply(confidence=4.0), "$.confidence"),
        (reply(confidence="4"), "$.confidence"),
        (reply(reason=None), "$.reason"),
        (reply(axes={}), "$.axes must be a list"),
        (reply(axes=[{"id": a, "score": 0} for a in reversed(AXES)]), "out of order"),
        (reply(axes=[{"id": a, "score": 0} for a in AXES[:2]]), "exactly the active axes"),
        (reply(axes=[{"id": a, "score": 0} for a in [*AXES, "EXTRA"]]), "exactly the active axes"),
        (reply(axes=[{"id": a, "score": 3} for a in AXES]), "score must be an integer -2..2"),
        (reply(axes=[{"id": a, "score": True} for a in AXES]), "score must be an integer"),
        (reply(axes=[{"id": a, "score": 1.0} for a in AXES]), "score must be an integer"),
        (reply(axes=[{"id": a, "score": 0, "why": "x"} for a in AXES]), "exactly the keys id and score"),
        (reply(extra=1), "unexpected key"),
        ('{"winner": "A", "winner": "B", "confidence": 4, "reason": "", "axes": []}', "appears twice"),
        (reply().replace("4", "NaN", 1), "not"),
        (json.dumps({"winner": "A", "confidence": 4, "reason": "x"}), "missing key(s): axes"),
    ],
)
def test_invalid_replies_are_refused_with_a_reason(raw: str, message: str) -> None:
    with pytest.raises(InvalidReply) as info:
        canonical_answer(raw, active_axes=AXES, order="primary")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_tie_is_unchanged_and_zero_scores_stay_zero_when_swapped() -> None:
    raw = reply(winner="TIE", axes=[{"id": a, "score": 0} for a in AXES])
    answer = canonical_answer(raw, active_axes=AXES, order="swapped")
    assert answer.winner == "TIE"
    assert [s for _, s in answer.axes] == [0, 0, 0]


def test_unknown_order_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        canonical_answer(reply(), active_axes=AXES, order="sideways")


@given(
    winner=st.sampled_from(["A", "B", "TIE"]),
    scores=st.lists(st.integers(-2, 2), min_size=3, max_size=3),
    confidence=st.integers(1, 5),
)
def test_swapping_twice_is_the_identity_and_negates_once(winner: str, scores: list[int], confidence: int) -> None:
    raw = reply(winner=winner, confidence=confidence, axes=[{"id": a, "score": s} for a, s in zip(AXES, scores, strict=True)])
    shown = parse_reply(raw, AXES)
    once = to_canonical(shown, "swapped")
    assert to_canonical(once, "swapped") == shown
    assert [s for _, s in once.axes] == [-s for s in scores]
    assert once.winner == {"A": "B", "B": "A", "TIE": "TIE"}[winner]
