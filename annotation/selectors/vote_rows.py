"""Reads of canonical human votes
(docs/protocol.md "Canonical answers", "Human reference and agreement", "Files"), row by row: what the votes
CSV exports and ``annotation.selectors.votes.votes_frame`` turns into the table every analysis uses (no pandas
here, so the commands and the kinds registry that use these rows do not load it).

One query (``values_list`` over the joins), no per-row lookups: 10,000 votes take a few tens of
milliseconds. Only pairwise votes are read: trials on a comparison whose vote carries one of the
labels A, B, TIE, CANNOT_JUDGE, in assignments that have a rater.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from annotation.models import PAIRWISE_LABELS, AssignmentState, Axis, Study, Vote

AXIS_PREFIX = "axis:"

# Output column → ORM path, in output order (before the axis columns).
_FIELDS: dict[str, str] = {
    "comparison": "trial__comparison__external_id",
    "page": "trial__comparison__page__external_id",
    "block": "trial__assignment__block__name",
    "rater": "trial__assignment__rater__external_id",
    "system_a": "trial__comparison__candidate_a__system__external_id",
    "system_b": "trial__comparison__candidate_b__system__external_id",
    "position": "trial__position",
    "swapped": "trial__swapped",
    "is_repeat": "trial__is_repeat",
    "label": "label",
    "confidence": "confidence",
    "response_ms": "response_ms",
    "rationale": "rationale",
    "voided": "trial__assignment__state",
    "axis_scores": "axis_scores",
    "history": "history",
    "answers": "answers",
    "allocation_probability": "trial__allocation_probability",
}


@dataclass(frozen=True)
class VoteRow:
    """One stored pairwise vote with the identities of the docs/protocol.md "Files" votes CSV (canonical
    values)."""

    comparison: str
    page: str
    block: str
    rater: str
    system_a: str
    system_b: str
    position: int
    swapped: bool
    is_repeat: bool
    label: str
    confidence: int | None
    response_ms: int | None
    rationale: str
    voided: bool
    axis_scores: dict[str, int]
    # Earlier answers replaced with Undo, oldest first (``Vote.history``); empty: never revised.
    history: tuple[dict[str, Any], ...] = ()
    # ``Vote.answers``: ``axes_defaulted`` lists the axes set with the verdict key and left so (issue 30).
    answers: dict[str, Any] = field(default_factory=dict)
    # A serve-time trial's probability of its pair when it was chosen (docs/protocol.md "Serve-time choice").
    allocation_probability: float | None = None

    @property
    def first_label(self) -> str:
        """The canonical label first given (docs/protocol.md "Files" ``first_label``); empty when never
        revised."""
        return str(self.history[0].get("label", "")) if self.history else ""


def study_axis_ids(*, study: Study) -> list[str]:
    """The study's axis ids in their defined order (the order of the ``axis:<ID>`` columns)."""
    return list(Axis.objects.filter(study=study).order_by("position").values_list("axis_id", flat=True))


def study_has_served_votes(*, study: Study) -> bool:
    """Whether some vote of the study answers a trial chosen at serve time (it has a probability)."""
    return Vote.objects.filter(trial__assignment__block__study=study, trial__allocation_probability__isnull=False).exists()


def study_has_revised_votes(*, study: Study) -> bool:
    """Whether a rater changed some answer of the study with Undo (``Vote.history`` not empty)."""
    return Vote.objects.filter(trial__assignment__block__study=study).exclude(history=[]).exists()


def vote_rows(*, study: Study, include_voided: bool = False) -> Iterator[VoteRow]:
    """Every pairwise vote of ``study`` in export order: block, assignment slot, trial position.

    Votes of voided assignments are left out unless ``include_voided``; attention checks
    (docs/study-kinds.md "Scheduling") are never data and always left out.
    """
    qs = Vote.objects.filter(
        trial__assignment__block__study=study,
        trial__comparison__isnull=False,
        trial__attention_expected="",
        trial__assignment__rater__isnull=False,
        label__in=[str(label) for label in PAIRWISE_LABELS],
    )
    if not include_voided:
        qs = qs.exclude(trial__assignment__state=AssignmentState.VOIDED)
    qs = qs.order_by(
        "trial__assignment__block__position",
        "trial__assignment__block__name",
        "trial__assignment__slot",
        "trial__assignment__id",
        "trial__position",
    )
    for values in qs.values_list(*_FIELDS.values()).iterator(chunk_size=5000):
        row: dict[str, Any] = dict(zip(_FIELDS, values, strict=True))
        row["voided"] = row["voided"] == AssignmentState.VOIDED
        row["axis_scores"] = dict(row["axis_scores"] or {})
        row["history"] = tuple(row["history"] or ())
        row["answers"] = dict(row["answers"] or {})
        yield VoteRow(**row)
