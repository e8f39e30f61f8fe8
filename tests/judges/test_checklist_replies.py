"""Checklist judge replies (docs/protocol.md "Checklist judges"): strict JSON, each fault a one-line reason."""

from __future__ import annotations

import json

import pytest

from judges.replies import ChecklistItem, ReplyContract, parse_checklist_reply
from judges.validation import InvalidReply

IDS = ("Q1", "Q2", "Q3")


def reply(**changes: object) -> dict[str, object]:
    answers = [
        {"id": "Q1", "answer": "yes", "evidence": "headline top left"},
        {"id": "Q2", "answer": "no", "evidence": "no date anywhere"},
        {"id": "Q3", "answer": "unclear", "evidence": "too small to read"},
    ]
    return {"answers": answers, **changes}


def test_a_valid_reply_parses_in_question_order_and_scores_passes() -> None:
    items = parse_checklist_reply(json.dumps(reply()), IDS)
    assert [(i.id, i.answer, i.passed) for i in items] == [
        ("Q1", "YES", True),
        ("Q2", "NO", False),
        ("Q3", "UNCLEAR", False),
    ]


def test_a_fenced_reply_is_unwrapped() -> None:
    items = parse_checklist_reply("```json\n" + json.dumps(reply()) + "\n```", IDS)
    assert [i.answer for i in items] == ["YES", "NO", "UNCLEAR"]


def test_a_yes_without_evidence_is_kept_and_fails() -> None:
    doc = reply()
    doc["answers"][0]["evidence"] = "   "  # type: ignore[index]
    (first, *_rest) = parse_checklist_reply(json.dumps(doc), IDS)
    assert first == ChecklistItem("Q1", "YES", "")
    assert first.passed is False


def _broken(edit: str) -> str:
    doc = reply()
    answers = doc["answers"]
    assert isinstance(answers, list)
    if edit == "malformed":
        return json.dumps(doc)[:-2]
    if edit == "missing evidence":
        del answers[1]["evidence"]
    elif edit == "unknown answer":
        answers[2]["answer"] = "maybe"
    elif edit == "upper-case answer":
        answers[2]["answer"] = "UNCLEAR"
    elif edit == "extra key in a question":
        answers[0]["confidence"] = 4
    elif edit == "extra key at the top":
        doc["reason"] = "fine"
    elif edit == "missing question":
        del answers[2]
    elif edit == "out of order":
        answers[0], answers[1] = answers[1], answers[0]
    elif edit == "evidence not text":
        answers[0]["evidence"] = ["top"]
    elif edit == "duplicate key":
        return '{"answers": [], "answers": []}'
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        ("malformed", "the reply is not strict JSON"),
        ("missing evidence", "$.answers[1]: missing key(s): evidence"),
        ("unknown answer", '$.answers[2].answer must be one of yes, no, unclear, got "maybe"'),
        ("upper-case answer", '$.answers[2].answer must be one of yes, no, unclear, got "UNCLEAR"'),
        ("extra key in a question", "$.answers[0]: unexpected key(s): confidence"),
        ("extra key at the top", "the reply: unexpected key(s): reason"),
        ("missing question", "$.answers ids must be exactly ['Q1', 'Q2', 'Q3'], got ['Q1', 'Q2']"),
        ("out of order", "$.answers ids are out of order"),
        ("evidence not text", "$.answers[0].evidence must be a string"),
        ("duplicate key", "key 'answers' appears twice"),
    ],
)
def test_each_fault_is_refused_with_its_reason(edit: str, reason: str) -> None:
    with pytest.raises(InvalidReply) as caught:
        parse_checklist_reply(_broken(edit), IDS)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_contract_asks_for_every_question_in_its_schema_and_repair_turn() -> None:
    contract = ReplyContract("answers", IDS)
    schema = contract.schema()
    item = schema["properties"]["answers"]["items"]
    assert item["properties"]["id"]["enum"] == list(IDS)
    assert item["properties"]["answer"]["enum"] == ["yes", "no", "unclear"]
    assert item["required"] == ["id", "answer", "evidence"] and item["additionalProperties"] is False
    assert "['Q1', 'Q2', 'Q3']" in contract.repair("missing key(s): evidence")
    parsed = contract.parse(json.dumps(reply()), "primary")
    assert parsed.fields["winner"] == "" and len(parsed.checklist) == 3


def test_a_verdict_contract_is_the_protocols_reply() -> None:
    raw = json.dumps({"winner": "A", "confidence": 4, "reason": "r", "axes": [{"id": "X", "score": 1}]})
    parsed = ReplyContract("verdict", ("X",)).parse(raw, "swapped")
    assert parsed.fields["winner"] == "B" and parsed.fields["axis_scores"] == [{"id": "X", "score": -1}]
    assert parsed.checklist == ()
