"""A rater's answer to one trial, as the kinds clean it
(docs/protocol.md "Canonical answers", "Planning the human study",
docs/study-kinds.md "Running the other study kinds").

``VoteAnswer`` is an answer as given (display orientation), validated; each kind's design cleans the
posted fields into one (``StudyDesign.answer_clean``). ``VoteAnswer.canonical`` maps it to canonical
values through ``annotation.canonical`` (docs/protocol.md "Canonical answers"), the one home of that mapping.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from annotation.canonical import canonical_label, canonical_scores
from annotation.errors import ValidationFailed
from annotation.models import PAIRWISE_LABELS, Label

AXIS_SCORES = (-2, -1, 0, 1, 2)
# The verdict buttons of a pairwise trial: (value, text, keyboard key).
PAIRWISE_VERDICTS = (
    (Label.A, "A", "a"), (Label.B, "B", "b"), (Label.TIE, "Tie", "t"), (Label.CANNOT_JUDGE, "Cannot judge", "x"),
)
RATIONALE_MAX = 4000


@dataclass(frozen=True)
class VoteAnswer:
    """An answer as the rater gave it (display orientation), validated."""

    verdict: str
    confidence: int | None
    axes: dict[str, int]
    rationale: str
    ratings: dict[str, int] | None = None

    def request_hash(self) -> str:
        fields: dict[str, Any] = {
            "verdict": self.verdict, "confidence": self.confidence, "axes": self.axes, "rationale": self.rationale,
        }
        if self.ratings is not None:
            fields["ratings"] = self.ratings
        body = json.dumps(fields, sort_keys=True, ensure_ascii=True)
        return hashlib.sha256(body.encode()).hexdigest()

    def canonical(self, *, swapped: bool) -> tuple[str, dict[str, int]]:
        """docs/protocol.md "Canonical answers": a swapped display exchanges A and B and negates every axis
        score."""
        return canonical_label(self.verdict, swapped=swapped), canonical_scores(self.axes, swapped=swapped)


def int_field(value: object, *, field: str, allowed: tuple[int, ...]) -> int:
    if isinstance(value, bool):
        raise ValidationFailed("must be an integer", field=field)
    if isinstance(value, str):
        text = value.strip().replace("−", "-").lstrip("+")
        if not re.fullmatch(r"-?\d{1,9}", text):  # bounded: int() of 4,300+ digits raises ValueError
            raise ValidationFailed(f"must be one of {', '.join(map(str, allowed))}", field=field)
        value = int(text)
    if not isinstance(value, int) or value not in allowed:
        raise ValidationFailed(f"must be one of {', '.join(map(str, allowed))}", field=field)
    return value


def pairwise_answer_clean(
    *, active_axes: list[str], verdict: object, confidence: object, axes: Mapping[str, object], rationale: object
) -> VoteAnswer:
    """Validate a pairwise answer: verdict, confidence 1–5, every active axis −2…+2 (none for CANNOT_JUDGE)."""
    if verdict not in PAIRWISE_LABELS:
        raise ValidationFailed("choose A, B, Tie or Cannot judge", field="verdict")
    conf = int_field(confidence, field="confidence", allowed=(1, 2, 3, 4, 5))
    unknown = sorted(set(axes) - set(active_axes))
    if unknown:
        raise ValidationFailed(f"'{unknown[0]}' is not an active axis of this trial", field="axes")
    scores: dict[str, int] = {}
    if verdict != Label.CANNOT_JUDGE:
        for axis_id in active_axes:
            if axis_id not in axes or axes[axis_id] in (None, ""):
                raise ValidationFailed("score every axis (−2 … +2)", field=f"axis:{axis_id}")
            scores[axis_id] = int_field(axes[axis_id], field=f"axis:{axis_id}", allowed=AXIS_SCORES)
    return VoteAnswer(verdict=str(verdict), confidence=conf, axes=scores, rationale=rationale_clean(rationale))


def rationale_clean(rationale: object, *, field: str = "rationale") -> str:
    text = str(rationale or "").strip()
    if len(text) > RATIONALE_MAX:
        raise ValidationFailed(f"at most {RATIONALE_MAX} characters", field=field)
    return text
