"""Rater API: the current trial and vote submission, for the session's own assignment only.

Each endpoint parses its body, calls the same flow function as the HTML view
(``annotation.rater.flow``) and renders its Screen as JSON. Participants are not Django users:
they are identified by their session (``annotation.rater.forms.Visitor``), and CSRF is enforced
for every unsafe request. Response fields never name a system, a candidate, a
page or whether a trial is a hidden repeat.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import Forbidden
from annotation.models import ProblemKind
from annotation.rater import flow, forms
from annotation.rater.images import image_pass_grant
from annotation.rater.screens import Screen, session_write
from annotation.views.links import url


class _Csrf(CsrfViewMiddleware):
    def _reject(self, request: HttpRequest, reason: str) -> str:  # type: ignore[override]
        return reason


class ParticipantSessionScheme(OpenApiAuthenticationExtension):
    """Document the participant session (set by the study link) in the OpenAPI schema."""

    target_class = "annotation.rater.api.ParticipantSessionAuthentication"
    name = "participantSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}


class ParticipantSessionAuthentication(BaseAuthentication):
    """No user to authenticate (participants are sessions); only enforce CSRF on writes."""

    def authenticate(self, request: Request) -> None:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            check = _Csrf(lambda r: None)  # type: ignore[arg-type, return-value]
            check.process_request(request._request)
            reason = check.process_view(request._request, None, (), {})  # type: ignore[arg-type]
            if reason:
                raise PermissionDenied(f"CSRF failed: {reason}")
        return None


@method_decorator(ensure_csrf_cookie, name="get")
class TrialNextApi(APIView):
    """The participant's current trial. Sets the CSRF cookie, so a JSON-only client can vote."""

    authentication_classes = [ParticipantSessionAuthentication]
    permission_classes = [AllowAny]

    class RaterTrialTarget(serializers.Serializer):
        role = serializers.CharField()
        description = serializers.CharField()
        bbox_1000 = serializers.ListField(child=serializers.FloatField())

    class RaterTrialAxis(serializers.Serializer):
        id = serializers.CharField()
        title = serializers.CharField(help_text="What raters read: the bundle's title, else the id humanized")
        scope = serializers.CharField()
        description = serializers.CharField()
        targets = serializers.ListField(child=serializers.DictField())

    class RaterTrial(serializers.Serializer):
        finished = serializers.BooleanField()
        break_due = serializers.BooleanField(
            required=False,
            help_text="a break screen stands before the next trial: POST continue_url to go on (the page's break)",
        )
        continue_url = serializers.CharField(required=False)
        minutes_left = serializers.IntegerField(required=False, help_text="at the rater's pace so far (break screens)")
        number = serializers.IntegerField(required=False)
        total = serializers.IntegerField()
        answered = serializers.IntegerField()
        trial = serializers.CharField(required=False)
        images = serializers.DictField(child=serializers.CharField(), required=False)
        axes = serializers.ListField(child=serializers.DictField(), required=False)
        idempotency_key = serializers.CharField(required=False)
        vote_url = serializers.CharField(required=False)
        completion_code = serializers.CharField(required=False)
        completion_url = serializers.CharField(required=False, allow_blank=True,
                                               help_text="where to send the finished participant (may be empty)")
        kind = serializers.CharField(required=False)
        brief = serializers.CharField(required=False, allow_blank=True)
        question = serializers.CharField(required=False, allow_blank=True)
        boxes = serializers.ListField(child=serializers.ListField(child=serializers.FloatField()), required=False)
        dimensions = serializers.ListField(child=serializers.CharField(), required=False)
        scale = serializers.ListField(child=serializers.IntegerField(), required=False)
        attention = serializers.CharField(required=False, allow_blank=True)

    @extend_schema(responses=RaterTrial, summary="The session's current trial (starts its response clock)")
    def get(self, request: Request, link_token: str) -> Response:
        screen = flow.show_trial(link_token=link_token, visitor=forms.visitor_of(request._request))
        refused_raise(screen)
        return screen_json(request, self.RaterTrial(trial_json(screen)).data, screen)


class BreakContinueApi(APIView):
    """Leave the break screen (as the page's Continue button does), answered with the current trial."""

    authentication_classes = [ParticipantSessionAuthentication]
    permission_classes = [AllowAny]

    @extend_schema(request=None, responses=TrialNextApi.RaterTrial, summary="Continue after a break")
    def post(self, request: Request, link_token: str) -> Response:
        screen = flow.continue_break(link_token=link_token, visitor=forms.visitor_of(request._request))
        refused_raise(screen)
        return screen_json(request, TrialNextApi.RaterTrial(trial_json(screen)).data, screen)


def refused_raise(screen: Screen) -> None:
    """A refused answer, report or continue: the API answers with its error (the page shows the Screen)."""
    if screen.refused is not None:
        raise screen.refused


def screen_json(request: Request, data: Any, screen: Screen) -> Response:
    """A Screen rendered as JSON: no caching, the session told what the Screen asks, the trial's image pass."""
    session_write(request._request, screen)
    response = Response(data)
    response["Cache-Control"] = "no-store"
    image_pass_grant(request._request, response, screen)
    return response


def trial_json(screen: Screen) -> dict[str, Any]:
    """The rater API's view of a trial Screen (or of the break before it, or of the end of the block)."""
    if screen.kind == "break":
        paused: dict[str, Any] = {
            "finished": False, "break_due": True, "total": screen.total, "answered": screen.answered,
            "continue_url": reverse("rater:api-break", args=[screen.study.link_token]) if screen.study else "",
        }
        if screen.context.get("minutes_left"):
            paused["minutes_left"] = screen.context["minutes_left"]
        return paused
    if screen.trial is None:
        return {"finished": True, "total": screen.total, "answered": screen.answered,
                "completion_code": screen.completion_code, "completion_url": screen.completion_url}
    view = screen.trial
    images = dict(screen.context["images"])
    data: dict[str, Any] = {
        "finished": False, "number": view.number, "total": view.total, "answered": view.answered,
        "trial": view.trial.token, "images": images, "axes": view.axes, "idempotency_key": view.idempotency_key,
        "vote_url": url("rater:api-vote", view.trial.token),
    }
    if "ref" not in images:  # the other kinds (docs/study-kinds.md): the question and its answer form
        data.update({
            "kind": view.kind, "brief": view.brief, "question": view.question,
            "boxes": [list(b) for b in view.boxes], "dimensions": list(view.dimensions),
            "scale": list(view.scale), "attention": view.attention,
        })
    return data


def recorded_json(screen: Screen) -> dict[str, Any]:
    """A stored answer and the screen that follows it (``next_trial``: the trial, the break or the end)."""
    vote = screen.vote
    assert vote is not None and screen.study is not None
    return {"recorded": True, "trial": screen.recorded_trial, "finished": vote.finished,
            "completion_code": vote.completion_code, "next": reverse("rater:api-trial", args=[screen.study.link_token]),
            "next_trial": trial_json(screen)}


class VoteSubmitApi(APIView):
    authentication_classes = [ParticipantSessionAuthentication]
    permission_classes = [AllowAny]

    class RaterVoteInput(serializers.Serializer):
        verdict = serializers.CharField(allow_blank=True, required=False, default="")
        confidence = serializers.JSONField(required=False, default=None)
        axes = serializers.DictField(child=serializers.JSONField(), required=False, default=dict)
        rationale = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
        evidence = serializers.CharField(
            required=False, allow_blank=True, default="", trim_whitespace=False,
            help_text="checklist: the evidence note (same as rationale)",
        )
        ratings = serializers.DictField(
            child=serializers.JSONField(), required=False, default=None, help_text="rating: {dimension: integer}"
        )
        idempotency_key = serializers.CharField()

    class RaterVoteResult(serializers.Serializer):
        recorded = serializers.BooleanField()
        trial = serializers.CharField()
        finished = serializers.BooleanField()
        completion_code = serializers.CharField(allow_blank=True)
        next = serializers.CharField(help_text="the current trial's address (what next_trial already holds)")
        next_trial = TrialNextApi.RaterTrial(help_text="what follows the answer: the next trial, the break or the end")

    @extend_schema(request=RaterVoteInput, responses=RaterVoteResult,
                   summary="Answer a trial (idempotent per key); the answer brings the next trial")
    def post(self, request: Request, trial_token: str) -> Response:
        answer = self.parsed(request)
        screen = flow.answer_trial(trial_token=trial_token, answer=answer, visitor=forms.visitor_of(request._request))
        refused_raise(screen)
        return screen_json(request, self.RaterVoteResult(recorded_json(screen)).data, screen)

    def parsed(self, request: Request) -> forms.AnswerForm:
        """The body as an answer; a refused body is raised by the flow once the trial is found."""
        body = self.RaterVoteInput(data=request.data)
        if not body.is_valid():
            return forms.AnswerForm(from_json=True, refused=ValidationError(body.errors))
        return forms.answer_of_json(body.validated_data)


class VoteReviseApi(VoteSubmitApi):
    """Answer the last answered trial again ("Undo last answer"); the replaced answer is kept in the
    vote's history. Only while the assignment's current trial is unanswered (else 409)."""

    @extend_schema(
        request=VoteSubmitApi.RaterVoteInput, responses=VoteSubmitApi.RaterVoteResult,
        summary="Change the last answer (idempotent per key)",
    )
    def post(self, request: Request, trial_token: str) -> Response:
        answer = self.parsed(request)
        screen = flow.revise_trial(trial_token=trial_token, answer=answer, visitor=forms.visitor_of(request._request))
        refused_raise(screen)
        return screen_json(request, self.RaterVoteResult(recorded_json(screen)).data, screen)


class TrialProblemApi(APIView):
    """Report a problem on one of the session's trials (stored for researchers; not a vote)."""

    authentication_classes = [ParticipantSessionAuthentication]
    permission_classes = [AllowAny]

    class ProblemInput(serializers.Serializer):
        kind = serializers.ChoiceField(choices=ProblemKind.choices)
        text = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000,
                                     help_text="required for kind 'other'")

    class ProblemResult(serializers.Serializer):
        reported = serializers.BooleanField()
        kind = serializers.CharField()

    @extend_schema(request=ProblemInput, responses=ProblemResult, summary="Report a problem with a trial")
    def post(self, request: Request, trial_token: str) -> Response:
        body = self.ProblemInput(data=request.data)
        if body.is_valid():
            problem = forms.ProblemForm(kind=body.validated_data["kind"], text=body.validated_data["text"])
        else:  # raised by the flow once the trial is found
            problem = forms.ProblemForm(refused=ValidationError(body.errors))
        screen = flow.report_problem(trial_token=trial_token, problem=problem, visitor=forms.visitor_of(request._request))
        refused_raise(screen)
        return Response(self.ProblemResult(dict(screen.context)).data, status=status.HTTP_201_CREATED)


class ComprehensionSubmitApi(APIView):
    """One attempt at the comprehension question before the first trial
    (docs/study-kinds.md "Comprehension check").

    The same service as the HTML form: ``passed`` opens the trials, ``retry`` leaves one more
    attempt, ``failed`` screens the participant out (no block is claimed).
    """

    authentication_classes = [ParticipantSessionAuthentication]
    permission_classes = [AllowAny]

    class ComprehensionInput(serializers.Serializer):
        answer = serializers.CharField(
            allow_blank=True, help_text="the value of one of the question's choices"
        )

    class ComprehensionResult(serializers.Serializer):
        result = serializers.ChoiceField(choices=["passed", "retry", "failed"])
        attempts_left = serializers.IntegerField()

    class ComprehensionState(serializers.Serializer):
        state = serializers.ChoiceField(choices=["open", "passed", "failed"])
        question = serializers.CharField()
        choices = serializers.ListField(child=serializers.DictField())
        attempts_left = serializers.IntegerField()

    @extend_schema(responses=ComprehensionState, summary="The comprehension question and the session's attempts")
    def get(self, request: Request, link_token: str) -> Response:
        screen = flow.comprehension_page(link_token=link_token, visitor=forms.visitor_of(request._request))
        question = screen.context["question"]
        data = {
            "state": screen.context["state"], "question": question.question,
            "choices": [{"value": v, "label": label} for v, label in question.choices],
            "attempts_left": screen.context["attempts_left"],
        }
        return screen_json(request, self.ComprehensionState(data).data, screen)

    @extend_schema(
        request=ComprehensionInput,
        responses=ComprehensionResult,
        summary="Answer the comprehension question (two attempts)",
    )
    def post(self, request: Request, link_token: str) -> Response:
        body = self.ComprehensionInput(data=request.data)
        if not body.is_valid():  # the study and the session first (404, 403), then the body (400)
            flow.comprehension_page(link_token=link_token, visitor=forms.visitor_of(request._request))
            raise ValidationError(body.errors)
        screen = flow.answer_comprehension(link_token=link_token, visitor=forms.visitor_of(request._request),
                                           answer=body.validated_data["answer"])
        refused_raise(screen)
        if "result" not in screen.context:
            raise Forbidden("open the study link you were given first")
        outcome = {"result": screen.context["result"], "attempts_left": screen.context["attempts_left"]}
        return screen_json(request, self.ComprehensionResult(outcome).data, screen)
