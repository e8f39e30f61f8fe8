"""Undo last answer and problem reports on the trial page (issue 17, items 7 and 8).

Undo: while the rater's current trial is unanswered, the previous trial (the last answered one)
is shown again with its stored answer filled in, as displayed (docs/protocol.md "Canonical answers" applied
back: a swapped trial shows canonical B as "A"). Answering it again replaces the stored vote; the replaced
answer is appended to ``Vote.history`` (the votes CSV writes ``revised`` and ``first_label`` from
it, docs/protocol.md "Files"). The trial itself never changes (position, orientation, ``is_repeat``,
``repeat_of``), so hidden-repeat pairing is untouched. ``response_ms`` stays the first answer's:
it measures the first judgment, which is what the too-fast rules look at
(docs/decisions/0029-trial-page-undo-problem-reports.md).

Revisions are idempotent like votes: the same key and body answer the same; they run under the
assignment's row lock, so a revision and the next trial's vote are serialized.

A problem report ("the image did not load", "I cannot see the difference", "something else"
with text) is stored for researchers beside the trial; it is not a vote and answers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.errors import Conflict, Forbidden, NotFound, ValidationFailed
from annotation.kinds import design_of
from annotation.kinds.answer import VoteAnswer
from annotation.models import (
    Assignment,
    AssignmentState,
    ProblemKind,
    Study,
    Trial,
    TrialProblem,
    Vote,
)
from annotation.services.answers import (
    TrialView,
    VoteInput,
    VoteResult,
    answer_for_trial,
    assignment_counts,
    next_trial_choose,
    trial_view_of,
    vote_answers,
)
from annotation.services.participants import LIVE_STATES

PROBLEM_TEXT_MAX = 1000


@dataclass(frozen=True)
class UndoView:
    """The previous trial to answer again, and its stored answer as the rater gave it."""

    view: TrialView
    posted: dict[str, Any]


def _own_trial(trial_token: str, rater_id: int | None) -> Trial:
    trial = Trial.objects.select_related("assignment__block__study").filter(token=trial_token).order_by().first()
    if trial is None:
        raise NotFound("no such trial")
    if rater_id is None or trial.assignment.rater_id != rater_id:
        raise Forbidden("this trial is not yours")
    return trial


def displayed_answer(vote: Vote, *, swapped: bool) -> dict[str, Any]:
    """A stored (canonical) vote as the trial page's form shows it: the display's A and B."""
    stored = VoteAnswer(verdict=vote.label, confidence=vote.confidence, axes=dict(vote.axis_scores or {}),
                        rationale=vote.rationale)
    verdict, scores = stored.canonical(swapped=swapped)  # the mapping is its own inverse
    ratings = (vote.answers or {}).get("ratings") or {}
    return {
        "verdict": verdict,
        "confidence": "" if vote.confidence is None else str(vote.confidence),
        "axes": {k: str(int(v)) for k, v in scores.items()},
        "rationale": vote.rationale,
        "ratings": {k: str(v) for k, v in ratings.items()},
    }


def vote_undo_view(*, trial_token: str, rater_id: int | None) -> UndoView:
    """The answered trial before ``trial_token``, to answer again (review, issue 30).

    From the current (unanswered) trial: the last answered one ("Undo last answer"); from an
    answered trial under review: the one answered before it ("Previous answer"), back to the
    first trial of the block (the assignment).
    """
    trial = _own_trial(trial_token, rater_id)
    assignment = trial.assignment
    study = assignment.block.study
    if assignment.state != AssignmentState.ACTIVE:
        raise Conflict("this block is finished; its answers can no longer be changed")
    if Vote.objects.filter(trial_id=trial.pk).exists():
        return _answered_view(assignment, study, before=trial.position)
    current = next_trial_choose(study=study, assignment_id=assignment.pk, pairwise=design_of(study).pairwise)
    if current.next_trial_id != trial.pk:
        raise Conflict("this is not the current trial (reload the page)")
    return _answered_view(assignment, study)


def vote_revision_view(*, trial_token: str, rater_id: int | None) -> UndoView:
    """The page of an answered trial being answered again (after a refused new answer)."""
    trial = _own_trial(trial_token, rater_id)
    assignment = trial.assignment
    if assignment.state != AssignmentState.ACTIVE:
        raise Conflict("this block is finished; its answers can no longer be changed")
    return _answered_view(assignment, assignment.block.study, at=trial.position)


def _answered_view(assignment: Assignment, study: Study, *, before: int | None = None, at: int | None = None) -> UndoView:
    """The last answered trial (``before``: the last one before that position; ``at``: that one)."""
    answered_trials = Trial.objects.filter(assignment=assignment, vote__isnull=False)
    chosen = answered_trials
    if before is not None:
        chosen = chosen.filter(position__lt=before)
    if at is not None:
        chosen = chosen.filter(position=at)
    previous = chosen.select_related("vote").order_by("-position").first()
    if previous is None:
        raise Conflict("there is no earlier answer to change" if before is not None or at is None
                       else "this trial has no answer to change (reload the page)")
    _answered, total = assignment_counts(assignment)
    number = answered_trials.filter(position__lte=previous.position).count()
    view = trial_view_of(previous, study=study, number=number, answered=number - 1, total=total)
    return UndoView(view=view, posted=displayed_answer(previous.vote, swapped=previous.swapped))


def vote_revise(vote: VoteInput) -> VoteResult:
    """Replace the stored answer of an answered trial of the active assignment (Undo, or review
    further back, issue 30), keeping the old one in ``Vote.history``.

    Not the last answered trial, or a finished assignment → Conflict (409); the same key and body
    again → the stored vote (``replayed``).
    """
    checked = answer_for_trial(vote)
    key, trial, answer, digest, axes_defaulted = checked.key, checked.trial, checked.answer, checked.digest, vote.axes_defaulted
    with transaction.atomic():
        assignment = Assignment.objects.select_for_update().get(pk=trial.assignment_id)
        stored = Vote.objects.filter(trial_id=trial.pk).order_by().first()
        if stored is None:
            raise Conflict("this trial has no answer to change yet (reload the page)")
        finished = assignment.state == AssignmentState.FINISHED
        if stored.idempotency_key == key:
            if stored.request_hash != digest:
                raise Conflict("this submission key was already used with a different answer")
            return VoteResult(vote=stored, replayed=True, finished=finished,
                              completion_code=assignment.completion_code)
        if any(h.get("idempotency_key") == key for h in stored.history or []):
            raise Conflict("this submission key was already used")
        if assignment.state != AssignmentState.ACTIVE:
            raise Conflict("this block is finished; its answers can no longer be changed")
        label, scores = answer.canonical(swapped=trial.swapped)
        replaced = {
            "label": stored.label, "confidence": stored.confidence, "axis_scores": stored.axis_scores,
            "rationale": stored.rationale, "answers": stored.answers, "idempotency_key": stored.idempotency_key,
            "request_hash": stored.request_hash, "replaced_at": timezone.now().isoformat(),
        }
        stored.label, stored.confidence, stored.axis_scores, stored.rationale = label, answer.confidence, scores, answer.rationale
        stored.answers = vote_answers(study=checked.study, ratings=answer.ratings, scores=scores,
                                    axes_defaulted=axes_defaulted)
        stored.idempotency_key, stored.request_hash = key, digest
        stored.history = [*(stored.history or []), replaced]
        stored.save(update_fields=["label", "confidence", "axis_scores", "rationale", "answers",
                                 "idempotency_key", "request_hash", "history"])
    return VoteResult(vote=stored, replayed=False, finished=False, completion_code="")


def trial_problem_report(*, trial_token: str, rater_id: int | None, kind: str, text: str) -> TrialProblem:
    """Store a rater's problem report on one of their trials (one per kind and trial; again: new text)."""
    if kind not in ProblemKind.values:
        raise ValidationFailed("choose what went wrong", field="kind")
    note = " ".join(str(text or "").split())
    if len(note) > PROBLEM_TEXT_MAX:
        raise ValidationFailed(f"at most {PROBLEM_TEXT_MAX} characters", field="text")
    if kind == ProblemKind.OTHER and not note:
        raise ValidationFailed("say in a few words what went wrong", field="text")
    trial = _own_trial(trial_token, rater_id)
    if trial.assignment.state not in LIVE_STATES:
        raise Forbidden("this assignment is no longer open")
    problem, _created = TrialProblem.objects.update_or_create(trial=trial, kind=kind, defaults={"text": note})
    return problem
