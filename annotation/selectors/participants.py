"""The participants table of a study: crowd-platform ids, state, codes and comments (issue 17)."""

from __future__ import annotations

import io

from annotation import csv_cells
from annotation.models import Assignment, Rater, Study

PLATFORM_COLUMNS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
PARTICIPANT_COLUMNS = (
    "rater", "source", *PLATFORM_COLUMNS, "block", "slot", "state", "started_at", "finished_at",
    "completion_code", "comment", "rater_id",
)


def participants_csv_text(*, study: Study) -> str:
    """One row per rater and assignment (a rater without one gets a row with empty block).

    ``rater`` is what researchers call the rater (an account's username); the trailing
    ``rater_id`` is the id of the votes CSV (``account/<pk>`` for an account).
    """
    out = io.StringIO()
    writer = csv_cells.writer(out)  # every text cell through the one formula rule
    writer.writerow(PARTICIPANT_COLUMNS)
    assignments = {
        a.rater_id: a
        for a in Assignment.objects.filter(block__study=study, rater__isnull=False)
        .select_related("block").order_by("id")
    }
    for rater in Rater.objects.filter(study=study).select_related("user").order_by("external_id"):
        a = assignments.get(rater.pk)
        platform = rater.platform or {}
        pid = platform.get("PROLIFIC_PID", "")
        writer.writerow([
            rater.display_name, rater.source,
            *(str(v) for v in (pid, platform.get("STUDY_ID", ""), platform.get("SESSION_ID", ""))),
            a.block.name if a else "", a.slot if a else "", a.state if a else "",
            a.started_at.isoformat() if a and a.started_at else "",
            a.finished_at.isoformat() if a and a.finished_at else "",
            a.completion_code if a else "", a.end_comment if a else "",
            rater.external_id,
        ])
    return out.getvalue()
