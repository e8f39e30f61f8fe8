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
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import image_cookie
from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.images import stored_image_path
from annotation.middleware import render_timed
from annotation.models import Assignment, AssignmentState, Label, Rater, Study, StudyKind
from annotation.roles import RATER, is_researcher
from annotation.services.comprehension import (
    MAX_ATTEMPTS,
    ComprehensionRequired,
    comprehension_question,
    comprehension_state,
    comprehension_submit,
)
from annotation.services.raters import (
    ParticipationEnded,
    StudyClosed,
    StudyFull,
    TrialView,
    account_rater_get_or_create,
    assignment_counts,
    participant_claim,
    participant_rater_get_or_create,
    rater_assignment,
    study_link_url,
    trial_image,
    trial_images,
    trial_next,
    vote_submit,
    vote_trial,
)

SESSION_RATERS = "arbiter.raters"
PARTICIPANT_PARAMS = ("participant", "PROLIFIC_PID")
PLATFORM_PARAMS = ("STUDY_ID", "SESSION_ID")
VERDICTS = ((Label.A, "A", "a"), (Label.B, "B", "b"), (Label.TIE, "Tie", "t"), (Label.CANNOT_JUDGE, "Cannot judge", "x"))
AXIS_SCALE = ((-2, "-2"), (-1, "-1"), (0, "0"), (1, "+1"), (2, "+2"))
IMAGE_SLOTS = ("ref", "left", "right")
KIND_IMAGE_SLOTS = {
    StudyKind.PAIRWISE_REFERENCE: IMAGE_SLOTS,
    StudyKind.PAIRWISE: ("left", "right"),
    StudyKind.CHECKLIST: ("item",),
    StudyKind.RATING: ("item",),
}
ITEM_KINDS = (StudyKind.CHECKLIST, StudyKind.RATING)
CHECKLIST_VERDICTS = ((Label.YES, "Yes", "y"), (Label.NO, "No", "n"), (Label.UNCLEAR, "Unclear", "u"))
TRIAL_TEMPLATES = {
    StudyKind.PAIRWISE_REFERENCE: "annotation/rater/trial.html",
    StudyKind.PAIRWISE: "annotation/rater/trial_pairwise.html",
    StudyKind.CHECKLIST: "annotation/rater/trial_checklist.html",
    StudyKind.RATING: "annotation/rater/trial_rating.html",
}
MARKDOWN_TAGS = {"p", "br", "strong", "em", "b", "i", "ul", "ol", "li", "h1", "h2", "h3", "h4", "blockquote",
                 "code", "pre", "hr", "a", "table", "thead", "tbody", "tr", "th", "td"}


def instructions_html(study: Study) -> str:
    """The study's Markdown instructions, rendered and sanitized (no scripts, styles or events)."""
    return _markdown_safe(study.instructions_md or "")


@lru_cache(maxsize=64)
def _markdown_safe(text: str) -> str:
    # Cached by the text itself: every trial page shows the instructions, which rarely change.
    html = markdown.markdown(text, extensions=["tables", "sane_lists"])
    return nh3.clean(html, tags=MARKDOWN_TAGS, attributes={"a": {"href", "title"}}, link_rel="noopener noreferrer")


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


def _notice(request: HttpRequest, study: Study, title: str, message: str, *, status: int = 200) -> HttpResponse:
    with render_timed(request):
        return render(request, "annotation/rater/notice.html", {"study": study, "title": title, "message": message},
                      status=status)


def _state_context(
    study: Study, assignment: Assignment, view: TrialView | None, **extra: Any
) -> dict[str, Any]:
    context: dict[str, Any] = {
        "study": study,
        "verdicts": CHECKLIST_VERDICTS if study.kind == StudyKind.CHECKLIST else VERDICTS,
        "axis_scale": AXIS_SCALE,
        "instructions_html": instructions_html(study),
        "view": view,
        "done": view is None,
        **extra,
    }
    if view is None:
        _answered, total = assignment_counts(assignment)
        context.update({"total": total, "completion_code": assignment.completion_code})
    else:
        token = view.trial.token
        context["images"] = {
            s: reverse("rater:image", args=[token, s]) for s in KIND_IMAGE_SLOTS[StudyKind(study.kind)]
        }
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


def _render_state(
    request: HttpRequest, study: Study, assignment: Assignment, *, status: int = 200, fresh: bool = False, **extra: Any
) -> HttpResponse:
    """The current trial (or the end page) of an assignment.

    ``fresh``: the caller knows the assignment is still active (its own vote just left a trial
    unanswered), so the row is read again only when no trial is left after all (another tab
    answered it meanwhile): the end page needs the stored state and completion code.
    """
    if not fresh:
        assignment.refresh_from_db()
    view = trial_next(assignment=assignment, study=study) if assignment.state == AssignmentState.ACTIVE else None
    if fresh and view is None:
        assignment.refresh_from_db()
    template = TRIAL_TEMPLATES[StudyKind(study.kind)]
    if getattr(request, "htmx", False):
        template += "#state"
    context = _state_context(study, assignment, view, **extra)
    with render_timed(request):
        response = render(request, template, context, status=status)
    response["Vary"] = "HX-Request"
    response["Cache-Control"] = "no-store"
    if view is not None:
        grant_trial_images(request, response, study, view.trial.token)
    return response


def study_link(request: HttpRequest, link_token: str) -> HttpResponse:
    """The participant entry point: exchange ``?participant=`` for a session, then show the trial."""
    study = get_object_or_404(Study, link_token=link_token)
    external_id = next((request.GET[p] for p in PARTICIPANT_PARAMS if request.GET.get(p)), "")
    if external_id:
        platform = {p: request.GET.get(p, "") for p in PLATFORM_PARAMS}
        try:
            joined = participant_rater_get_or_create(study=study, external_id=external_id, platform=platform)
        except ValidationFailed as exc:
            return _notice(request, study, "This link is not valid", str(exc), status=400)
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
                       "nothing left to do. If you came from a crowd-work platform, please return the study there.")
    except StudyClosed:
        return _notice(request, study, "This study is closed",
                       "Thank you for your interest. The study is not accepting participants at the moment.")
    except ParticipationEnded as exc:
        return _notice(request, study, "Participation ended", str(exc))
    return _render_state(request, study, assignment)


@require_POST
def trial_vote(request: HttpRequest, trial_token: str) -> HttpResponse:
    """Submit an answer (htmx swaps in the next trial; without JS: redirect back to the link)."""
    trial = vote_trial(trial_token)  # what vote_submit needs too: read once
    if trial is None:
        raise Http404
    study = trial.assignment.block.study
    rater_id = session_rater_id(request, study.pk)
    if rater_id is None or trial.assignment.rater_id != rater_id:
        return _notice(request, study, "Not your trial", "Open the study link you were given to continue.",
                       status=403)
    axes = {k.removeprefix("axis:"): v for k, v in request.POST.items() if k.startswith("axis:")}
    ratings = {k.removeprefix("rating:"): v for k, v in request.POST.items() if k.startswith("rating:")}
    rationale = request.POST.get("evidence" if study.kind == StudyKind.CHECKLIST else "rationale", "")
    posted = {"verdict": request.POST.get("verdict", ""), "confidence": request.POST.get("confidence", ""),
              "axes": axes, "rationale": rationale, "ratings": ratings}
    try:
        result = vote_submit(
            trial_token=trial_token, rater_id=rater_id, verdict=posted["verdict"], confidence=posted["confidence"],
            axes=axes, rationale=rationale, idempotency_key=request.POST.get("idempotency_key", ""),
            ratings=ratings if study.kind == StudyKind.RATING else None, trial=trial,
            show_next=bool(getattr(request, "htmx", False)),
        )
    except ValidationFailed as exc:
        return _render_state(request, study, trial.assignment, status=400, error=str(exc), posted=posted)
    except Conflict as exc:
        return _render_state(request, study, trial.assignment, status=409, notice=f"{exc}. Here is your current trial.")
    except ArbiterError as exc:
        return _notice(request, study, "Not available", str(exc), status=exc.status_code)
    if getattr(request, "htmx", False):
        # A new vote that did not finish the block found the assignment ACTIVE under its row lock
        # and left a trial to answer; otherwise read it again (the end page shows the completion code).
        fresh = not result.replayed and not result.finished
        return _render_state(request, study, trial.assignment, fresh=fresh)
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
            status=403 if status == 200 else status,
        )
    question = comprehension_question(study)
    left = MAX_ATTEMPTS - rater.comprehension_attempts
    return render(request, "annotation/rater/comprehension.html", {
        "study": study, "question": question, "attempts_left": left, "error": error,
        "instructions_html": instructions_html(study),
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
        return _comprehension_page(request, study, rater, error=str(exc), status=400)
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
    else:
        try:
            handle = stored_image_path(file).open("rb")
        except OSError:
            raise Http404 from None
        response = FileResponse(handle, content_type="image/png")
        if "Content-Disposition" in response:
            del response["Content-Disposition"]
    response["Cache-Control"] = "private, max-age=86400"
    return response


def grant_trial_images(request: HttpRequest, response: HttpResponse, study: Study, trial_token: str) -> None:
    """Give the shown trial's image pass to the session (one query for every slot of the trial)."""
    found = trial_images(trial_token=trial_token, item=study.kind in ITEM_KINDS)
    if found is not None and found.live:
        image_cookie.grant(request, response, trial_token=trial_token, files=found.files)


@require_GET
def instructions(request: HttpRequest, link_token: str) -> HttpResponse:
    study = get_object_or_404(Study, link_token=link_token)
    return render(request, "annotation/rater/instructions.html",
                  {"study": study, "instructions_html": instructions_html(study)})


@require_GET
def pause(request: HttpRequest, link_token: str) -> HttpResponse:
    """Progress is saved with every vote; this page says how to come back."""
    study = get_object_or_404(Study, link_token=link_token)
    rater_id = session_rater_id(request, study.pk)
    rater = Rater.objects.filter(pk=rater_id).order_by().first() if rater_id else None
    assignment = rater_assignment(rater) if rater else None
    answered, total = assignment_counts(assignment) if assignment else (0, 0)
    resume = reverse("rater:link", args=[study.link_token])
    if rater is not None and rater.source == Rater.Source.LINK:
        resume_url = f"{study_link_url(study=study)}?{urlencode({'participant': rater.external_id})}"
    else:
        resume_url = study_link_url(study=study)
    return render(request, "annotation/rater/pause.html", {
        "study": study, "answered": answered, "total": total, "resume": resume, "resume_url": resume_url,
    })
