"""The rows ``kind_report`` reads from the database (other study kinds
(docs/study-kinds.md "The kind report"); docs/study-kinds.md).

- every answered trial of the kind's unit (comparison / predicate / item) in assignments that have
  a rater and are **not voided**, in each participant's order: by claim time (then assignment id)
  and trial position;
- the participants screened out before claiming a block (two failed comprehension attempts);
- the items' imported metric scores, the study's predicates and its systems.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db.models import F

from annotation.models import AssignmentState, Candidate, Predicate, Rater, Study, System, Trial

if TYPE_CHECKING:
    import pandas as pd

# Trial field → ORM path (every kind); the kind's report adds its unit's fields.
TRIAL_FIELDS: dict[str, str] = {
    "trial_id": "id",
    "assignment_id": "assignment_id",
    "position": "position",
    "swapped": "swapped",
    "is_repeat": "is_repeat",
    "attention_expected": "attention_expected",
    "rater": "assignment__rater__external_id",
    "comprehension_attempts": "assignment__rater__comprehension_attempts",
    "comprehension_passed": "assignment__rater__comprehension_passed",
    "label": "vote__label",
    "answers": "vote__answers",
    "response_ms": "vote__response_ms",
}


def answered_trial_rows(*, study: Study, unit: str, unit_fields: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every answered trial on a ``unit`` (the ``Trial`` foreign key) of a live, rater-held assignment."""
    paths = {**TRIAL_FIELDS, **unit_fields}
    qs = (
        Trial.objects.filter(
            assignment__block__study=study,
            assignment__rater__isnull=False,
            vote__isnull=False,
            **{f"{unit}__isnull": False},
        )
        .exclude(assignment__state=AssignmentState.VOIDED)
        .order_by(
            "assignment__rater__external_id",
            F("assignment__claimed_at").asc(nulls_last=True),
            "assignment_id",
            "position",
        )
    )
    return [dict(zip(paths, values, strict=True)) for values in qs.values_list(*paths.values())]


def screened_out_count(*, study: Study) -> int:
    """Participants screened out before claiming a block: two failed attempts, no assignment."""
    return Rater.objects.filter(
        study=study, comprehension_attempts__gte=2, comprehension_passed=False, assignments__isnull=True
    ).count()


def scores_frame(*, study: Study) -> pd.DataFrame:
    """Every item's imported metric scores (``item, metric, score``; the metric range is over all)."""
    import pandas as pd

    rows = [
        {"item": item, "metric": str(metric), "score": score}
        for item, metrics in Candidate.objects.filter(page__study=study)
        .order_by("page__position", "system__position", "id")
        .values_list("external_id", "metrics")
        for metric, score in (metrics or {}).items()
    ]
    return pd.DataFrame(rows, columns=["item", "metric", "score"])


def checklist_predicates_frame(*, study: Study) -> pd.DataFrame:
    """Every predicate of the study: its brief (cluster), question type and automatic answer."""
    import pandas as pd

    rows = [
        {
            "predicate": external_id,
            "brief": brief,
            "question_type": question_type or None,
            "automatic": automatic or None,
        }
        for external_id, brief, question_type, automatic in Predicate.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("external_id", "candidate__page__external_id", "question_type", "automatic")
    ]
    return pd.DataFrame(rows, columns=["predicate", "brief", "question_type", "automatic"])


def rule_output_rows(*, study: Study) -> list[dict[str, Any]]:
    """Every output scored by the rule verifiers (docs/protocol.md "AesCode's rule score"): its brief,
    system, item and stored result, in brief then system order."""
    return [
        {"brief": brief, "system": system, "item": item, "result": rule}
        for brief, system, item, rule in Candidate.objects.filter(page__study=study)
        .exclude(rule={})
        .order_by("page__position", "page__external_id", "system__position", "system__external_id")
        .values_list("page__external_id", "system__external_id", "external_id", "rule")
    ]


def system_ids(*, study: Study) -> list[str]:
    """The study's system ids by position."""
    return list(
        System.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("external_id", flat=True)
    )


__all__ = [
    "TRIAL_FIELDS",
    "answered_trial_rows",
    "checklist_predicates_frame",
    "rule_output_rows",
    "scores_frame",
    "screened_out_count",
    "system_ids",
]
