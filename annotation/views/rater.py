"""Rater pages: the study link, the trial page (htmx swaps trials), votes, images, instructions.

Blinding (SPEC §4, task rule 5): nothing here renders a system, candidate, file name, page id or
repeat flag. The only identifiers a rater sees are the study's link token and per-trial tokens.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlencode

import markdown
import nh3
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.template import engines
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from annotation import image_cookie
from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.images import stored_image_path
from annotation.kinds import design_of
from annotation.media import MEDIA_UNAVAILABLE_TEXT, MediaUnavailable, media_is_local, read_media
from annotation.middleware import render_timed
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
from annotation.roles import RATER, is_researcher
from annotation.selectors.pace import break_due, minutes_left
from annotation.services.answers import (
    Progress,
    TrialView,
    assignment_counts,
    trial_image,
    trial_images,
    trial_next,
    trial_shown_files,
    vote_submit,
    vote_trial,
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

SESSION_RATERS = "arbiter.raters"
# {assignment id: answered count at the last break the rater continued from} (issue 17 breaks).
SESSION_BREAKS = "arbiter.breaks"
PARTICIPANT_PARAMS = ("participant", "PROLIFIC_PID")
PLATFORM_PARAMS = ("STUDY_ID", "SESSION_ID")
# Left to right as the panes read (A is left of B): the side nearer A means "A better". The
# values are the displayed scores (positive: the displayed A is better); SPEC §3 canonicalizes them.
AXIS_SCALE = ((2, "A much better"), (1, "A better"), (0, "Equal"), (-1, "B better"), (-2, "B much better"))
TRIAL_PAGE = "annotation/rater/trial_base.html"  # the page around the state
TRIAL_STATE = "annotation/rater/_state.html"  # what #trial-root holds (an htmx answer gets it alone)
MARKDOWN_TAGS = {"p", "br", "strong", "em", "b", "i", "ul", "ol", "li", "h1", "h2", "h3", "h4", "blockquote",
                 "code", "pre", "hr", "a", "table", "thead", "tbody", "tr", "th", "td"}


def render_rater(request: HttpRequest, name: str, context: dict[str, Any]) -> str:
    """A rater template rendered alone (the trial state, the problem report), with the request's CSRF token."""
    return engines["django"].get_template(name).render(context, request)


def instructions_html(study: Study) -> str:
    """The study's Markdown instructions, rendered and sanitized (no scripts, styles or events)."""
    return _markdown_safe(study.instructions_md or "")


@lru_cache(maxsize=64)
def _markdown_safe(text: str) -> str:
    # Cached by the text itself: every trial page shows the instructions, which rarely change.
    html = markdown.markdown(text, extensions=["tables", "sane_lists"])
    return nh3.clean(html, tags=MARKDOWN_TAGS, attributes={"a": {"href", "title"}}, link_rel="noopener noreferrer")


def serving_origin(request: HttpRequest) -> str:
    """The origin this request was served from (participant links when ARBITER_PUBLIC_URL is unset)."""
    return request.build_absolute_uri("/").rstrip("/")


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent the request: django-htmx's ``bool(request.htmx)``, read straight from the
    header (``request.htmx`` builds ``request.headers``, a copy of every header, on each request)."""
    return request.META.get("HTTP_HX_REQUEST") == "true"


def session_rater_id(request: HttpRequest, study_id: int) -> int | None:
    """The rater this browser session speaks for in a study: a link participant or an account."""
    rater_id = request.session.get(SESSION_RATERS, {}).get(str(study_id))
    if rater_id is not None:
        return int(rater_id)
    user = request.user
    if user.is_authenticated:
        return Rater.objects.filter(study_id=study_id, user=user).values_list("pk", flat=True).order_by().first()
    return None


def _session_rater_set(request: HttpRequest, study: Study, rater: Rater) -> None:
    raters = dict(request.session.get(SESSION_RATERS, {}))
    raters[str(study.pk)] = rater.pk
    request.session.cycle_key()  # a new session id once an identity is attached (no fixation)
    request.session[SESSION_RATERS] = raters


def _is_staff_visitor(user: Any) -> bool:
    if isinstance(user, AnonymousUser) or not user.is_authenticated:
        return False
    return is_researcher(user) and not user.groups.filter(name=RATER).exists()


def _notice(
    request: HttpRequest, study: Study, title: str, message: str, *, status: int = 200, screened_out: bool = False
) -> HttpResponse:
    """A rater-facing notice; ``screened_out`` adds the study's screened-out code and return link."""
    context: dict[str, Any] = {"study": study, "title": title, "message": message}
    if screened_out:
        context["screened_out"] = screened_out_for(study)
    with render_timed(request):
        return render(request, "annotation/rater/notice.html", context, status=status)


def _state_context(
    study: Study, assignment: Assignment, view: TrialView | None, *, progress: Progress | None = None, **extra: Any
) -> dict[str, Any]:
    context: dict[str, Any] = {
        "study": study,
        "verdicts": design_of(study).verdict_choices,
        "question_template": design_of(study).trial_template,
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
        context["images"] = {s: url("rater:image", token, s) for s in design_of(study).image_slots}
        posted = extra.get("posted") or {}
        context["axes"] = [
            {**axis, "index": i, "value": (posted.get("axes") or {}).get(axis["id"], ""),
             "bboxes": [",".join(f"{v:g}" for v in t["bbox_1000"]) for t in axis["targets"]]}
            for i, axis in enumerate(view.axes)
        ]
        ref = view.trial.comparison.page.image if view.trial.comparison else None  # type: ignore[union-attr]
        context["ref_size"] = (ref.width, ref.height) if ref else None
        context["boxes"] = [",".join(f"{v:g}" for v in box) for box in view.boxes if len(box) == 4]
        context["ratings"] = [
            {"name": d, "index": i, "value": str((posted.get("ratings") or {}).get(d, ""))}
            for i, d in enumerate(view.dimensions)
        ]
    return context


def _render_view(
    request: HttpRequest, study: Study, assignment: Assignment, view: TrialView | None, *, status: int = 200,
    progress: Progress | None = None, **extra: Any,
) -> HttpResponse:
    error = extra.pop("error", None)
    if isinstance(error, ValidationFailed):
        extra["error"] = participant_error(error, view, study)
    context = _state_context(study, assignment, view, progress=progress, **extra)
    with render_timed(request):
        state = render_rater(request, TRIAL_STATE, context)  # the kind's question is its design's trial_template
        if is_htmx(request):
            response = HttpResponse(state, status=status)
        else:
            response = render(request, TRIAL_PAGE, {"study": study, "state_html": mark_safe(state)}, status=status)
    response["Vary"] = "HX-Request"
    response["Cache-Control"] = "no-store"
    if view is not None:
        grant_trial_images(request, response, study, view.trial)
    return response


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


def _break_response(request: HttpRequest, study: Study, assignment: Assignment, view: TrialView) -> HttpResponse | None:
    """The break screen when one is due and this session has not continued from it yet.

    The next trial is not shown yet: its shown time is cleared, so the break does not count in
    its response time (it starts again when the rater continues).
    """
    answered, total = view.answered, view.total
    if not break_due(every=study.break_every, answered=answered, total=total):
        return None
    if request.session.get(SESSION_BREAKS, {}).get(str(assignment.pk), 0) >= answered:
        return None
    Trial.objects.filter(pk=view.trial.pk).update(shown_at=None)
    link = reverse("rater:link", args=[study.link_token])
    if is_htmx(request):
        # A whole page load: the break screen is its own page (and survives a reload).
        response = HttpResponse(status=200)
        response["HX-Redirect"] = link
    else:
        response = render(request, "annotation/rater/break.html", {
            "study": study, "answered": answered, "total": total,
            "minutes_left": minutes_left(assignment=assignment, answered=answered, total=total),
        })
    response["Cache-Control"] = "no-store"
    return response


def participant_error(error: ValidationFailed, view: TrialView | None, study: Study) -> str:
    """A refused answer in the rater's words ("Choose a confidence from 1 to 5"), not the API's."""
    field = error.field
    if field == "verdict":
        return design_of(study).verdict_prompt
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


def _render_state(
    request: HttpRequest, study: Study, assignment: Assignment, *, status: int = 200, fresh: bool = False,
    progress: Progress | None = None, **extra: Any
) -> HttpResponse:
    """The current trial (or the end page) of an assignment.

    ``fresh``: the caller knows the assignment is still active (its own vote just left a trial
    unanswered), so the row is read again only when no trial is left after all (another tab
    answered it meanwhile): the end page needs the stored state and completion code. ``progress``:
    what that vote counted under the assignment's row lock (the counts, the next trial, the pace).
    """
    if not fresh:
        assignment.refresh_from_db()
        progress = None
    view = trial_next(assignment=assignment, study=study, progress=progress) if assignment.state == AssignmentState.ACTIVE else None
    if fresh and view is None:
        assignment.refresh_from_db()
    if view is not None and status == 200:
        paused = _break_response(request, study, assignment, view)
        if paused is not None:
            return paused
    return _render_view(request, study, assignment, view, status=status, progress=progress, **extra)


def study_link(request: HttpRequest, link_token: str) -> HttpResponse:
    """The participant entry point: exchange ``?participant=`` for a session, then show the trial."""
    study = get_object_or_404(Study, link_token=link_token)
    external_id = next((request.GET[p] for p in PARTICIPANT_PARAMS if request.GET.get(p)), "")
    if external_id:
        platform = {p: request.GET.get(p, "") for p in PLATFORM_PARAMS}
        platform["PROLIFIC_PID"] = request.GET.get("PROLIFIC_PID", "")
        try:
            joined = participant_rater_get_or_create(study=study, external_id=external_id, platform=platform)
        except ValidationFailed as exc:
            return _notice(request, study, "This link is not valid", plain_sentence(exc), status=400)
        _session_rater_set(request, study, joined)
        return redirect(reverse("rater:link", args=[link_token]))
    rater_id = session_rater_id(request, study.pk)
    rater = Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None
    if rater is None and request.user.is_authenticated:
        if _is_staff_visitor(request.user):
            return _notice(
                request, study, "This is the participant link",
                "You are signed in as a researcher, so opening it here would not take a rater's place. "
                "To try the study as a participant, open this link in a private window and add "
                "?participant=your-test-id.",
            )
        rater = account_rater_get_or_create(study=study, user=request.user)  # type: ignore[arg-type]
    if rater is None:
        return render(request, "annotation/rater/join.html", {"study": study})
    try:
        assignment = participant_claim(study=study, rater=rater)
    except ComprehensionRequired:
        return _comprehension_page(request, study, rater)
    except StudyFull:
        return _notice(request, study, "This study is full",
                       "Thank you for your interest! All places in this study are already taken, so there is "
                       "nothing left to do. If you came from a crowd-work platform, please return the study there.",
                       screened_out=True)
    except StudyClosed:
        return _notice(request, study, "This study is closed",
                       "Thank you for your interest. The study is not accepting participants at the moment.")
    except ParticipationEnded as exc:
        return _notice(request, study, "Participation ended", str(exc), screened_out=True)
    return _render_state(request, study, assignment)


def _posted_answer(request: HttpRequest, study: Study) -> dict[str, Any]:
    """The answer fields of a trial form, as posted (shown again when the answer is refused)."""
    axes = {k.removeprefix("axis:"): v for k, v in request.POST.items() if k.startswith("axis:")}
    ratings = {k.removeprefix("rating:"): v for k, v in request.POST.items() if k.startswith("rating:")}
    rationale = request.POST.get(design_of(study).rationale_field, "")
    # The axes the rater set with the verdict key and left so (trial.js fills the hidden field).
    defaulted = [a for a in request.POST.get("axes_defaulted", "").split(",") if a][:50]
    return {"verdict": request.POST.get("verdict", ""), "confidence": request.POST.get("confidence", ""),
            "axes": axes, "rationale": rationale, "ratings": ratings, "axes_defaulted": defaulted}


def _own_trial_or_notice(request: HttpRequest, trial_token: str) -> tuple[Trial, Study, int | None]:
    trial = get_object_or_404(Trial.objects.select_related("assignment__block__study"), token=trial_token)
    study = trial.assignment.block.study
    return trial, study, session_rater_id(request, study.pk)


def _not_yours(request: HttpRequest, study: Study) -> HttpResponse:
    return _notice(request, study, "Not your trial", "Open the study link you were given to continue.", status=403)


def _render_undo(request: HttpRequest, study: Study, undo: UndoView, *, status: int = 200, **extra: Any) -> HttpResponse:
    extra.setdefault("posted", undo.posted)
    return _render_view(request, study, undo.view.trial.assignment, undo.view, status=status, revising=True, **extra)


@require_GET
def trial_undo(request: HttpRequest, trial_token: str) -> HttpResponse:
    """"Undo last answer" on the current trial: the previous trial again, its answer filled in."""
    trial, study, rater_id = _own_trial_or_notice(request, trial_token)
    if rater_id is None or trial.assignment.rater_id != rater_id:
        return _not_yours(request, study)
    try:
        undo = vote_undo_view(trial_token=trial_token, rater_id=rater_id)
    except Conflict as exc:
        return _render_state(request, study, trial.assignment, status=409, notice=f"{exc}. Here is your current trial.")
    except ArbiterError as exc:
        return _notice(request, study, "Not available", str(exc), status=exc.status_code)
    return _render_undo(request, study, undo)


@require_POST
def trial_revise(request: HttpRequest, trial_token: str) -> HttpResponse:
    """The new answer to the previous trial (after Undo); then the current trial again."""
    trial, study, rater_id = _own_trial_or_notice(request, trial_token)
    if rater_id is None or trial.assignment.rater_id != rater_id:
        return _not_yours(request, study)
    posted = _posted_answer(request, study)
    try:
        vote_revise(
            trial_token=trial_token, rater_id=rater_id, verdict=posted["verdict"], confidence=posted["confidence"],
            axes=posted["axes"], rationale=posted["rationale"], idempotency_key=request.POST.get("idempotency_key", ""),
            ratings=posted["ratings"] if design_of(study).has_ratings else None,
            axes_defaulted=posted["axes_defaulted"],
        )
    except ValidationFailed as exc:
        try:
            undo = vote_revision_view(trial_token=trial_token, rater_id=rater_id)
        except ArbiterError:
            return _render_state(request, study, trial.assignment, status=409,
                                 notice="That answer can no longer be changed. Here is your current trial.")
        return _render_undo(request, study, undo, status=400, error=exc, posted=posted)
    except Conflict as exc:
        return _render_state(request, study, trial.assignment, status=409, notice=f"{exc}. Here is your current trial.")
    except ArbiterError as exc:
        return _notice(request, study, "Not available", str(exc), status=exc.status_code)
    if is_htmx(request):
        return _render_state(request, study, trial.assignment)
    return redirect(reverse("rater:link", args=[study.link_token]), permanent=False)


@require_POST
def trial_problem(request: HttpRequest, trial_token: str) -> HttpResponse:
    """"Report a problem" on a trial: stored for researchers; the trial still waits for its answer."""
    trial, study, rater_id = _own_trial_or_notice(request, trial_token)
    if rater_id is None or trial.assignment.rater_id != rater_id:
        return _not_yours(request, study)
    context: dict[str, Any] = {"study": study, "view": {"trial": trial}, "problem_kinds": ProblemKind.choices,
                               "links": trial_links(study, trial.token)}
    status = 200
    try:
        trial_problem_report(trial_token=trial_token, rater_id=rater_id, kind=request.POST.get("kind", ""),
                             text=request.POST.get("text", ""))
        context["problem_reported"] = True
    except ValidationFailed as exc:
        context["problem_error"] = participant_error(exc, None, study)
        status = 400
    except ArbiterError as exc:
        return _notice(request, study, "Not available", str(exc), status=exc.status_code)
    if not is_htmx(request):
        return redirect(reverse("rater:link", args=[study.link_token]), permanent=False)
    with render_timed(request):
        response = HttpResponse(render_rater(request, "annotation/rater/_problem.html", context), status=status)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
def trial_vote(request: HttpRequest, trial_token: str) -> HttpResponse:
    """Submit an answer (htmx swaps in the next trial; without JS: redirect back to the link)."""
    trial = vote_trial(trial_token)  # what vote_submit needs too: read once
    if trial is None:
        raise Http404
    study = trial.assignment.block.study
    rater_id = session_rater_id(request, study.pk)
    if rater_id is None or trial.assignment.rater_id != rater_id:
        return _not_yours(request, study)
    posted = _posted_answer(request, study)
    axes, ratings, rationale = posted["axes"], posted["ratings"], posted["rationale"]
    try:
        result = vote_submit(
            trial_token=trial_token, rater_id=rater_id, verdict=posted["verdict"], confidence=posted["confidence"],
            axes=axes, rationale=rationale, idempotency_key=request.POST.get("idempotency_key", ""),
            ratings=ratings if design_of(study).has_ratings else None, trial=trial,
            show_next=is_htmx(request), axes_defaulted=posted["axes_defaulted"],
        )
    except ValidationFailed as exc:
        return _render_state(request, study, trial.assignment, status=400, error=exc, posted=posted)
    except Conflict as exc:
        return _render_state(request, study, trial.assignment, status=409, notice=f"{exc}. Here is your current trial.")
    except ArbiterError as exc:
        return _notice(request, study, "Not available", str(exc), status=exc.status_code)
    if is_htmx(request):
        # A new vote that did not finish the block found the assignment ACTIVE under its row lock
        # and left a trial to answer; otherwise read it again (the end page shows the completion code).
        fresh = not result.replayed and not result.finished
        return _render_state(request, study, trial.assignment, fresh=fresh, progress=result.progress)
    return redirect(reverse("rater:link", args=[study.link_token]), permanent=False)


def _comprehension_page(
    request: HttpRequest, study: Study, rater: Rater, *, error: str = "", status: int = 200
) -> HttpResponse:
    """The comprehension question before the first trial, or the screened-out notice (SPEC §11)."""
    state = comprehension_state(rater)
    if state == "failed":
        return _notice(
            request, study, "Thank you for your time",
            "Both answers to the comprehension question were not right, so this study cannot continue with you. "
            "If you came from a crowd-work platform, please return the study there.",
            status=403 if status == 200 else status, screened_out=True,
        )
    question = comprehension_question(study)
    left = MAX_ATTEMPTS - rater.comprehension_attempts
    return render(request, "annotation/rater/comprehension.html", {
        "study": study, "question": question, "attempts_left": left, "error": error,
        "instructions_html": instructions_html(study),
        "rater_page": rater_page_options(study),
    }, status=status)


@require_POST
def comprehension(request: HttpRequest, link_token: str) -> HttpResponse:
    """One attempt at the comprehension question; passed → the first trial."""
    study = get_object_or_404(Study, link_token=link_token)
    rater_id = session_rater_id(request, study.pk)
    rater = Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None
    if rater is None:
        return redirect(reverse("rater:link", args=[link_token]))
    try:
        result = comprehension_submit(rater=rater, answer=request.POST.get("answer", ""))
    except ValidationFailed as exc:
        return _comprehension_page(request, study, rater, error=plain_sentence(exc), status=400)
    if result == "retry":
        return _comprehension_page(
            request, study, rater, status=400,
            error="That is not the right answer. Read the instructions again; you have one more attempt.",
        )
    return redirect(reverse("rater:link", args=[link_token]))


@require_GET
def trial_image_view(request: HttpRequest, trial_token: str, slot: str) -> HttpResponseBase:
    """An image of a trial the session owns: no file name, no metadata, private caching only.

    The trial's image pass (``annotation.image_cookie``, set with the trial) answers without a
    database or session read; without one, the trial row and the session decide.
    """
    file = image_cookie.granted_file(request, trial_token=trial_token, slot=slot)
    if file is None:
        found = trial_image(trial_token=trial_token, slot=slot)
        if found is None or not found.live or found.file is None or found.rater_id is None:
            raise Http404
        if found.rater_id != session_rater_id(request, found.study_id):
            raise Http404
        file = found.file
    if not file:
        raise Http404
    response: HttpResponseBase
    accel = settings.ARBITER_IMAGE_ACCEL_REDIRECT
    if accel:  # behind nginx: it sends the file from an internal location (README "Running at scale")
        response = HttpResponse(content_type="image/png")
        response["X-Accel-Redirect"] = accel.rstrip("/") + "/" + quote(file)
    elif media_is_local():
        try:
            handle = stored_image_path(file).open("rb")
        except OSError:
            raise Http404 from None
        response = FileResponse(handle, content_type="image/png")
        if "Content-Disposition" in response:
            del response["Content-Disposition"]
    else:  # the bucket: read whole through the storage, so an outage is a 503 and never half an image
        try:
            response = HttpResponse(read_media(file), content_type="image/png")
        except FileNotFoundError:
            raise Http404 from None
        except MediaUnavailable:
            return media_unavailable_response()
    response["Cache-Control"] = "private, max-age=86400"
    return response


def media_unavailable_response() -> HttpResponse:
    """The bucket cannot be reached: a 503 the page retries, never a 500 (it clears by itself)."""
    response = HttpResponse(MEDIA_UNAVAILABLE_TEXT, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = "5"
    response["Cache-Control"] = "no-store"
    return response


def grant_trial_images(request: HttpRequest, response: HttpResponse, study: Study, trial: Trial) -> None:
    """Give the shown trial's image pass to the session: its files came with the trial
    (``trial_current``), or one query reads every slot of the trial."""
    files = trial_shown_files(trial, study)
    if files is None:
        found = trial_images(trial_token=trial.token, item=not design_of(study).pairwise)
        if found is None or not found.live:
            return
        files = found.files
    image_cookie.grant(request, response, trial_token=trial.token, files=files)


@require_GET
def instructions(request: HttpRequest, link_token: str) -> HttpResponse:
    study = get_object_or_404(Study, link_token=link_token)
    return render(request, "annotation/rater/instructions.html", {
        "study": study, "instructions_html": instructions_html(study),
        "shortcuts_html": mark_safe(render_rater(request, "annotation/rater/_shortcuts.html", {})),
    })


@require_GET
def pause(request: HttpRequest, link_token: str) -> HttpResponse:
    """Progress is saved with every vote; this page says how to come back."""
    study = get_object_or_404(Study, link_token=link_token)
    rater_id = session_rater_id(request, study.pk)
    rater = Rater.objects.filter(pk=rater_id).order_by().first() if rater_id else None
    assignment = rater_assignment(rater) if rater else None
    answered, total = assignment_counts(assignment) if assignment else (0, 0)
    resume = reverse("rater:link", args=[study.link_token])
    origin = serving_origin(request)
    if rater is not None and rater.source == Rater.Source.LINK:
        resume_url = f"{study_link_url(study=study, origin=origin)}?{urlencode({'participant': rater.external_id})}"
    else:
        resume_url = study_link_url(study=study, origin=origin)
    return render(request, "annotation/rater/pause.html", {
        "study": study, "answered": answered, "total": total, "resume": resume, "resume_url": resume_url,
    })


def _session_rater(request: HttpRequest, study: Study) -> Rater | None:
    rater_id = session_rater_id(request, study.pk)
    return Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None


@require_POST
def break_continue(request: HttpRequest, link_token: str) -> HttpResponse:
    """Leave the break screen: this session will not show the same break again."""
    study = get_object_or_404(Study, link_token=link_token)
    rater = _session_rater(request, study)
    assignment = rater_assignment(rater) if rater else None
    if assignment is not None:
        answered, _total = assignment_counts(assignment)
        breaks = dict(request.session.get(SESSION_BREAKS, {}))
        breaks[str(assignment.pk)] = answered
        request.session[SESSION_BREAKS] = breaks
    return redirect(reverse("rater:link", args=[link_token]))


@require_POST
def end_comment(request: HttpRequest, link_token: str) -> HttpResponse:
    """The optional end-of-study comment; then on to the completion URL (or back to the end page)."""
    study = get_object_or_404(Study, link_token=link_token)
    rater = _session_rater(request, study)
    assignment = rater_assignment(rater) if rater else None
    if assignment is None:
        return redirect(reverse("rater:link", args=[link_token]))
    try:
        saved = end_comment_submit(assignment_id=assignment.pk, rater_id=rater.pk if rater else None,
                                   text=request.POST.get("comment", ""))
    except ArbiterError as exc:
        return _notice(request, study, "Comment not saved", str(exc), status=exc.status_code)
    target = completion_redirect_url(study=study, code=saved.completion_code)
    return redirect(target or reverse("rater:link", args=[link_token]))
