"""Judge reply validation and canonicalization (docs/protocol.md "Judges and calibration" (Reply), "Canonical
answers").

Pure: imports no Django and no project app. The live call path and the JSONL importer both use
:func:`canonical_answer`, so an imported raw reply is judged exactly like a live one.

Reply format (docs/protocol.md "Judges and calibration"): strict JSON ``{"winner": "A|B|TIE", "confidence":
1..5, "reason": str, "axes": [{"id": AXIS_ID, "score": -2..2}]}``; the axes match the active axes in
membership and order; scores and confidence are integers (``true``, ``1.0`` are refused). A reply that is
exactly one fenced JSON block is unwrapped first. Anything else raises :class:`InvalidReply`.

Canonicalization (docs/protocol.md "Canonical answers"): a ``swapped`` display showed canonical B as "A"; its
answer is mapped back by exchanging A and B and negating every axis score; TIE is unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from annotation.canonical import negate_scores, swap_label

WINNERS = ("A", "B", "TIE")
ORDERS = ("primary", "swapped")
REPLY_KEYS = ("winner", "confidence", "reason", "axes")
CONFIDENCE_RANGE = (1, 5)
SCORE_RANGE = (-2, 2)

# One fenced block and nothing else: ```json ... ``` (the language tag may be omitted).
_FENCE = re.compile(r"\A```[ \t]*(?:json)?[ \t]*\r?\n(?P<body>.*?)\r?\n?```\Z", re.IGNORECASE | re.DOTALL)


class InvalidReply(ValueError):
    """The reply does not follow the docs/protocol.md "Judges and calibration" format; ``str()`` is a one-line
    reason."""


@dataclass(frozen=True)
class JudgeAnswer:
    """A validated answer. ``axes`` is ``((axis_id, score), ...)`` in the active-axes order."""

    winner: str
    confidence: int
    reason: str
    axes: tuple[tuple[str, int], ...]

    def axes_list(self) -> list[dict[str, Any]]:
        return [{"id": axis_id, "score": score} for axis_id, score in self.axes]


def unwrap_fence(raw: str) -> str:
    """The JSON text of a reply: the body of a single fenced block, or the stripped reply."""
    text = raw.strip()
    match = _FENCE.match(text)
    if match:
        body = match.group("body")
        if "```" in body:
            raise InvalidReply("the reply holds more than one fenced block")
        return body.strip()
    return text


def _reject_constant(name: str) -> Any:
    raise InvalidReply(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidReply(f"key '{key}' appears twice")
        result[key] = value
    return result


# One decoder for every reply (``json.loads`` with hooks builds a new one per call): stateless, so
# shared safely; the same options as json.loads(text, object_pairs_hook=..., parse_constant=...).
_REPLY_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The C decoder without hooks, for the fast path only (it keeps a duplicate key's last value and
# takes NaN; _fast_reply counts the strings and checks every value's type, so neither gets through).
_PLAIN_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_WINNER_SET = frozenset(WINNERS)
_SWAPPED_WINNER = {"A": "B", "B": "A", "TIE": "TIE"}  # annotation.canonical.swap_label on the winners


def _json_literals(low: int, high: int) -> str:
    """The JSON integers low..high as a regex alternation (``-0`` is JSON for 0)."""
    texts = [str(v) for v in range(low, high + 1)] + (["-0"] if low <= 0 <= high else [])
    return "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True))


_WS = r"[ \t\n\r]*"  # JSON's whitespace (str.strip takes more, so only inside the object)
_PLAIN_ID = re.compile(r'[^"\\\x00-\x1f]+')  # an axis id that JSON writes as itself between quotes
# Per set of active axes: its pattern and the canonical axes tuple of each (swapped, score texts) seen.
_PlainAxes = dict[tuple[bool, tuple[str, ...]], tuple[tuple[str, int], ...]]
_PLAIN_PATTERNS: dict[tuple[str, ...], tuple[re.Pattern[str] | None, _PlainAxes]] = {}


def _plain_pattern(expected: tuple[str, ...]) -> tuple[re.Pattern[str] | None, _PlainAxes]:
    """The reply in the usual key order, any JSON whitespace, no escape in any string: one match
    gives winner, confidence, reason and the scores (None when an axis id is not plain)."""
    if expected in _PLAIN_PATTERNS:
        return _PLAIN_PATTERNS[expected]
    if len(_PLAIN_PATTERNS) >= 256:  # one per set of active axes: a handful per study
        _PLAIN_PATTERNS.clear()
    pattern = None
    if all(type(axis_id) is str and _PLAIN_ID.fullmatch(axis_id) for axis_id in expected):
        def member(key: str, value: str) -> str:
            return f'"{key}"{_WS}:{_WS}{value}'

        comma = f"{_WS},{_WS}"
        score = f"({_json_literals(*SCORE_RANGE)})"
        items = comma.join(
            r"\{" + _WS + member("id", f'"{re.escape(a)}"') + comma + member("score", score) + _WS + r"\}"
            for a in expected
        )
        pattern = re.compile(
            r"\{" + _WS + comma.join([
                member("winner", '"(' + "|".join(WINNERS) + ')"'),
                member("confidence", f"({_json_literals(*CONFIDENCE_RANGE)})"),
                member("reason", r'"([^"\\\x00-\x1f]*)"'),  # no escape: the text is the string
                member("axes", r"\[" + _WS + items + _WS + r"\]"),
            ]) + _WS + r"\}"
        )
    found = _PLAIN_PATTERNS[expected] = (pattern, {})
    return found


def _fast_reply(raw: str, expected: Sequence[str], *, swapped: bool = False) -> JudgeAnswer | None:
    """The answer of a plain, well-formed reply (canonical when ``swapped``,
    docs/protocol.md "Canonical answers"), or None to let the full path decide.

    Exact: it returns an answer only when :func:`parse_reply`'s full path would return the same
    one (a hypothesis test compares both), so every error still comes from the full path. Taken
    when the reply, or the body of its one fenced block, matches :func:`_plain_pattern` (the usual
    key order, no escape), or else is one JSON object with exactly the reply keys, no ``\\"``
    escape, no NUL, and as many ``"`` as its keys and strings need (so no key was given twice).
    """
    text = raw.strip()
    if text.startswith("```"):  # a fenced reply: unwrap_fence's body, or the full path's error
        fenced = _FENCE.match(text)
        if fenced is None or "```" in fenced.group("body"):
            return None
        text = fenced.group("body").strip()
    pattern, seen_axes = _plain_pattern(tuple(expected))
    match = pattern.fullmatch(text) if pattern is not None else None
    if match is not None:  # a valid JSON object with each key once, every value in range
        found = match.groups()
        key = (swapped, found[3:])
        canonical_axes = seen_axes.get(key)
        if canonical_axes is None:
            if len(seen_axes) >= 4096:
                seen_axes.clear()
            scores = [int(t) for t in key[1]]
            canonical_axes = seen_axes[key] = tuple(
                zip(expected, [(-v if v else 0) for v in scores] if swapped else scores, strict=True)
            )
        return JudgeAnswer(
            winner=_SWAPPED_WINNER[found[0]] if swapped else found[0], confidence=int(found[1]), reason=found[2],
            axes=canonical_axes,
        )
    if not text.startswith("{") or "\x00" in text or '\\"' in text:
        return None
    try:  # text is stripped and starts with "{": decode() is this scan ending at the last character
        data, end = _PLAIN_SCAN(text, 0)
    except (ValueError, RecursionError, StopIteration):
        return None
    if end != len(text):
        return None
    if type(data) is not dict or len(data) != 4:
        return None
    winner = data.get("winner")
    confidence = data.get("confidence")
    reason = data.get("reason")
    axes = data.get("axes")
    if (
        type(winner) is not str or winner not in _WINNER_SET
        or type(confidence) is not int or not CONFIDENCE_RANGE[0] <= confidence <= CONFIDENCE_RANGE[1]
        or type(reason) is not str or "\x00" in reason
        or type(axes) is not list or len(axes) != len(expected)
    ):
        return None
    lo, hi = SCORE_RANGE
    pairs = []
    for item, axis_id in zip(axes, expected, strict=True):
        if type(item) is not dict or len(item) != 2:
            return None
        score = item.get("score")
        if item.get("id") != axis_id or type(axis_id) is not str or type(score) is not int or not lo <= score <= hi:
            return None
        pairs.append((axis_id, (-score if score else 0) if swapped else score))
    # Every '"' delimits a string (no \" escape): 4 keys, winner and reason, and per axis 2 keys
    # and its id. A key given twice leaves more quotes than the decoded dicts hold.
    if text.count('"') != 2 * (6 + 3 * len(pairs)):
        return None
    if swapped:
        winner = _SWAPPED_WINNER[winner]
    return JudgeAnswer(winner=winner, confidence=confidence, reason=reason, axes=tuple(pairs))


def parse_reply(raw: str, active_axes: Sequence[str]) -> JudgeAnswer:
    """Validate a raw reply as displayed (not yet canonical). Raises :class:`InvalidReply`."""
    if type(raw) is str:
        fast = _fast_reply(raw, active_axes)
        if fast is not None:
            return fast
    return _parse_reply_full(raw, active_axes)


def decode_reply(raw: Any) -> Any:
    """The JSON value of a reply, strictly: text, at most one fenced block, no NUL, no duplicate key,
    no NaN (every reply form, ``judges.replies``). Raises :class:`InvalidReply`."""
    if not isinstance(raw, str):
        raise InvalidReply("the reply is not text")
    text = unwrap_fence(raw)
    if not text:
        raise InvalidReply("the reply is empty")
    if "\x00" in text:
        raise InvalidReply("the reply contains a NUL character")
    try:
        data = (
            json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
            if text.startswith("\ufeff")  # json.loads's own BOM message
            else _REPLY_DECODER.decode(text)
        )
    except json.JSONDecodeError as exc:
        raise InvalidReply(f"the reply is not strict JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidReply("the reply is nested too deeply to be an answer") from None
    return data


def _parse_reply_full(raw: str, active_axes: Sequence[str]) -> JudgeAnswer:
    """:func:`parse_reply` for any reply: every check in order, the first failure raised."""
    data = decode_reply(raw)
    if not isinstance(data, dict):
        raise InvalidReply("the reply is not a JSON object")
    missing = [k for k in REPLY_KEYS if k not in data]
    if missing:
        raise InvalidReply(f"missing key(s): {', '.join(missing)}")
    extra = sorted(k for k in data if k not in REPLY_KEYS)
    if extra:
        raise InvalidReply(f"unexpected key(s): {', '.join(extra)}")

    winner = data["winner"]
    if winner not in WINNERS or not isinstance(winner, str):
        raise InvalidReply(f"$.winner must be one of A, B, TIE, got {json.dumps(winner)[:40]}")
    confidence = data["confidence"]
    low, high = CONFIDENCE_RANGE
    if not _is_int(confidence) or not low <= confidence <= high:
        raise InvalidReply(f"$.confidence must be an integer {low}..{high}, got {json.dumps(confidence)[:40]}")
    reason = data["reason"]
    if not isinstance(reason, str):
        raise InvalidReply("$.reason must be a string")
    if "\x00" in reason:
        raise InvalidReply("$.reason contains a NUL character")

    axes = data["axes"]
    if not isinstance(axes, list):
        raise InvalidReply("$.axes must be a list")
    got_ids: list[Any] = []
    scores: list[int] = []
    lo, hi = SCORE_RANGE
    for i, item in enumerate(axes):
        if not isinstance(item, dict):
            raise InvalidReply(f"$.axes[{i}] must be an object")
        if set(item) != {"id", "score"}:
            raise InvalidReply(f"$.axes[{i}] must have exactly the keys id and score")
        score = item["score"]
        if not _is_int(score) or not lo <= score <= hi:
            raise InvalidReply(f"$.axes[{i}].score must be an integer {lo}..{hi}, got {json.dumps(score)[:40]}")
        got_ids.append(item["id"])
        scores.append(score)
    expected = list(active_axes)
    if got_ids != expected:
        if sorted(map(str, got_ids)) == sorted(expected) and len(got_ids) == len(expected):
            raise InvalidReply(f"$.axes are out of order: expected {expected}, got {got_ids}")
        raise InvalidReply(f"$.axes must be exactly the active axes {expected}, got {got_ids}")
    return JudgeAnswer(winner=winner, confidence=confidence, reason=reason, axes=tuple(zip(expected, scores, strict=True)))


def to_canonical(answer: JudgeAnswer, order: str) -> JudgeAnswer:
    """Map a displayed answer back to canonical A/B (docs/protocol.md "Canonical answers")."""
    if order not in ORDERS:
        raise ValueError(f"order must be primary or swapped, got {order!r}")
    if order == "primary":
        return answer
    return JudgeAnswer(
        winner=swap_label(answer.winner),
        confidence=answer.confidence,
        reason=answer.reason,
        axes=tuple(negate_scores(answer.axes)),
    )


def canonical_answer(raw: str, *, active_axes: Sequence[str], order: str) -> JudgeAnswer:
    """Validate a raw reply and return its canonical answer
    (docs/protocol.md "Judges and calibration", "Canonical answers")."""
    if type(raw) is str and order in ORDERS:
        fast = _fast_reply(raw, active_axes, swapped=order == "swapped")
        if fast is not None:
            return fast
    return to_canonical(_parse_reply_full(raw, active_axes), order)
