"""The participant's pages: each view parses its request, calls one flow function and renders the Screen.

The study link, the trial page (htmx swaps trials), votes, undo and revisions, the problem
report, and the small pages around them (instructions, pause, the comprehension question, the
break, the end comment). The trial's images are ``annotation.rater.images.trial_image_view``.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from annotation.errors import ArbiterError, ValidationFailed
from annotation.models import Rater, Study
from annotation.rater import flow, forms
from annotation.rater.images import image_pass_grant
from annotation.rater.screens import screen_response
from annotation.services.answers import assignment_counts
from annotation.services.comprehension import comprehension_submit
from annotation.services.crowd import completion_redirect_url, end_comment_submit
from annotation.services.participants import rater_assignment, study_link_url
from annotation.views.links import serving_origin


def study_link(request: HttpRequest, link_token: str) -> HttpResponse:
    """The participant entry point: exchange ``?participant=`` for a session, then show the trial."""
    visit = forms.link_visited(request)
    if visit.external_id:
        screen = flow.join(link_token=link_token, external_id=visit.external_id, platform=dict(visit.platform))
    else:
        screen = flow.show_trial(link_token=link_token, visitor=visit.visitor)
    response = screen_response(request, screen)
    image_pass_grant(request, response, screen)
    return response


@require_POST
def trial_vote(request: HttpRequest, trial_token: str) -> HttpResponse:
    """Submit an answer (htmx swaps in the next trial; without JS: redirect back to the link)."""
    posted = forms.answer_posted(request)
    screen = flow.answer_trial(trial_token=trial_token, answer=posted.form, visitor=posted.visitor,
                               respond="fragment" if posted.visitor.htmx else "page")
    response = screen_response(request, screen)
    image_pass_grant(request, response, screen)
    return response


@require_GET
def trial_undo(request: HttpRequest, trial_token: str) -> HttpResponse:
    """"Undo last answer" on the current trial: the previous trial again, its answer filled in."""
    screen = flow.undo_trial(trial_token=trial_token, visitor=forms.visitor_of(request))
    response = screen_response(request, screen)
    image_pass_grant(request, response, screen)
    return response


@require_POST
def trial_revise(request: HttpRequest, trial_token: str) -> HttpResponse:
    """The new answer to the previous trial (after Undo); then the current trial again."""
    posted = forms.answer_posted(request)
    screen = flow.revise_trial(trial_token=trial_token, answer=posted.form, visitor=posted.visitor,
                               respond="fragment" if posted.visitor.htmx else "page")
    response = screen_response(request, screen)
    image_pass_grant(request, response, screen)
    return response


@require_POST
def trial_problem(request: HttpRequest, trial_token: str) -> HttpResponse:
    """"Report a problem" on a trial: stored for researchers; the trial still waits for its answer."""
    posted = forms.problem_posted(request)
    screen = flow.report_problem(trial_token=trial_token, problem=posted.form, visitor=posted.visitor,
                                 respond="fragment" if posted.visitor.htmx else "page")
    return screen_response(request, screen)


def _session_rater(request: HttpRequest, study: Study) -> Rater | None:
    rater_id = flow.session_rater_id(forms.visitor_of(request), study.pk)
    return Rater.objects.filter(pk=rater_id, study=study).order_by().first() if rater_id else None


@require_POST
def comprehension(request: HttpRequest, link_token: str) -> HttpResponse:
    """One attempt at the comprehension question; passed → the first trial."""
    study = get_object_or_404(Study, link_token=link_token)
    rater = _session_rater(request, study)
    if rater is None:
        return redirect(reverse("rater:link", args=[link_token]))
    try:
        result = comprehension_submit(rater=rater, answer=request.POST.get("answer", ""))
    except ValidationFailed as exc:
        return screen_response(request, flow.comprehension_screen(study, rater, error=flow.plain_sentence(exc),
                                                                  status=400))
    if result == "retry":
        return screen_response(request, flow.comprehension_screen(
            study, rater, status=400,
            error="That is not the right answer. Read the instructions again; you have one more attempt.",
        ))
    return redirect(reverse("rater:link", args=[link_token]))


@require_GET
def instructions(request: HttpRequest, link_token: str) -> HttpResponse:
    study = get_object_or_404(Study, link_token=link_token)
    return render(request, "annotation/rater/instructions.html", {
        "study": study, "instructions_html": flow.instructions_html(study),
        "shortcuts_html": mark_safe(render_to_string("annotation/rater/_shortcuts.html", {}, request)),
    })


@require_GET
def pause(request: HttpRequest, link_token: str) -> HttpResponse:
    """Progress is saved with every vote; this page says how to come back."""
    study = get_object_or_404(Study, link_token=link_token)
    rater_id = flow.session_rater_id(forms.visitor_of(request), study.pk)
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


@require_POST
def break_continue(request: HttpRequest, link_token: str) -> HttpResponse:
    """Leave the break screen: this session will not show the same break again."""
    return screen_response(request, flow.continue_break(link_token=link_token, visitor=forms.visitor_of(request),
                                                        respond="page"))


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
        return screen_response(request, flow.notice(study, "Comment not saved", str(exc), status=exc.status_code))
    target = completion_redirect_url(study=study, code=saved.completion_code)
    return redirect(target or reverse("rater:link", args=[link_token]))
