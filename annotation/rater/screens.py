"""The participant's next screen, as one frozen value, and how it is rendered as HTML.

A flow function (``annotation.rater.flow``) decides everything a screen shows inside its
transaction and returns a ``Screen``; ``screen_response`` only renders it (no query): the trial
page, the htmx fragment that replaces ``#trial-root``, a whole page (a notice, the break, the
comprehension question, the join page), the problem report alone, or a redirect. The rater API
renders the same Screen as JSON (``annotation.rater.api``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from annotation.middleware import render_timed
from annotation.models import Study
from annotation.rater.forms import SESSION_BREAKS, SESSION_RATERS
from annotation.services.answers import Progress, TrialView, VoteResult

TRIAL_PAGE = "annotation/rater/trial_base.html"  # the page around the state
TRIAL_STATE = "annotation/rater/_state.html"  # what #trial-root holds (an htmx answer gets it alone)
PROBLEM = "annotation/rater/_problem.html"  # the problem report, alone (its htmx answer)

ScreenKind = Literal["trial", "end", "break", "page", "problem", "redirect", "recorded"]


@dataclass(frozen=True)
class ImagePass:
    """The shown trial's image files, handed to the browser as its image pass (``rater.images``)."""

    trial_token: str
    files: Mapping[str, str]


@dataclass(frozen=True)
class Screen:
    """What the participant sees next.

    ``kind``: ``trial`` (a trial in ``#trial-root``, ``trial`` its view), ``end`` (the end page,
    also in ``#trial-root``), ``break`` (the break screen), ``page`` (a whole page: a notice, the
    join page, the comprehension question; ``template``), ``problem`` (the problem report alone),
    ``redirect`` (go to ``location``), ``recorded`` (the problem report stored through the API).
    ``vote``: an API answer stored (to ``recorded_trial``), then the screen that follows it.
    ``context`` is the template's, complete. ``notice`` and ``error`` are what the trial state
    says above the trial; ``progress`` what the answer counted; ``images`` the image pass that goes
    with the response; ``session_rater``: (study id, rater id) the session speaks for from now on;
    ``session_break``: (assignment id, answered) the break the session has continued from;
    ``refused``: the error a refused answer, report or continue is (the rater API answers with it;
    the page shows the Screen).
    """

    kind: ScreenKind
    study: Study | None = None
    status: int = 200
    template: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    trial: TrialView | None = None
    progress: Progress | None = None
    notice: str = ""
    error: str = ""
    answered: int = 0
    total: int = 0
    completion_code: str = ""
    completion_url: str = ""
    location: str = ""
    htmx: bool = False
    images: ImagePass | None = None
    vote: VoteResult | None = None
    recorded_trial: str = ""
    session_rater: tuple[int, int] | None = None
    session_break: tuple[int, int] | None = None
    refused: Exception | None = None


def screen_response(request: HttpRequest, screen: Screen) -> HttpResponse:
    """The Screen as an HTTP response: a page, the htmx fragment, or a redirect."""
    session_write(request, screen)
    if screen.kind == "redirect" or _after_post(screen):
        return redirect(screen.location, permanent=False)
    if screen.kind == "break" and screen.htmx:
        # A whole page load: the break screen is its own page (and survives a reload).
        response = HttpResponse(status=200)
        response["HX-Redirect"] = screen.location
        response["Cache-Control"] = "no-store"
        return response
    if screen.kind in ("trial", "end"):
        with render_timed(request):
            state = render_to_string(TRIAL_STATE, dict(screen.context), request)
            if screen.htmx:
                response = HttpResponse(state, status=screen.status)
            else:
                response = render(request, TRIAL_PAGE, {"study": screen.study, "state_html": mark_safe(state)},
                                  status=screen.status)
        response["Vary"] = "HX-Request"
        response["Cache-Control"] = "no-store"
        return response
    if screen.kind == "problem":
        with render_timed(request):
            response = HttpResponse(render_to_string(PROBLEM, dict(screen.context), request), status=screen.status)
        response["Cache-Control"] = "no-store"
        return response
    with render_timed(request):
        response = render(request, screen.template, dict(screen.context), status=screen.status)
    if screen.kind == "break":
        response["Cache-Control"] = "no-store"
    return response


def _after_post(screen: Screen) -> bool:
    """A page without htmx, after an answer, a continue or a problem report that went through: back
    to the study link (post/redirect/get), which shows what comes next."""
    done = screen.vote is not None or screen.session_break is not None or screen.kind == "problem"
    return done and not screen.htmx and bool(screen.location) and screen.status < 300


def session_write(request: HttpRequest, screen: Screen) -> None:
    """What the Screen asks the session to remember (the HTML views and the rater API alike)."""
    if screen.session_rater is not None:
        _session_rater_set(request, *screen.session_rater)
    if screen.session_break is not None:
        assignment_id, answered = screen.session_break
        breaks = dict(request.session.get(SESSION_BREAKS, {}))
        breaks[str(assignment_id)] = answered
        request.session[SESSION_BREAKS] = breaks


def _session_rater_set(request: HttpRequest, study_id: int, rater_id: int) -> None:
    raters = dict(request.session.get(SESSION_RATERS, {}))
    raters[str(study_id)] = rater_id
    request.session.cycle_key()  # a new session id once an identity is attached (no fixation)
    request.session[SESSION_RATERS] = raters
