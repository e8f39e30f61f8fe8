"""The participant's pages: each view parses its request, calls one flow function and renders the Screen.

The study link, the trial page (htmx swaps trials), votes, undo and revisions, the problem
report, and the small pages around them (instructions, pause, the comprehension question, the
break, the end comment). The trial's images are ``annotation.rater.images.trial_image_view``.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_POST

from annotation.rater import flow, forms
from annotation.rater.images import image_pass_grant
from annotation.rater.screens import screen_response
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
    screen = flow.answer_trial(trial_token=trial_token, answer=posted.form, visitor=posted.visitor)
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
    screen = flow.revise_trial(trial_token=trial_token, answer=posted.form, visitor=posted.visitor)
    response = screen_response(request, screen)
    image_pass_grant(request, response, screen)
    return response


@require_POST
def trial_problem(request: HttpRequest, trial_token: str) -> HttpResponse:
    """"Report a problem" on a trial: stored for researchers; the trial still waits for its answer."""
    posted = forms.problem_posted(request)
    screen = flow.report_problem(trial_token=trial_token, problem=posted.form, visitor=posted.visitor)
    return screen_response(request, screen)


@require_POST
def comprehension(request: HttpRequest, link_token: str) -> HttpResponse:
    """One attempt at the comprehension question; passed → the first trial."""
    screen = flow.answer_comprehension(link_token=link_token, visitor=forms.visitor_of(request),
                                       answer=forms.posted_text(request, "answer"))
    return screen_response(request, screen)


@require_GET
def instructions(request: HttpRequest, link_token: str) -> HttpResponse:
    return screen_response(request, flow.instructions_page(link_token=link_token))


@require_GET
def pause(request: HttpRequest, link_token: str) -> HttpResponse:
    """Progress is saved with every vote; this page says how to come back."""
    screen = flow.pause_page(link_token=link_token, visitor=forms.visitor_of(request), origin=serving_origin(request))
    return screen_response(request, screen)


@require_POST
def break_continue(request: HttpRequest, link_token: str) -> HttpResponse:
    """Leave the break screen: this session will not show the same break again."""
    return screen_response(request, flow.continue_break(link_token=link_token, visitor=forms.visitor_of(request)))


@require_POST
def end_comment(request: HttpRequest, link_token: str) -> HttpResponse:
    """The optional end-of-study comment; then on to the completion URL (or back to the end page)."""
    screen = flow.send_end_comment(link_token=link_token, visitor=forms.visitor_of(request),
                                   text=forms.posted_text(request, "comment"))
    return screen_response(request, screen)
