"""docs/protocol.md "Judges and calibration" reply validation and docs/protocol.md "Canonical answers"
canonicalization (pure module, no database)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
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
    # The second line of the docs/protocol.md "Files" example file.
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


# The fast path for a plain well-formed reply (judges.validation._fast_reply) against the full
# path: the same answer, or the same InvalidReply message, on generated valid and invalid replies.

_SCALARS = st.one_of(
    st.integers(-4, 7), st.sampled_from([True, False, None, 1.0, 2.5, "A", "B", "TIE", "a", "", "NaN"]),
    st.text(max_size=8),
)


def _pairs_text(pairs: list[tuple[str, str]], sep: str) -> str:
    """A JSON object from (key, value text) pairs, so a key may be given twice."""
    return "{" + sep.join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"


@st.composite
def _replies(draw: st.DrawFn) -> str:
    ascii_only = draw(st.booleans())

    def enc(value: object) -> str:
        return json.dumps(value, ensure_ascii=ascii_only)

    axes = []
    ids = AXES if draw(st.integers(0, 2)) else draw(st.sampled_from([AXES[:2], AXES[::-1], [*AXES, "EXTRA"], []]))
    for axis_id in ids:
        item = [("id", enc(draw(st.sampled_from([axis_id, axis_id.lower(), 3]))) if draw(st.integers(0, 9)) == 0
                       else enc(axis_id)),
                ("score", enc(draw(st.one_of(st.integers(-3, 3), _SCALARS))) if draw(st.integers(0, 4)) == 0
                 else enc(draw(st.integers(-2, 2))))]
        if draw(st.integers(0, 15)) == 0:
            item.append(draw(st.sampled_from([("score", "1"), ("id", enc(axis_id)), ("x", "0")])))
        axes.append(_pairs_text(item, draw(st.sampled_from([", ", ",", ",\n  "]))))
    pairs = [
        ("winner", enc(draw(st.sampled_from(["A", "B", "TIE"])) if draw(st.integers(0, 5)) else draw(_SCALARS))),
        ("confidence", enc(draw(st.integers(1, 5))) if draw(st.integers(0, 5))
         else draw(st.sampled_from(["NaN", "Infinity", "3.0", "true", "0", "6", "-1", "1e400"]))),
        ("reason", enc(draw(st.one_of(st.text(max_size=20), st.sampled_from(['say "hi"', "back\\slash", "nul\x00", "\\"]))))),
        ("axes", "[" + ", ".join(axes) + "]" if draw(st.integers(0, 12)) else enc(draw(_SCALARS))),
    ]
    pairs = draw(st.permutations(pairs))
    if draw(st.integers(0, 8)) == 0:
        pairs = pairs[: draw(st.integers(0, 3))]
    if draw(st.integers(0, 8)) == 0:
        pairs.append(draw(st.sampled_from([("winner", '"B"'), ("reason", '"again"'), ("extra", "1"), ("axes", "[]")])))
    text = _pairs_text(pairs, draw(st.sampled_from([", ", ",", ",\n"])))
    wrap = draw(st.sampled_from(["{}", "  {}\n", "```json\n{}\n```", "```\n{}```", "\ufeff{}", "[{}]", "{}x", "{}}"]))
    return wrap.replace("{}", text, 1) if draw(st.integers(0, 3)) == 0 else text


def _outcome(parse: object, raw: str, axes: list[str]) -> object:
    try:
        return parse(raw, axes)  # type: ignore[operator]
    except InvalidReply as exc:
        return ("InvalidReply", str(exc))


@settings(max_examples=400)
@given(_replies(), st.sampled_from(["primary", "swapped"]))
def test_fast_path_gives_what_the_full_path_gives(raw: str, order: str) -> None:
    from judges.validation import _parse_reply_full

    assert _outcome(parse_reply, raw, AXES) == _outcome(_parse_reply_full, raw, AXES)
    fast = _outcome(lambda r, a: canonical_answer(r, active_axes=a, order=order), raw, AXES)
    full = _outcome(lambda r, a: to_canonical(_parse_reply_full(r, a), order), raw, AXES)
    assert fast == full


def test_fast_path_takes_plain_replies_and_leaves_the_rest_to_the_full_path() -> None:
    from judges.validation import _fast_reply

    assert _fast_reply(reply(), AXES) == parse_reply(reply(), AXES)
    assert _fast_reply(json.dumps(json.loads(reply()), indent=2), AXES) is not None
    duplicate = reply().replace('"winner": "A"', '"winner": "B", "winner": "A"')
    assert _fast_reply(duplicate, AXES) is None
    with pytest.raises(InvalidReply, match="key 'winner' appears twice"):
        parse_reply(duplicate, AXES)
    assert _fast_reply(reply(reason='the "Submit" button'), AXES) is None
    assert parse_reply(reply(reason='the "Submit" button'), AXES).reason == 'the "Submit" button'
    assert _fast_reply(reply(confidence=float("nan")), AXES) is None
    swapped = _fast_reply(reply(), AXES, swapped=True)
    assert swapped == to_canonical(parse_reply(reply(), AXES), "swapped")
    assert swapped is not None and swapped.winner == "B" and swapped.axes[0] == (AXES[0], -1)
