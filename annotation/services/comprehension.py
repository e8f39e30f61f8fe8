"""The comprehension check before the first trial (docs/study-kinds.md "Comprehension check" questionnaire
hygiene).

Decisions (the protocol says only "a comprehension check with two attempts before the first trial"):

- It applies to the crowd questionnaire kinds (``pairwise``, ``checklist``, ``rating``); a
  ``pairwise_reference`` study runs with trained raters and has none.
- It comes **before the participant claims a block**: a participant who fails both attempts is
  screened out without using up a planned place, so the block's rater target is still met by
  someone else. Their two attempts are kept on the rater row and counted by ``kind_report``.
- One multiple-choice question per kind, about the instructions' key rule: when to answer Tie
  (pairwise), when to answer Unclear (checklist), which end of the scale is best (rating). The
  answer choices are shown in a fixed order; the right answer is never marked in the page.
"""

from __future__ import annotations

from django.db import transaction

from annotation.errors import ArbiterError, ValidationFailed
from annotation.kinds import design_of
from annotation.kinds.base import ComprehensionQuestion
from annotation.models import Rater, Study

MAX_ATTEMPTS = 2


class ComprehensionRequired(ArbiterError):
    """The participant has not passed the comprehension check yet (or failed it twice)."""

    status_code = 403


def comprehension_required(study: Study) -> bool:
    return design_of(study).asks_comprehension


def comprehension_question(study: Study) -> ComprehensionQuestion:
    """The study's comprehension question (module docstring)."""
    return design_of(study).comprehension_question(study)


def comprehension_state(rater: Rater) -> str:
    """``passed``, ``open`` (attempts left) or ``failed`` (screened out)."""
    if rater.comprehension_passed:
        return "passed"
    return "failed" if rater.comprehension_attempts >= MAX_ATTEMPTS else "open"


def comprehension_submit(*, rater: Rater, answer: object) -> str:
    """Record one attempt; returns ``passed``, ``retry`` (one attempt left) or ``failed``.

    The rater row is locked, so two submissions at once (two tabs) count as two attempts in turn
    and never let a third attempt through.
    """
    study = Study.objects.get(pk=rater.study_id)
    question = comprehension_question(study)
    if answer not in {value for value, _label in question.choices}:
        raise ValidationFailed("choose one of the answers", field="answer")
    with transaction.atomic():
        locked = Rater.objects.select_for_update().get(pk=rater.pk)
        state = comprehension_state(locked)
        if state != "open":
            return state
        passed = answer == question.answer
        attempts = locked.comprehension_attempts + 1
        Rater.objects.filter(pk=locked.pk).update(comprehension_attempts=attempts, comprehension_passed=passed)
    rater.refresh_from_db(fields=["comprehension_attempts", "comprehension_passed"])
    # Decided from this attempt (under the lock), not from a later read another tab may have changed.
    if passed:
        return "passed"
    return "failed" if attempts >= MAX_ATTEMPTS else "retry"
