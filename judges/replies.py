"""The reply forms a judge call can ask for (docs/protocol.md "Judge requests by study kind"; decision 0077).

Pure: imports no Django. A :class:`ReplyContract` is what one call expects back: its form (``verdict``,
``answers`` or ``ratings``, as a study kind's ``JudgeRequestPlan.reply`` names it), the ids the reply
answers in order (the active axes, the question ids, the dimensions) and, for ratings, the scale. It
gives the structured-output schema, the repair turn sent after an invalid reply, and the parsed
answer, so the call path, batches and the providers never ask which kind a study is.

Checklist replies (docs/protocol.md "Checklist judges"): strict JSON
``{"answers": [{"id": "Q1", "answer": "yes|no|unclear", "evidence": str}, ...]}``, every question id
exactly once in the order given; a question object has exactly those three keys; the answer is one
of the three words (any other, or another case, is refused); ``evidence`` must be a string (a missing
key is an invalid reply, an empty string is kept and scored a failure). A reply that is exactly one
fenced JSON block is unwrapped first, duplicate keys and NaN are refused, as for verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judges.providers.schema import repair_prompt, reply_schema
from judges.validation import InvalidReply, _is_int, canonical_answer, decode_reply

# The reply forms (annotation.kinds.judging names them; judges never names a study kind).
REPLY_VERDICT = "verdict"
REPLY_ANSWERS = "answers"  # a checklist: yes / no / unclear with evidence per question
REPLY_RATINGS = "ratings"
CHECKLIST_ANSWERS = {"yes": "YES", "no": "NO", "unclear": "UNCLEAR"}
CHECKLIST_ITEM_KEYS = ("id", "answer", "evidence")
EVIDENCE_MAX = 4000


@dataclass(frozen=True)
class ChecklistItem:
    """One question's answer: ``answer`` is YES / NO / UNCLEAR; ``passed`` only for YES with evidence."""

    id: str
    answer: str
    evidence: str

    @property
    def passed(self) -> bool:
        """AesCode §E.1 scoring (docs/protocol.md "Checklist judges"): a question passes on a yes that cites
        visible evidence; no, unclear and a yes without evidence fail."""
        return self.answer == "YES" and bool(self.evidence.strip())


@dataclass(frozen=True)
class ParsedReply:
    """A validated reply: the ``JudgeOutput`` fields it sets and, for a checklist, its questions."""

    fields: dict[str, Any]
    checklist: tuple[ChecklistItem, ...] = ()


def _object_with(data: Any, keys: Sequence[str], where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidReply(f"{where} is not a JSON object")
    missing = [k for k in keys if k not in data]
    if missing:
        raise InvalidReply(f"{where}: missing key(s): {', '.join(missing)}")
    extra = sorted(str(k) for k in data if k not in keys)
    if extra:
        raise InvalidReply(f"{where}: unexpected key(s): {', '.join(extra)}")
    return data


def _ids_in_order(got: list[Any], expected: Sequence[str], where: str) -> None:
    if got != list(expected):
        if len(got) == len(expected) and sorted(map(str, got)) == sorted(expected):
            raise InvalidReply(f"{where} are out of order: expected {list(expected)}, got {got}")
        raise InvalidReply(f"{where} must be exactly {list(expected)}, got {got}")


def parse_checklist_reply(raw: Any, question_ids: Sequence[str]) -> tuple[ChecklistItem, ...]:
    """Validate a checklist reply (module docstring); its answers in question order. Raises
    :class:`InvalidReply` with a one-line reason naming the first fault."""
    data = _object_with(decode_reply(raw), ("answers",), "the reply")
    answers = data["answers"]
    if not isinstance(answers, list):
        raise InvalidReply("$.answers must be a list")
    items: list[ChecklistItem] = []
    for i, entry in enumerate(answers):
        entry = _object_with(entry, CHECKLIST_ITEM_KEYS, f"$.answers[{i}]")
        answer = entry["answer"]
        if not isinstance(answer, str) or answer not in CHECKLIST_ANSWERS:
            raise InvalidReply(
                f"$.answers[{i}].answer must be one of yes, no, unclear, got {json.dumps(answer)[:40]}"
            )
        evidence = entry["evidence"]
        if not isinstance(evidence, str):
            raise InvalidReply(f"$.answers[{i}].evidence must be a string")
        if "\x00" in evidence:
            raise InvalidReply(f"$.answers[{i}].evidence contains a NUL character")
        if len(evidence) > EVIDENCE_MAX:
            raise InvalidReply(f"$.answers[{i}].evidence is longer than {EVIDENCE_MAX} characters")
        items.append(
            ChecklistItem(id=entry["id"], answer=CHECKLIST_ANSWERS[answer], evidence=evidence.strip())
        )
    _ids_in_order([item.id for item in items], question_ids, "$.answers ids")
    return tuple(items)


def parse_ratings_reply(
    raw: Any, dimensions: Sequence[str], scale: tuple[int, int]
) -> tuple[tuple[tuple[str, int], ...], str]:
    """Validate a ratings reply ``{"ratings": [{"id", "score"}], "reason"}``: every dimension once, in
    order, each an integer of the scale. Returns the scores and the reason."""
    data = _object_with(decode_reply(raw), ("ratings", "reason"), "the reply")
    if not isinstance(data["reason"], str) or "\x00" in data["reason"]:
        raise InvalidReply("$.reason must be a string without NUL")
    ratings = data["ratings"]
    if not isinstance(ratings, list):
        raise InvalidReply("$.ratings must be a list")
    low, high = scale
    pairs: list[tuple[Any, int]] = []
    for i, entry in enumerate(ratings):
        entry = _object_with(entry, ("id", "score"), f"$.ratings[{i}]")
        score = entry["score"]
        if not _is_int(score) or not low <= score <= high:
            raise InvalidReply(
                f"$.ratings[{i}].score must be an integer {low}..{high}, got {json.dumps(score)[:40]}"
            )
        pairs.append((entry["id"], score))
    _ids_in_order([p[0] for p in pairs], dimensions, "$.ratings ids")
    return tuple((str(d), s) for d, s in pairs), data["reason"]


def checklist_schema(question_ids: Sequence[str]) -> dict[str, Any]:
    """The structured-output schema of a checklist reply (the providers' common subset)."""
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(question_ids)} if question_ids else {"type": "string"},
            "answer": {"type": "string", "enum": list(CHECKLIST_ANSWERS)},
            "evidence": {"type": "string"},
        },
        "required": list(CHECKLIST_ITEM_KEYS),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "answers": {
                "type": "array",
                "items": item,
                "description": "every question id exactly once, in the order given: "
                + ", ".join(question_ids),
            }
        },
        "required": ["answers"],
        "additionalProperties": False,
    }


def ratings_schema(dimensions: Sequence[str], scale: tuple[int, int]) -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(dimensions)} if dimensions else {"type": "string"},
            "score": {"type": "integer", "enum": list(range(scale[0], scale[1] + 1))},
        },
        "required": ["id", "score"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"ratings": {"type": "array", "items": item}, "reason": {"type": "string"}},
        "required": ["ratings", "reason"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class ReplyContract:
    """What one call expects back (module docstring). ``ids``: the active axes (verdict), the question
    ids (checklist) or the dimensions (ratings), in order."""

    form: str = "verdict"  # REPLY_VERDICT
    ids: tuple[str, ...] = ()
    scale: tuple[int, int] | None = None

    def schema(self) -> dict[str, Any]:
        if self.form == REPLY_ANSWERS:
            return checklist_schema(self.ids)
        if self.form == REPLY_RATINGS:
            return ratings_schema(self.ids, self.scale or (1, 5))
        return reply_schema(self.ids)

    def repair(self, error: str) -> str:
        """The user turn that sends a validation error back to the model."""
        if self.form == REPLY_ANSWERS:
            return (
                f"Your answer was not accepted: {error}. Answer again with one JSON object of exactly the "
                f'requested shape; "answers" must list {list(self.ids)} in this order, each exactly once, '
                "each with an answer (yes, no or unclear) and its evidence."
            )
        if self.form == REPLY_RATINGS:
            return (
                f"Your answer was not accepted: {error}. Answer again with one JSON object of exactly the "
                f'requested shape; "ratings" must list {list(self.ids)} in this order, each exactly once.'
            )
        return repair_prompt(error, self.ids)

    def parse(self, raw: Any, order: str) -> ParsedReply:
        """The validated, canonical answer of a raw reply. Raises :class:`InvalidReply`."""
        if self.form == REPLY_ANSWERS:
            items = parse_checklist_reply(raw, self.ids)
            return ParsedReply(
                fields={"winner": "", "confidence": None, "axis_scores": [], "reason": ""}, checklist=items
            )
        if self.form == REPLY_RATINGS:
            scores, reason = parse_ratings_reply(raw, self.ids, self.scale or (1, 5))
            return ParsedReply(
                fields={
                    "winner": "",
                    "confidence": None,
                    "reason": reason,
                    "axis_scores": [{"id": d, "score": s} for d, s in scores],
                }
            )
        answer = canonical_answer(raw, active_axes=self.ids, order=order)
        return ParsedReply(
            fields={
                "winner": answer.winner,
                "confidence": answer.confidence,
                "axis_scores": answer.axes_list(),
                "reason": answer.reason,
            }
        )

    def reply_ids(self) -> int:
        """How many entries the reply lists (for the output-token estimate)."""
        return len(self.ids)


REPLY_FORMS = (REPLY_VERDICT, REPLY_ANSWERS, REPLY_RATINGS)
