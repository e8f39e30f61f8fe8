"""One function per participant action, each one transaction that returns the whole next Screen.

``show_trial`` (the study link: the current trial, the end page, or what stands before them),
``join`` (``?participant=``: the session speaks for that participant), ``answer_trial`` (a vote),
``revise_trial`` and ``undo_trial`` (answering an earlier trial again), ``report_problem``,
``continue_break`` (leaving the break screen), and the pages around them: ``instructions_page``,
``pause_page``, ``answer_comprehension``, ``send_end_comment``.
Each looks the study's kind up once (``design_of``) and hands the design down to the services it
calls; the views and the rater API only parse, call one of these, and render the Screen.

The next trial a participant sees is chosen in one place, uniform or serve-time:
``annotation.services.answers.next_trial_choose``. A vote asks it while it holds the assignment's
row lock, and the one read it makes of the assignment's trials brings the next trial's stored
screen (decision 0079), so the answer's screen costs no read of its own (``trial_next`` with the
vote's ``Progress``); every other screen asks it through ``trial_next``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

import markdown
import nh3
from django.contrib.auth.models import AnonymousUser
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse

from annotation.errors import ArbiterError, Conflict, Forbidden, ValidationFailed
from annotation.kinds import StudyDesign, design_of
from annotation.models import (
    Assignment,
    AssignmentState,
    ProblemKind,
    Rater,
    Study,
    Trial,
    axis_title,
    rater_page_options,
)
from annotation.rater.db import rater_transaction
from annotation.rater.forms import AnswerForm, ProblemForm, Visitor
from annotation.rater.screens import ImagePass, Screen
from annotation.roles import RATER, is_researcher
from annotation.selectors.pace import break_due, minutes_left
from annotation.services.answers import (
    Progress,
    TrialView,
    VoteInput,
    assignment_counts,
    trial_next,
    vote_lock,
    vote_submit,
)
from annotation.services.comprehension import (
    MAX_ATTEMPTS,
    ComprehensionRequired,
    comprehension_question,
    comprehension_state,
    comprehension_submit,
)
from annotation.services.crowd import (
    REDIRECT_SECONDS,
    completion_redirect_url,
    end_comment_submit,
    screened_out_for,
)
from annotation.services.participants import (
    ParticipationEnded,
    StudyClosed,
    StudyFull,
    account_rater_get_or_create,
    participant_claim,
    participant_rater_get_or_create,
    rater_assignment,
    study_link_url,
)
from annotation.services.vote_revisions import (
    UndoView,
    trial_problem_report,
    vote_revise,
    vote_revision_view,
    vote_undo_view,
)
from annotation.views.links import trial_links, url

# Left to right as the panes read (A is left of B): the side nearer A means "A better". The
# values are the displayed scores (positive: the displayed A is better); docs/protocol.md
# "Canonical answers" turns them into canonical ones. Each with its digit key. Strings, as the
# page writes them: a number in a template goes through Django's localization, about 10 µs each
# (15 radio buttons a trial with three axes).
AXIS_SCALE = (("2", "A much better", "1"), ("1", "A better", "2"), ("0", "Equal", "3"), ("-1", "B better", "4"),
              ("-2", "B much better", "5"))
MARKDOWN_TAGS = {"p", "br", "strong", "em", "b", "i", "ul", "ol", "li", "h1", "h2", "h3", "h4", "blockquote",
                 "code", "pre", "hr", "a", "table", "thead", "tbody", "tr", "th", "td"}
NOT_YOURS = ("Not your trial", "Open the study link you were given to continue.")


# --- the actions --------------------------------------------------------------------------------


def join(*, link_token: str, external_id: str, platform: dict[str, str]) -> Screen:
    """The study link with ``?participant=``: the session speaks for that participant from now on."""
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        try:
            joined = participant_rater_get_or_create(study=study, external_id=external_id, platform=platform)
        except ValidationFailed as exc:
            return notice(study, "This link is not valid", plain_sentence(exc), status=400)
        return Screen(kind="redirect", study=study, location=reverse("rater:link", args=[link_token]),
                      session_rater=(study.pk, joined.pk))


def show_trial(*, link_token: str, visitor: Visitor) -> Screen:
    """The study link: the current trial (or the end page), once the session has a rater with a
    block (claimed now when it has none).

    What stands before the trials (the join page, the comprehension question, a notice) carries
    ``refused``: the rater API, which has no such pages, answers with that error.
    """
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        design = design_of(study)
        rater_id = session_rater_id(visitor, study.pk)
        no_rater = Forbidden("open the study link you were given first")
        rater = Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None
        user = visitor.user
        if rater is None and user.is_authenticated:
            if _is_staff_visitor(user):
                return replace(notice(
                    study, "This is the participant link",
                    "You are signed in as a researcher, so opening it here would not take a rater's place. "
                    "To try the study as a participant, open this link in a private window and add "
                    "?participant=your-test-id.",
                ), refused=no_rater)
            rater = account_rater_get_or_create(study=study, user=user)
        if rater is None:
            return Screen(kind="page", study=study, template="annotation/rater/join.html", context={"study": study},
                          refused=no_rater)
        try:
            assignment = participant_claim(study=study, rater=rater)
        except ComprehensionRequired as exc:
            return replace(comprehension_screen(study, rater), refused=exc)
        except StudyFull as exc:
            return replace(notice(
                study, "This study is full",
                "Thank you for your interest! All places in this study are already taken, so there is "
                "nothing left to do. If you came from a crowd-work platform, please return the study there.",
                screened_out=True), refused=exc)
        except StudyClosed as exc:
            return replace(notice(study, "This study is closed",
                                  "Thank you for your interest. The study is not accepting participants at the moment."),
                           refused=exc)
        except ParticipationEnded as exc:
            return replace(notice(study, "Participation ended", str(exc), screened_out=True), refused=exc)
        return _state(study, design, assignment, visitor)


def answer_trial(*, trial_token: str, answer: AnswerForm, visitor: Visitor) -> Screen:
    """A vote: stored once (``vote_submit``), then the next trial's state (the break, or the end),
    its response clock started in the vote's transaction, with what was recorded (``vote``).

    A refused answer is the current trial again with the reason (or a notice), and ``refused``:
    the error the rater API answers with.
    """
    with rater_transaction():
        return _answer(trial_token=trial_token, answer=answer, visitor=visitor)


def revise_trial(*, trial_token: str, answer: AnswerForm, visitor: Visitor) -> Screen:
    """A new answer to an earlier trial (after Undo); then the current trial again, with what was
    recorded (``vote``). A refused answer carries ``refused``, as in ``answer_trial``."""
    with rater_transaction():
        trial, study, rater_id = _own_trial(trial_token, visitor)
        design = design_of(study)
        if answer.refused is not None:
            return replace(notice(study, "Not available", "The answer could not be read.", status=400),
                           refused=answer.refused)
        if rater_id is None or trial.assignment.rater_id != rater_id:
            return replace(notice(study, *NOT_YOURS, status=403), refused=Forbidden("this trial is not yours"))
        posted = answer.posted(design.rationale_field)
        try:
            result = vote_revise(_vote_input(trial_token, rater_id, answer, design))
        except ValidationFailed as exc:
            try:
                undo = vote_revision_view(trial_token=trial_token, rater_id=rater_id)
            except ArbiterError:
                return replace(_state(study, design, trial.assignment, visitor, status=409,
                                      notice="That answer can no longer be changed. Here is your current trial."),
                               refused=exc)
            return replace(_undo_state(study, design, undo, visitor, status=400, error=exc, posted=posted), refused=exc)
        except Conflict as exc:
            return replace(_state(study, design, trial.assignment, visitor, status=409,
                                  notice=f"{exc}. Here is your current trial."), refused=exc)
        except ArbiterError as exc:
            return replace(notice(study, "Not available", str(exc), status=exc.status_code), refused=exc)
        return _recorded(_state(study, design, trial.assignment, visitor), trial_token, result)


def undo_trial(*, trial_token: str, visitor: Visitor) -> Screen:
    """"Undo last answer" on the current trial: the previous trial again, its answer filled in."""
    with rater_transaction():
        trial, study, rater_id = _own_trial(trial_token, visitor)
        design = design_of(study)
        if rater_id is None or trial.assignment.rater_id != rater_id:
            return notice(study, *NOT_YOURS, status=403)
        try:
            undo = vote_undo_view(trial_token=trial_token, rater_id=rater_id)
        except Conflict as exc:
            return _state(study, design, trial.assignment, visitor, status=409,
                          notice=f"{exc}. Here is your current trial.")
        except ArbiterError as exc:
            return notice(study, "Not available", str(exc), status=exc.status_code)
        return _undo_state(study, design, undo, visitor)


def continue_break(*, link_token: str, visitor: Visitor) -> Screen:
    """Leave the break screen: this session will not show the same break again (``session_break``);
    the current trial at once (the page is sent back to the study link: ``location``)."""
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        rater_id = session_rater_id(visitor, study.pk)
        assignment = rater_assignment(rater_id) if rater_id is not None else None
        if assignment is None:
            return replace(_to_link(study), refused=Forbidden("open the study link you were given first"))
        answered, _total = assignment_counts(assignment)
        visitor = replace(visitor, breaks={**visitor.breaks, str(assignment.pk): answered})
        screen = _state(study, design_of(study), assignment, visitor)
        return replace(screen, session_break=(assignment.pk, answered), location=_link(study))


def instructions_page(*, link_token: str) -> Screen:
    """The study's instructions and the trial's keys, on a page of their own."""
    study = get_object_or_404(Study, link_token=link_token)
    return Screen(kind="page", study=study, template="annotation/rater/instructions.html",
                  context={"study": study, "instructions_html": instructions_html(study)})


def pause_page(*, link_token: str, visitor: Visitor, origin: str) -> Screen:
    """Progress is saved with every vote; this page says how to come back (``origin``: the serving
    origin, for the resume link when the study sets no public URL)."""
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        rater_id = session_rater_id(visitor, study.pk)
        rater = Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None
        assignment = rater_assignment(rater) if rater else None
        answered, total = assignment_counts(assignment) if assignment else (0, 0)
        resume_url = study_link_url(study=study, origin=origin)
        if rater is not None and rater.source == Rater.Source.LINK:
            resume_url = f"{resume_url}?{urlencode({'participant': rater.external_id})}"
        return Screen(kind="page", study=study, template="annotation/rater/pause.html", context={
            "study": study, "answered": answered, "total": total,
            "resume": reverse("rater:link", args=[study.link_token]), "resume_url": resume_url,
        })


def answer_comprehension(*, link_token: str, visitor: Visitor, answer: str) -> Screen:
    """One attempt at the comprehension question; passed → the first trial (the study link).

    The Screen's context carries the attempt's ``result`` (``passed``, ``retry``, ``failed``) and
    the ``attempts_left``, which the rater API answers; a session without a rater gets neither.
    """
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        rater = _session_rater(study, visitor)
        if rater is None:
            return _to_link(study)
        try:
            result = comprehension_submit(rater=rater, answer=answer)
        except ValidationFailed as exc:
            return replace(comprehension_screen(study, rater, error=plain_sentence(exc), status=400), refused=exc)
        outcome = {"result": result, "attempts_left": max(MAX_ATTEMPTS - rater.comprehension_attempts, 0)}
        if result == "retry":
            screen = comprehension_screen(
                study, rater, status=400,
                error="That is not the right answer. Read the instructions again; you have one more attempt.",
            )
        else:  # passed: the first trial; failed: the screened-out notice (both at the study link)
            screen = _to_link(study)
        return replace(screen, context={**screen.context, **outcome})


def comprehension_page(*, link_token: str, visitor: Visitor) -> Screen:
    """The comprehension question and the session's attempts (``state``: open, passed or failed);
    a session without a rater is refused (``Forbidden``)."""
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        rater = _session_rater(study, visitor)
        if rater is None:
            raise Forbidden("open the study link you were given first")
        screen = comprehension_screen(study, rater)
        question = comprehension_question(study)
        return replace(screen, context={
            **screen.context, "state": comprehension_state(rater), "question": question,
            "attempts_left": max(MAX_ATTEMPTS - rater.comprehension_attempts, 0),
        })


def _session_rater(study: Study, visitor: Visitor) -> Rater | None:
    rater_id = session_rater_id(visitor, study.pk)
    return Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None


def send_end_comment(*, link_token: str, visitor: Visitor, text: str) -> Screen:
    """The optional end-of-study comment; then on to the completion URL (or back to the end page)."""
    with rater_transaction():
        study = get_object_or_404(Study, link_token=link_token)
        rater_id = session_rater_id(visitor, study.pk)
        assignment = rater_assignment(rater_id) if rater_id is not None else None
        if assignment is None or assignment.block.study_id != study.pk:
            return _to_link(study)
        try:
            saved = end_comment_submit(assignment_id=assignment.pk, rater_id=rater_id, text=text)
        except ArbiterError as exc:
            return notice(study, "Comment not saved", str(exc), status=exc.status_code)
        target = completion_redirect_url(study=study, code=saved.completion_code)
        return Screen(kind="redirect", study=study, location=target or reverse("rater:link", args=[link_token]))


def report_problem(*, trial_token: str, problem: ProblemForm, visitor: Visitor) -> Screen:
    """"Report a problem" on a trial: stored for researchers; the trial still waits for its answer.

    The problem report alone (its htmx answer), saying it was stored (``reported``, ``kind``) or
    why not; ``refused``: the error the rater API answers with.
    """
    with rater_transaction():
        trial, study, rater_id = _own_trial(trial_token, visitor)
        if problem.refused is not None:
            return replace(notice(study, "Not available", "The report could not be read.", status=400),
                           refused=problem.refused)
        if rater_id is None or trial.assignment.rater_id != rater_id:
            return replace(notice(study, *NOT_YOURS, status=403), refused=Forbidden("this trial is not yours"))
        context: dict[str, Any] = {"study": study, "view": {"trial": trial}, "problem_kinds": ProblemKind.choices,
                                   "links": trial_links(study, trial.token)}
        try:
            stored = trial_problem_report(trial_token=trial_token, rater_id=rater_id, kind=problem.kind,
                                          text=problem.text)
        except ValidationFailed as exc:
            context["problem_error"] = participant_error(exc, None, design_of(study))
            return Screen(kind="problem", study=study, status=400, context=context, htmx=visitor.htmx,
                          location=_link(study), refused=exc)
        except ArbiterError as exc:
            return replace(notice(study, "Not available", str(exc), status=exc.status_code), refused=exc)
        context.update({"problem_reported": True, "reported": True, "kind": stored.kind})
        return Screen(kind="problem", study=study, context=context, htmx=visitor.htmx, location=_link(study))


# --- screens --------------------------------------------------------------------------------------


def notice(study: Study, title: str, message: str, *, status: int = 200, screened_out: bool = False) -> Screen:
    """A rater-facing notice; ``screened_out`` adds the study's screened-out code and return link."""
    context: dict[str, Any] = {"study": study, "title": title, "message": message}
    if screened_out:
        context["screened_out"] = screened_out_for(study)
    return Screen(kind="page", study=study, status=status, template="annotation/rater/notice.html", context=context,
                  notice=message)


def comprehension_screen(study: Study, rater: Rater, *, error: str = "", status: int = 200) -> Screen:
    """The comprehension question before the first trial, or the screened-out notice (docs/study-kinds.md)."""
    if comprehension_state(rater) == "failed":
        return notice(
            study, "Thank you for your time",
            "Both answers to the comprehension question were not right, so this study cannot continue with you. "
            "If you came from a crowd-work platform, please return the study there.",
            status=403 if status == 200 else status, screened_out=True,
        )
    question = comprehension_question(study)
    left = MAX_ATTEMPTS - rater.comprehension_attempts
    return Screen(kind="page", study=study, status=status, template="annotation/rater/comprehension.html", context={
        "study": study, "question": question, "attempts_left": left, "error": error,
        "instructions_html": instructions_html(study),
        "rater_page": rater_page_options(study),
    }, error=error)


def instructions_html(study: Study) -> str:
    """The study's Markdown instructions, rendered and sanitized (no scripts, styles or events)."""
    return _markdown_safe(study.instructions_md or "")


@lru_cache(maxsize=64)
def _markdown_safe(text: str) -> str:
    # Cached by the text itself: every trial page shows the instructions, which rarely change.
    html = markdown.markdown(text, extensions=["tables", "sane_lists"])
    return nh3.clean(html, tags=MARKDOWN_TAGS, attributes={"a": {"href", "title"}}, link_rel="noopener noreferrer")


def participant_error(error: ValidationFailed, view: TrialView | None, design: StudyDesign) -> str:
    """A refused answer in the rater's words ("Choose a confidence from 1 to 5"), not the API's."""
    field = error.field
    if field == "verdict":
        return design.verdict_prompt
    if field == "confidence":
        return "Choose a confidence from 1 to 5."
    if field.startswith("axis:"):
        axis_id = field.removeprefix("axis:")
        title = next((a["title"] for a in (view.axes if view else []) if a["id"] == axis_id), axis_title(axis_id))
        return f"Score “{title}”: choose from “A much better” to “B much better”."
    if field.startswith("rating:"):
        scale = view.scale if view and view.scale else (1, 5)
        return f"Rate “{field.removeprefix('rating:')}” from {scale[0]} to {scale[-1]}."
    if field in ("rationale", "evidence", "text") and "at most" in str(error):
        limit = "1,000" if field == "text" else "4,000"
        return f"That text is too long: shorten it to at most {limit} characters."
    if field == "evidence":
        return "Write the evidence: what you see in the image (or miss) that decides your answer."
    if field == "kind":
        return "Choose what went wrong."
    if field == "text":
        return "Say in a few words what went wrong."
    return "This page is out of date. Reload it and answer again."


def plain_sentence(error: ValidationFailed) -> str:
    """A validation message as a sentence for participants: without the "field 'x':" prefix."""
    text = str(error)
    if error.field or error.where:
        text = text.split(": ", 1)[-1]
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else f"{text}."


def session_rater_id(visitor: Visitor, study_id: int) -> int | None:
    """The rater this browser session speaks for in a study: a link participant or an account."""
    rater_id = visitor.raters.get(str(study_id))
    if rater_id is not None:
        return int(rater_id)
    user = visitor.user
    if user.is_authenticated:
        return Rater.objects.filter(study_id=study_id, user=user).values_list("pk", flat=True).order_by().first()
    return None


# --- how the actions are built ------------------------------------------------------------------


def _answer(*, trial_token: str, answer: AnswerForm, visitor: Visitor) -> Screen:
    # The vote's lock reads the assignment with its study: all the answer reads before its trials.
    assignment = vote_lock(trial_token)
    if assignment is None:
        raise Http404("no such trial")
    study = assignment.block.study
    design = design_of(study)
    rater_id = session_rater_id(visitor, study.pk)
    if answer.refused is not None:
        return replace(notice(study, "Not available", "The answer could not be read.", status=400),
                       refused=answer.refused)
    if rater_id is None or assignment.rater_id != rater_id:
        return replace(notice(study, *NOT_YOURS, status=403), refused=Forbidden("this trial is not yours"))
    posted = answer.posted(design.rationale_field)
    try:
        result = vote_submit(_vote_input(trial_token, rater_id, answer, design), locked=assignment, design=design,
                             show_next=True)
    except ValidationFailed as exc:
        return replace(_state(study, design, assignment, visitor, status=400, error=exc, posted=posted), refused=exc)
    except Conflict as exc:
        return replace(_state(study, design, assignment, visitor, status=409,
                              notice=f"{exc}. Here is your current trial."), refused=exc)
    except ArbiterError as exc:
        return replace(notice(study, "Not available", str(exc), status=exc.status_code), refused=exc)
    # A new vote that did not finish the block found the assignment ACTIVE under its row lock and
    # left a trial to answer; otherwise read it again (the end page shows the completion code).
    fresh = not result.replayed and not result.finished
    screen = _state(study, design, assignment, visitor, fresh=fresh, progress=result.progress)
    return _recorded(screen, trial_token, result)


def _vote_input(trial_token: str, rater_id: int | None, answer: AnswerForm, design: StudyDesign) -> VoteInput:
    """The answer as the vote write takes it: the kind's free-text field, its ratings (if it rates)."""
    ratings = answer.ratings if answer.from_json or design.has_ratings else None
    return VoteInput(
        trial_token=trial_token, rater_id=rater_id, verdict=answer.verdict, confidence=answer.confidence,
        axes=answer.axes, rationale=answer.rationale_for(design.rationale_field), ratings=ratings,
        idempotency_key=answer.idempotency_key, axes_defaulted=answer.axes_defaulted,
    )


def _recorded(next_screen: Screen, trial_token: str, result: Any) -> Screen:
    """An answer stored: what was recorded (``vote``, ``recorded_trial``), with the screen that
    follows it (the next trial, the break or the end), so a client needs no second request; a page
    without htmx is sent back to the study link (``location``)."""
    return replace(next_screen, vote=result, recorded_trial=trial_token, location=next_screen.location or _link(next_screen.study))


def _link(study: Study | None) -> str:
    return reverse("rater:link", args=[study.link_token]) if study is not None else ""


def _to_link(study: Study) -> Screen:
    return Screen(kind="redirect", study=study, location=_link(study))


def _own_trial(trial_token: str, visitor: Visitor) -> tuple[Trial, Study, int | None]:
    trial = get_object_or_404(Trial.objects.select_related("assignment__block__study"), token=trial_token)
    study = trial.assignment.block.study
    return trial, study, session_rater_id(visitor, study.pk)


def _is_staff_visitor(user: Any) -> bool:
    if isinstance(user, AnonymousUser) or not user.is_authenticated:
        return False
    return is_researcher(user) and not user.groups.filter(name=RATER).exists()


def _state(
    study: Study, design: StudyDesign, assignment: Assignment, visitor: Visitor, *, status: int = 200,
    fresh: bool = False, progress: Progress | None = None, **extra: Any,
) -> Screen:
    """The current trial (or the end page) of an assignment.

    ``fresh``: the caller knows the assignment is still active (its own vote just left a trial
    unanswered), so the row is read again only when no trial is left after all (another tab
    answered it meanwhile): the end page needs the stored state and completion code. ``progress``:
    what that vote counted under the assignment's row lock (the counts, the next trial, the pace).
    """
    if not fresh:
        assignment.refresh_from_db()
        progress = None
    view = (trial_next(assignment=assignment, study=study, design=design, progress=progress)
            if assignment.state == AssignmentState.ACTIVE else None)
    if fresh and view is None:
        assignment.refresh_from_db()
    if view is not None and status == 200:
        paused = _break(study, assignment, view, visitor)
        if paused is not None:
            return paused
    return _trial_screen(study, design, assignment, view, visitor, status=status, progress=progress, **extra)


def _undo_state(study: Study, design: StudyDesign, undo: UndoView, visitor: Visitor, *, status: int = 200,
                **extra: Any) -> Screen:
    extra.setdefault("posted", undo.posted)
    return _trial_screen(study, design, undo.view.trial.assignment, undo.view, visitor, status=status, revising=True,
                         **extra)


def _break(study: Study, assignment: Assignment, view: TrialView, visitor: Visitor) -> Screen | None:
    """The break screen when one is due and this session has not continued from it yet.

    The next trial is not shown yet: its shown time is cleared, so the break does not count in
    its response time (it starts again when the rater continues).
    """
    answered, total = view.answered, view.total
    if not break_due(every=study.break_every, answered=answered, total=total):
        return None
    if visitor.breaks.get(str(assignment.pk), 0) >= answered:
        return None
    Trial.objects.filter(pk=view.trial.pk).update(shown_at=None)
    link = reverse("rater:link", args=[study.link_token])
    if visitor.htmx:
        return Screen(kind="break", study=study, location=link, htmx=True, answered=answered, total=total)
    context = {"study": study, "answered": answered, "total": total,
               "minutes_left": minutes_left(assignment=assignment, answered=answered, total=total)}
    return Screen(kind="break", study=study, template="annotation/rater/break.html", context=context,
                  location=link, answered=answered, total=total)


def _trial_screen(
    study: Study, design: StudyDesign, assignment: Assignment, view: TrialView | None, visitor: Visitor, *,
    status: int = 200, progress: Progress | None = None, **extra: Any,
) -> Screen:
    error = extra.pop("error", None)
    if isinstance(error, ValidationFailed):
        extra["error"] = participant_error(error, view, design)
    context = _state_context(study, design, assignment, view, progress=progress, **extra)
    images = ImagePass(trial_token=view.token, files=view.files) if view is not None and view.files else None
    return Screen(
        kind="end" if view is None else "trial", study=study, status=status, context=context, trial=view,
        progress=progress, notice=str(extra.get("notice") or ""), error=str(extra.get("error") or ""),
        answered=view.answered if view else int(context.get("total") or 0), total=view.total if view else int(context.get("total") or 0),
        completion_code=assignment.completion_code if view is None else "",
        completion_url=str(context.get("completion_url") or ""), htmx=visitor.htmx, images=images,
    )


def _state_context(
    study: Study, design: StudyDesign, assignment: Assignment, view: TrialView | None, *,
    progress: Progress | None = None, **extra: Any,
) -> dict[str, Any]:
    context: dict[str, Any] = {
        "study": study,
        "verdicts": design.verdict_choices,
        "question_template": design.trial_template,
        "axis_scale": AXIS_SCALE,
        "instructions_html": instructions_html(study),
        "rater_page": rater_page_options(study),
        "view": view,
        "done": view is None,
        **extra,
    }
    if view is None:
        _answered, total = assignment_counts(assignment)
        context.update({"total": total, "completion_code": assignment.completion_code})
        context.update(_end_context(study, assignment))
    else:
        context["minutes_left"] = minutes_left(
            assignment=assignment, answered=view.answered, total=view.total,
            times=progress.response_times if progress else None,
        )
        token = view.trial.token
        links = context["links"] = trial_links(study, token, revising=bool(extra.get("revising")))
        context["answer_url"] = links["answer"]
        context["problem_kinds"] = ProblemKind.choices
        context["images"] = {s: url("rater:image", token, s) for s in design.image_slots}
        posted = extra.get("posted") or {}
        context["axes"] = [
            {**axis, "index": str(i), "value": str((posted.get("axes") or {}).get(axis["id"], "")),
             "bboxes": [",".join(f"{v:g}" for v in t["bbox_1000"]) for t in axis["targets"]]}
            for i, axis in enumerate(view.axes)
        ]
        context["blocks"] = dict(view.blocks)
        context["ref_size"] = view.ref_size
        context["boxes"] = [",".join(f"{v:g}" for v in box) for box in view.boxes if len(box) == 4]
        context["ratings"] = [
            {"name": d, "index": i, "value": str((posted.get("ratings") or {}).get(d, ""))}
            for i, d in enumerate(view.dimensions)
        ]
    return context


def _end_context(study: Study, assignment: Assignment) -> dict[str, Any]:
    """The end page's crowd round trip: the completion URL and the optional comment box."""
    if assignment.state != AssignmentState.FINISHED:
        return {}
    ask_comment = study.end_comment and not assignment.end_comment
    return {
        "end_comment_url": reverse("rater:end-comment", args=[study.link_token]),
        "completion_url": completion_redirect_url(study=study, code=assignment.completion_code),
        "ask_comment": ask_comment,
        "comment_sent": bool(study.end_comment and assignment.end_comment),
        "redirect_seconds": REDIRECT_SECONDS,
    }
