"""Progress of many studies at once, for the study list, and a rater account's own studies (issue 17)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from annotation.models import Assignment, AssignmentState, Study, Trial

LIVE_OR_OPEN = (AssignmentState.OPEN, AssignmentState.ACTIVE, AssignmentState.FINISHED)


@dataclass(frozen=True)
class StudyListProgress:
    planned_trials: int
    answered: int
    finished: int
    assignments: int

    @property
    def percent(self) -> int:
        return int(100 * self.answered / self.planned_trials) if self.planned_trials else 0


def studies_progress(*, studies: list[Study]) -> dict[int, StudyListProgress]:
    """Answered / planned trials of not-voided assignments, per study (two grouped queries)."""
    ids = [s.pk for s in studies]
    trials = (
        Trial.objects.filter(assignment__block__study_id__in=ids, assignment__state__in=LIVE_OR_OPEN)
        .values("assignment__block__study_id")
        .annotate(planned=Count("id"), answered=Count("vote"))
        .order_by()
    )
    assignments = (
        Assignment.objects.filter(block__study_id__in=ids, state__in=LIVE_OR_OPEN)
        .values("block__study_id")
        .annotate(n=Count("id"), finished=Count("id", filter=Q(state=AssignmentState.FINISHED)))
        .order_by()
    )
    counts: dict[int, dict[str, int]] = {}
    for row in trials:
        counts.setdefault(row["assignment__block__study_id"], {}).update(
            planned=row["planned"], answered=row["answered"]
        )
    for arow in assignments:
        counts.setdefault(arow["block__study_id"], {}).update(n=arow["n"], finished=arow["finished"])
    return {
        pk: StudyListProgress(
            planned_trials=c.get("planned", 0), answered=c.get("answered", 0),
            finished=c.get("finished", 0), assignments=c.get("n", 0),
        )
        for pk, c in counts.items()
    }


def rater_account_studies(*, user: Any) -> list[dict[str, Any]]:
    """The studies a rater account has a place in, with its progress and the link to continue."""
    rows = []
    for a in (
        Assignment.objects.filter(rater__user=user, state__in=(AssignmentState.ACTIVE, AssignmentState.FINISHED))
        .select_related("block__study").annotate(n_trials=Count("trials"), n_votes=Count("trials__vote"))
        .order_by("block__study__title")
    ):
        rows.append({"study": a.block.study, "answered": a.n_votes, "total": a.n_trials,
                     "finished": a.state == AssignmentState.FINISHED})
    return rows
