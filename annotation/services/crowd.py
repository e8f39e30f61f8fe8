"""The crowd-platform round trip (issue 17): where a participant goes at the end, and their comment.

A study's ``completion_url`` (e.g. Prolific's ``.../submissions/complete?cc=CODE``) is where a
finished participant is sent; ``{code}`` in it is replaced by the assignment's completion code.
Screened-out participants (comprehension failed, assignment voided, study full) get the study's
``screened_out_url`` / ``screened_out_code`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.db import transaction

from annotation.errors import Conflict, Forbidden, ValidationFailed
from annotation.models import Assignment, AssignmentState, Study

END_COMMENT_MAX = 4000
REDIRECT_SECONDS = 5


def completion_redirect_url(*, study: Study, code: str) -> str:
    """The study's completion URL for this code ("" when the study has none)."""
    url = (study.completion_url or "").strip()
    return url.replace("{code}", quote(code, safe="")) if url else ""


@dataclass(frozen=True)
class ScreenedOut:
    """What a screened-out participant is given: a code to paste and/or a URL to return to."""

    code: str
    url: str

    @property
    def any(self) -> bool:
        return bool(self.code or self.url)


def screened_out_for(study: Study) -> ScreenedOut:
    url = (study.screened_out_url or "").strip()
    code = (study.screened_out_code or "").strip()
    return ScreenedOut(code=code, url=url.replace("{code}", quote(code, safe="")) if url else "")


def end_comment_submit(*, assignment_id: int, rater_id: int | None, text: str) -> Assignment:
    """Store the participant's optional end-of-study comment, once, on their finished assignment."""
    body = (text or "").strip()
    if len(body) > END_COMMENT_MAX:
        raise ValidationFailed(f"Please keep the comment under {END_COMMENT_MAX:,} characters.", field="comment")
    with transaction.atomic():
        assignment = Assignment.objects.select_for_update().select_related("block__study").get(pk=assignment_id)
        if rater_id is None or assignment.rater_id != rater_id:
            raise Forbidden("this assignment is not yours")
        if not assignment.block.study.end_comment:
            raise Conflict("this study does not ask for a comment")
        if assignment.state != AssignmentState.FINISHED:
            raise Conflict("the comment box opens when every trial is answered")
        if body and not assignment.end_comment:
            Assignment.objects.filter(pk=assignment.pk).update(end_comment=body)
            assignment.end_comment = body
    return assignment
