"""Reads of raters' problem reports on trials (issue 17 item 8), for the study page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation.models import ProblemKind, Rater, Study, TrialProblem


@dataclass(frozen=True)
class ProblemRow:
    """One problem report as researchers read it (they may see identities; raters never do)."""

    created_at: Any
    kind: str
    text: str
    block: str
    rater: str
    position: int
    unit: str


def study_problem_reports(*, study: Study, limit: int = 50) -> tuple[int, list[ProblemRow]]:
    """(total, newest ``limit`` reports) of a study's trials."""
    qs = TrialProblem.objects.filter(trial__assignment__block__study=study)
    rows = qs.order_by("-created_at", "-id").values_list(
        "created_at", "kind", "text", "trial__assignment__block__name", "trial__assignment__rater__external_id",
        "trial__position", "trial__comparison__external_id", "trial__candidate__external_id",
        "trial__predicate__external_id", "trial__assignment__rater__source", "trial__assignment__rater__user__username",
    )[:limit]
    labels = dict(ProblemKind.choices)
    out = [
        # An account shows its username (researchers see who rated; blinding is toward raters).
        ProblemRow(created_at=c, kind=str(labels.get(k, k)), text=t, block=b,
                   rater=(username if source == Rater.Source.ACCOUNT and username else r) or "", position=p,
                   unit=comparison or candidate or predicate or "")
        for c, k, t, b, r, p, comparison, candidate, predicate, source, username in rows
    ]
    return qs.count(), out
