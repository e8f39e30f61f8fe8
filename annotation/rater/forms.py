"""What a participant's request brings, parsed once: the session's identity and the posted answer.

Nothing here reads the database: the session's mapping of studies to raters is read as stored
(the session itself is loaded by Django's middleware), and an account's rater is looked up by the
flow, inside its transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest

SESSION_RATERS = "arbiter.raters"
# {assignment id: answered count at the last break the rater continued from} (issue 17 breaks).
SESSION_BREAKS = "arbiter.breaks"
PARTICIPANT_PARAMS = ("participant", "PROLIFIC_PID")
PLATFORM_PARAMS = ("STUDY_ID", "SESSION_ID")
AXES_DEFAULTED_MAX = 50


def is_htmx(request: HttpRequest) -> bool:
    """Whether htmx sent the request: django-htmx's ``bool(request.htmx)``, read straight from the
    header (``request.htmx`` builds ``request.headers``, a copy of every header, on each request)."""
    return request.META.get("HTTP_HX_REQUEST") == "true"


@dataclass(frozen=True)
class Visitor:
    """Who the request speaks for: the session's raters, its breaks, the account, htmx or not.

    ``user`` is Django's lazy user: it is read only when no session rater answers for a study.
    """

    raters: Mapping[str, int]
    breaks: Mapping[str, int]
    user: Any
    htmx: bool


def visitor_of(request: HttpRequest) -> Visitor:
    session = request.session
    return Visitor(raters=session.get(SESSION_RATERS, {}), breaks=session.get(SESSION_BREAKS, {}),
                   user=request.user, htmx=is_htmx(request))


def posted_text(request: HttpRequest, name: str) -> str:
    """One posted text field of a small form (the comprehension answer, the end comment)."""
    return str(request.POST.get(name, ""))


@dataclass(frozen=True)
class AnswerForm:
    """An answer as posted: the trial form's fields (``from_json``: the rater API's body)."""

    verdict: object = ""
    confidence: object = ""
    axes: Mapping[str, object] = field(default_factory=dict)
    ratings: Mapping[str, object] | None = None
    rationale: str = ""
    evidence: str = ""
    axes_defaulted: tuple[str, ...] = ()
    idempotency_key: str = ""
    from_json: bool = False
    # A body the API refused, raised by the flow once the trial is found (a stranger's request
    # for a missing trial is a 404 whatever its body).
    refused: Exception | None = None

    def rationale_for(self, rationale_field: str) -> str:
        """The free text of the kind's answer (its design's ``rationale_field``)."""
        if self.from_json:
            return self.evidence or self.rationale
        return self.evidence if rationale_field == "evidence" else self.rationale

    def posted(self, rationale_field: str) -> dict[str, Any]:
        """The answer fields as the trial form shows them again when the answer is refused."""
        return {"verdict": self.verdict, "confidence": self.confidence, "axes": dict(self.axes),
                "rationale": self.rationale_for(rationale_field), "ratings": dict(self.ratings or {}),
                "axes_defaulted": list(self.axes_defaulted)}


@dataclass(frozen=True)
class Answer:
    """A posted answer and who posted it."""

    visitor: Visitor
    form: AnswerForm


def answer_posted(request: HttpRequest) -> Answer:
    """The trial form's answer fields, as posted (shown again when the answer is refused)."""
    post = request.POST
    axes = {k.removeprefix("axis:"): v for k, v in post.items() if k.startswith("axis:")}
    ratings = {k.removeprefix("rating:"): v for k, v in post.items() if k.startswith("rating:")}
    # The axes the rater set with the verdict key and left so (trial.js fills the hidden field).
    defaulted = tuple(a for a in post.get("axes_defaulted", "").split(",") if a)[:AXES_DEFAULTED_MAX]
    form = AnswerForm(verdict=post.get("verdict", ""), confidence=post.get("confidence", ""), axes=axes,
                      ratings=ratings, rationale=post.get("rationale", ""), evidence=post.get("evidence", ""),
                      axes_defaulted=defaulted, idempotency_key=post.get("idempotency_key", ""))
    return Answer(visitor=visitor_of(request), form=form)


def answer_of_json(data: Mapping[str, Any]) -> AnswerForm:
    """The rater API's validated vote body as an answer."""
    return AnswerForm(verdict=data["verdict"], confidence=data["confidence"], axes=data["axes"],
                      ratings=data["ratings"], rationale=data["rationale"], evidence=data["evidence"],
                      idempotency_key=data["idempotency_key"], from_json=True)


@dataclass(frozen=True)
class ProblemForm:
    kind: str = ""
    text: str = ""
    refused: Exception | None = None  # as ``AnswerForm.refused``


@dataclass(frozen=True)
class Problem:
    visitor: Visitor
    form: ProblemForm


def problem_posted(request: HttpRequest) -> Problem:
    """"Report a problem": its kind and text, as posted."""
    form = ProblemForm(kind=request.POST.get("kind", ""), text=request.POST.get("text", ""))
    return Problem(visitor=visitor_of(request), form=form)


@dataclass(frozen=True)
class LinkVisit:
    """A visit to the study link: ``external_id`` (``?participant=``) joins, else the session continues."""

    visitor: Visitor
    external_id: str
    platform: Mapping[str, str]


def link_visited(request: HttpRequest) -> LinkVisit:
    external_id = next((request.GET[p] for p in PARTICIPANT_PARAMS if request.GET.get(p)), "")
    platform = {p: request.GET.get(p, "") for p in PLATFORM_PARAMS}
    platform["PROLIFIC_PID"] = request.GET.get("PROLIFIC_PID", "")
    return LinkVisit(visitor=visitor_of(request), external_id=external_id, platform=platform)
