"""The structured-output contract sent with every judge request (docs/protocol.md "Judges and calibration"
(Reply)).

Pure: no Django. :func:`reply_schema` is a JSON Schema built per request from the active axes —
winner enum, confidence 1..5, a reason, and exactly the active axis ids with integer scores
-2..2 — in the subset every provider's structured-output mode accepts (no ``minimum`` /
``prefixItems``: integer ranges are enums, every object closed and fully required). The schema
narrows what a model may emit; ``judges.validation`` stays the final word (it also checks the
order and completeness of the axes, which a schema cannot express in that subset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SCHEMA_NAME = "judgement"

SYSTEM_PROMPT = (
    "You are a careful, impartial evaluator of document-to-HTML conversions. Follow the user's "
    "instructions exactly and answer with one JSON object of the requested shape and nothing else."
)


def reply_schema(active_axes: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of a valid reply for these active axes."""
    axis_item: dict[str, Any] = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(active_axes)} if active_axes else {"type": "string"},
            "score": {"type": "integer", "enum": [-2, -1, 0, 1, 2]},
        },
        "required": ["id", "score"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "winner": {"type": "string", "enum": ["A", "B", "TIE"]},
            "confidence": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
            "reason": {"type": "string"},
            "axes": {
                "type": "array",
                "items": axis_item,
                "description": "every id of ACTIVE_AXES exactly once, in the order given: " + ", ".join(active_axes),
            },
        },
        "required": ["winner", "confidence", "reason", "axes"],
        "additionalProperties": False,
    }


def repair_prompt(error: str, active_axes: Sequence[str]) -> str:
    """The user turn that sends a validation error back to the model."""
    return (
        f"Your answer was not accepted: {error}. Answer again with one JSON object of exactly the "
        f"requested shape; \"axes\" must list {list(active_axes)} in this order, each exactly once."
    )
