"""Raters taking part: study-link participants, claims, trials, votes, voids and reopened slots.

SPEC §1 (raters), §3 (canonical votes), §4 (automatic assignment to the block furthest below its
rater target). Claims never exceed a target: a block's targets are its planned open assignments,
and a participant only ever takes one with a conditional ``UPDATE … WHERE state = 'open'``
(checking the row count), inside a transaction that holds the rater's row lock so two arrivals of
the same participant cannot take two slots. Votes are idempotent: the trial row is locked, the
``Vote.trial`` one-to-one guarantees one row, and a retry with the same key and body answers the
same; the same key with another body is a conflict.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict, Forbidden, NotFound, ValidationFailed
from annotation.models import (
    PAIRWISE_LABELS,
    Assignment,
    AssignmentState,
    Axis,
    Block,
    Label,
    Rater,
    Study,
    StudyKind,
    Trial,
    Vote,
)
from annotation.selectors.compiled import compiled_rows
from annotation.services.audit import audit_record
from annotation.services.candidate_versions import (
    VERSION_ANNOTATIONS,
    displayed_versions,
    trials_record_versions,
    versions_now,
)
from annotation.services.comprehension import ComprehensionRequired, comprehension_required
from annotation.services.scheduling import assignment_plan_copy

CHECKLIST_LABELS = (Label.YES, Label.NO, Label.UNCLEAR)
PARTICIPANT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,99}$")
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
AXIS_SCORES = (-2, -1, 0, 1, 2)
RATIONALE_MAX = 4000
CLAIM_ATTEMPTS = 200
LIVE_STATES = (AssignmentState.ACTIVE, AssignmentState.FINISHED)


class StudyFull(ArbiterError):
    """Every planned place is taken: the study link says so politely."""

    status_code = 409


class StudyClosed(ArbiterError):
    status_code = 409


class ParticipationEnded(ArbiterError):
    """The participant's assignment was voided; they do not get another block."""

    status_code = 403


# --- participants -----------------------------------------------------------------------------


def participant_id_clean(value: str) -> str:
    value = (value or "").strip()
    if not PARTICIPANT_ID_RE.match(value):
        raise ValidationFailed(
            "a participant id is 1–100 letters, digits or _ . @ : + - (no spaces)", field="participant"
        )
    return value


def participant_rater_get_or_create(*, study: Study, external_id: str, platform: Mapping[str, str] | None = None) -> Rater:
    """The rater for a study-link participant id (the same id always gives the same rater)."""
    external_id = participant_id_clean(external_id)
    clean_platform = {k: str(v)[:200] for k, v in (platform or {}).items() if v}
    existing = Rater.objects.filter(study=study, external_id=external_id).order_by().first()
    if existing is not None and existing.source != Rater.Source.LINK:
        # An imported rater or an account's profile: taking it over through a link would let a
        # stranger vote as that rater and read their completion code.
        raise ValidationFailed("this participant id is not available", field="participant")
    try:
        with transaction.atomic():
            rater, created = Rater.objects.get_or_create(
                study=study, external_id=external_id,
                defaults={"source": Rater.Source.LINK, "platform": clean_platform},
            )
    except IntegrityError:  # a concurrent first arrival of the same id
        rater, created = Rater.objects.get(study=study, external_id=external_id), False
    if not created and clean_platform and clean_platform != rater.platform:
        Rater.objects.filter(pk=rater.pk).update(platform={**rater.platform, **clean_platform})
    return rater


def account_rater_get_or_create(*, study: Study, user: User) -> Rater:
    """The rater profile of a logged-in rater account for one study."""
    existing = Rater.objects.filter(study=study, user=user).order_by().first()
    if existing:
        return existing
    try:
        with transaction.atomic():
            # "/" is not allowed in participant ids, so no study link can ever produce this id.
            return Rater.objects.create(
                study=study, user=user, external_id=f"account/{user.pk}", source=Rater.Source.ACCOUNT
            )
    except IntegrityError:
        found = Rater.objects.filter(study=study, user=user).order_by().first()
        if found is None:
            raise Conflict("this rater account's id is taken in this study; ask an admin") from None
        return found


def completion_code_new() -> str:
    """A Prolific-style completion code: eight characters without look-alikes (0/O, 1/I)."""
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))


def rater_assignment(rater: Rater | int) -> Assignment | None:
    """The rater's live (active or finished) assignment, if any."""
    rater_id = rater if isinstance(rater, int) else rater.pk
    return (
        Assignment.objects.filter(rater_id=rater_id, state__in=LIVE_STATES)
        .select_related("block__study")
        .order_by("id")
        .first()
    )


def _blocks_by_need(study: Study) -> list[int]:
    """Block ids, the one furthest below its rater target first (SPEC §4 automatic assignment)."""
    blocks = Block.objects.filter(study=study).order_by().annotate(
        taken=Count("assignments", filter=Q(assignments__state__in=LIVE_STATES)),
        open=Count("assignments", filter=Q(assignments__state=AssignmentState.OPEN)),
    )
    ranked = sorted(
        (b for b in blocks if b.open > 0),
        key=lambda b: (-(b.target_raters - b.taken), b.taken / max(b.target_raters, 1), b.position, b.pk),
    )
    return [b.pk for b in ranked]


def participant_claim(*, study: Study, rater: Rater) -> Assignment:
    """The rater's live assignment, or a newly claimed open one in the neediest block.

    Raises StudyClosed when the study takes no participants, ParticipationEnded when the rater's
    assignment was voided, StudyFull when no open place is left.
    """
    current = rater_assignment(rater)
    if current is not None:
        return current
    if not study.accepting_participants:
        raise StudyClosed("This study is not accepting participants at the moment.")
    if comprehension_required(study) and not Rater.objects.filter(pk=rater.pk, comprehension_passed=True).exists():
        raise ComprehensionRequired("Answer the comprehension question before the first trial.")
    with transaction.atomic():
        # Serialize arrivals of the same participant (two tabs, a double click on the link).
        Rater.objects.select_for_update().get(pk=rater.pk)
        current = rater_assignment(rater)
        if current is not None:
            return current
        if Assignment.objects.filter(rater=rater, state=AssignmentState.VOIDED).exists():
            raise ParticipationEnded("Your participation in this study has ended. Thank you for your time.")
        # Each arrival locks a different open row (skip_locked); the conditional UPDATE is the
        # guard that makes a double claim impossible even where row locks do not exist (SQLite).
        for _attempt in range(CLAIM_ATTEMPTS):
            for block_id in _blocks_by_need(study):
                pk = (
                    Assignment.objects.select_for_update(skip_locked=True)
                    .filter(block_id=block_id, state=AssignmentState.OPEN, rater__isnull=True)
                    .order_by("slot", "id")
                    .values_list("pk", flat=True)
                    .first()
                )
                if pk is None:
                    continue
                claimed = Assignment.objects.filter(
                    pk=pk, state=AssignmentState.OPEN, rater__isnull=True
                ).update(rater=rater, state=AssignmentState.ACTIVE, claimed_at=timezone.now())
                if claimed == 1:
                    return Assignment.objects.select_related("block__study").get(pk=pk)
            if not Assignment.objects.filter(block__study=study, state=AssignmentState.OPEN).exists():
                break
            time.sleep(0.01)  # every open row is being claimed by someone else right now
    raise StudyFull("All places in this study are taken. Thank you for your interest.")


def study_link_url(*, study: Study, origin: str = "") -> str:
    """The participant URL of a study (SPEC §9 ``study_link``).

    The origin is ``ARBITER_PUBLIC_URL`` when set; otherwise the serving origin the caller knows
    (a web page passes its request's), else ``ARBITER_SERVE_ORIGIN`` (``make run`` sets it to its
    host and port), else http://127.0.0.1:8000.
    """
    from django.urls import reverse

    public = str(getattr(settings, "ARBITER_PUBLIC_URL", "") or os.environ.get("ARBITER_PUBLIC_URL", ""))
    base = (public or origin or os.environ.get("ARBITER_SERVE_ORIGIN", "") or DEFAULT_ORIGIN).rstrip("/")
    return f"{base}{reverse('rater:link', args=[study.link_token])}"


DEFAULT_ORIGIN = "http://127.0.0.1:8000"


# --- trials -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialView:
    """What a rater is shown for one trial. Carries no system, candidate or repeat information.

    Other kinds (SPEC §11): ``brief`` is the brief's text (may be empty), ``question`` and
    ``boxes`` a checklist predicate's, ``dimensions`` and ``scale`` a rating study's, and
    ``attention`` the instruction line of an attention check (empty on data trials).
    """

    trial: Trial
    number: int
    total: int
    answered: int
    axes: list[dict[str, Any]]
    idempotency_key: str
    kind: str = StudyKind.PAIRWISE_REFERENCE
    brief: str = ""
    question: str = ""
    boxes: tuple[tuple[float, ...], ...] = ()
    dimensions: tuple[str, ...] = ()
    scale: tuple[int, ...] = ()
    attention: str = ""


ATTENTION_NAMES = {"A": "A", "B": "B", "TIE": "Tie", "YES": "Yes", "NO": "No", "UNCLEAR": "Unclear"}


def attention_instruction(trial: Trial, kind: str) -> str:
    """The instructed-response line of an attention check (SPEC §11), in the page's own words."""
    expected = trial.attention_expected
    if not expected:
        return ""
    if kind == StudyKind.RATING:
        return f"Attention check: for this image, please choose {expected} on every dimension."
    return f"Attention check: for this one, please answer “{ATTENTION_NAMES.get(expected, expected)}”."


def _trial_page(trial: Trial) -> Any:
    if trial.comparison_id:
        return trial.comparison.page  # type: ignore[union-attr]
    if trial.predicate_id:
        return trial.predicate.candidate.page  # type: ignore[union-attr]
    return trial.candidate.page  # type: ignore[union-attr]


def study_axes(study: Study) -> list[Axis]:
    """A study's axes in order, read once per Study instance (a request's answer and next trial share it)."""
    cached: list[Axis] | None = study.__dict__.get("_arbiter_axes")
    if cached is None:
        cached = list(Axis.objects.filter(study_id=study.pk).order_by("position"))
        study.__dict__["_arbiter_axes"] = cached
    return cached


def trial_active_axes(trial: Trial, axes: list[Axis] | None = None) -> list[dict[str, Any]]:
    """The page's active axes (SPEC §2), each with its description and its targets."""
    page = _trial_page(trial)
    if axes is None:
        axes = list(Axis.objects.filter(study_id=page.study_id).order_by("position"))
    active = page.active_axis_ids(axes)
    out = []
    for axis in axes:
        if axis.axis_id not in active:
            continue
        targets = [
            {"role": str(t.get("role", "")), "description": str(t.get("description", "")),
             "bbox_1000": [float(v) for v in t.get("bbox_1000", [])][:4]}
            for t in page.targets
            if t.get("axis") == axis.axis_id and len(t.get("bbox_1000") or []) == 4
        ]
        out.append({"id": axis.axis_id, "title": axis.display_title, "scope": axis.scope,
                    "description": axis.description, "targets": targets})
    return out


def assignment_counts(assignment: Assignment) -> tuple[int, int]:
    """(answered, total) trials of an assignment."""
    rows = compiled_rows("assignment_counts", _counts_query, assignment.pk)
    return (int(rows[0]["answered"]), int(rows[0]["total"])) if rows else (0, 0)


def _counts_query(assignment_id: int) -> Any:
    return (
        Trial.objects.filter(assignment_id=assignment_id).order_by().values("assignment_id")
        .annotate(total=Count("id"), answered=Count("vote"))
    )


# What a trial page needs of its unit, per kind (joining only those keeps the hot query small).
TRIAL_UNIT_RELATED = {
    StudyKind.PAIRWISE_REFERENCE: ("comparison__page__image",),  # the reference's size sizes its <img>
    StudyKind.PAIRWISE: ("comparison__page",),
    StudyKind.CHECKLIST: ("predicate__candidate__page",),
    StudyKind.RATING: ("candidate__page",),
}


def trial_current(assignment: Assignment, kind: str = StudyKind.PAIRWISE_REFERENCE) -> Trial | None:
    return (
        Trial.objects.filter(assignment=assignment, vote__isnull=True)
        .select_related(*TRIAL_UNIT_RELATED[StudyKind(kind)])
        .annotate(**VERSION_ANNOTATIONS)
        .order_by("position")
        .first()
    )


def trial_next(*, assignment: Assignment, study: Study | None = None) -> TrialView | None:
    """The assignment's first unanswered trial, marked shown (response time starts now).

    ``study`` is the assignment's study when the caller already has it (saves two queries).
    """
    if assignment.state not in LIVE_STATES:
        raise Forbidden("This assignment is no longer open.")
    if study is None:
        study = assignment.block.study
    trial = trial_current(assignment, study.kind)
    if trial is None:
        return None
    now = timezone.now()
    if trial.shown_at is None:
        # The candidate versions displayed are recorded with the first showing (paper B.5).
        version_a, version_b = displayed_versions(trial)
        Trial.objects.filter(pk=trial.pk, shown_at__isnull=True).update(
            shown_at=now, version_a=version_a, version_b=version_b
        )
        trial.shown_at = now
        trial.version_a, trial.version_b = version_a, version_b
    if assignment.started_at is None:
        Assignment.objects.filter(pk=assignment.pk, started_at__isnull=True).update(started_at=now)
        assignment.started_at = now
    answered, total = assignment_counts(assignment)
    return trial_view_of(trial, study=study, number=answered + 1, answered=answered, total=total)


def trial_view_of(trial: Trial, *, study: Study, number: int, answered: int, total: int) -> TrialView:
    """What the rater is shown for ``trial`` (a fresh idempotency key for its answer)."""
    kind = study.kind
    options = study.options or {}
    page = _trial_page(trial)
    predicate = trial.predicate
    return TrialView(
        trial=trial,
        number=number,
        total=total,
        answered=answered,
        axes=trial_active_axes(trial, study_axes(study)) if kind == StudyKind.PAIRWISE_REFERENCE else [],
        idempotency_key=secrets.token_urlsafe(16),
        kind=kind,
        brief=page.text if kind != StudyKind.PAIRWISE_REFERENCE else "",
        question=predicate.question if predicate else "",
        boxes=tuple(tuple(float(v) for v in box) for box in (predicate.boxes if predicate else [])),
        dimensions=tuple(options.get("dimensions", ())) if kind == StudyKind.RATING else (),
        scale=tuple(range(*_scale_bounds(study))) if kind == StudyKind.RATING else (),
        attention=attention_instruction(trial, kind),
    )


def _scale_bounds(study: Study) -> tuple[int, int]:
    """``range`` bounds of a rating study's scale (inclusive high end)."""
    low, high = (study.options or {}).get("scale") or [1, 5]
    return int(low), int(high) + 1


# --- votes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VoteAnswer:
    """An answer as the rater gave it (display orientation), validated."""

    verdict: str
    confidence: int | None
    axes: dict[str, int]
    rationale: str
    ratings: dict[str, int] | None = None

    def request_hash(self) -> str:
        fields: dict[str, Any] = {
            "verdict": self.verdict, "confidence": self.confidence, "axes": self.axes, "rationale": self.rationale,
        }
        if self.ratings is not None:
            fields["ratings"] = self.ratings
        body = json.dumps(fields, sort_keys=True, ensure_ascii=True)
        return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class VoteResult:
    vote: Vote
    replayed: bool
    finished: bool
    completion_code: str


def _int_field(value: object, *, field: str, allowed: tuple[int, ...]) -> int:
    if isinstance(value, bool):
        raise ValidationFailed("must be an integer", field=field)
    if isinstance(value, str):
        text = value.strip().replace("−", "-").lstrip("+")
        if not re.fullmatch(r"-?\d{1,9}", text):  # bounded: int() of 4,300+ digits raises ValueError
            raise ValidationFailed(f"must be one of {', '.join(map(str, allowed))}", field=field)
        value = int(text)
    if not isinstance(value, int) or value not in allowed:
        raise ValidationFailed(f"must be one of {', '.join(map(str, allowed))}", field=field)
    return value


def vote_answer_clean(
    *, active_axes: list[str], verdict: object, confidence: object, axes: Mapping[str, object], rationale: object
) -> VoteAnswer:
    """Validate an answer: verdict, confidence 1–5, every active axis −2…+2 (none for CANNOT_JUDGE)."""
    if verdict not in PAIRWISE_LABELS:
        raise ValidationFailed("choose A, B, Tie or Cannot judge", field="verdict")
    conf = _int_field(confidence, field="confidence", allowed=(1, 2, 3, 4, 5))
    unknown = sorted(set(axes) - set(active_axes))
    if unknown:
        raise ValidationFailed(f"'{unknown[0]}' is not an active axis of this trial", field="axes")
    scores: dict[str, int] = {}
    if verdict != Label.CANNOT_JUDGE:
        for axis_id in active_axes:
            if axis_id not in axes or axes[axis_id] in (None, ""):
                raise ValidationFailed("score every axis (−2 … +2)", field=f"axis:{axis_id}")
            scores[axis_id] = _int_field(axes[axis_id], field=f"axis:{axis_id}", allowed=AXIS_SCORES)
    text = str(rationale or "").strip()
    if len(text) > RATIONALE_MAX:
        raise ValidationFailed(f"at most {RATIONALE_MAX} characters", field="rationale")
    return VoteAnswer(verdict=str(verdict), confidence=conf, axes=scores, rationale=text)


def kind_answer_clean(
    *, study: Study, verdict: object, confidence: object, ratings: Mapping[str, object] | None, rationale: object
) -> VoteAnswer:
    """Validate a checklist or rating answer (SPEC §11, docs/study-kinds.md)."""
    text = str(rationale or "").strip()
    if len(text) > RATIONALE_MAX:
        raise ValidationFailed(f"at most {RATIONALE_MAX} characters", field="evidence")
    if study.kind == StudyKind.CHECKLIST:
        if verdict not in CHECKLIST_LABELS:
            raise ValidationFailed("choose Yes, No or Unclear", field="verdict")
        if not text:
            raise ValidationFailed("note the evidence you see for your answer", field="evidence")
        return VoteAnswer(verdict=str(verdict), confidence=None, axes={}, rationale=text)
    low, stop = _scale_bounds(study)
    allowed = tuple(range(low, stop))
    given = dict(ratings or {})
    dimensions = list((study.options or {}).get("dimensions", []))
    unknown = sorted(set(given) - set(dimensions))
    if unknown:
        raise ValidationFailed(f"'{unknown[0]}' is not a dimension of this study", field="ratings")
    scores: dict[str, int] = {}
    for dimension in dimensions:
        if given.get(dimension) in (None, ""):
            raise ValidationFailed(f"rate every dimension ({low} … {stop - 1})", field=f"rating:{dimension}")
        scores[dimension] = _int_field(given[dimension], field=f"rating:{dimension}", allowed=allowed)
    return VoteAnswer(verdict="", confidence=None, axes={}, rationale="", ratings=scores)


def canonical_answer(answer: VoteAnswer, *, swapped: bool) -> tuple[str, dict[str, int]]:
    """SPEC §3: a swapped display exchanges A and B and negates every axis score."""
    if not swapped:
        return answer.verdict, dict(answer.axes)
    label = {Label.A: Label.B, Label.B: Label.A}.get(answer.verdict, answer.verdict)  # type: ignore[call-overload]
    return str(label), {k: -v for k, v in answer.axes.items()}


def _finish(assignment: Assignment) -> str:
    """Mark an assignment finished; its completion code is the study's, or a new one."""
    study_code = (
        Study.objects.filter(blocks__assignments__id=assignment.pk).order_by().values_list("completion_code", flat=True).first()
    )
    code = study_code or completion_code_new()
    Assignment.objects.filter(pk=assignment.pk, state=AssignmentState.ACTIVE).update(
        state=AssignmentState.FINISHED, finished_at=timezone.now(), completion_code=code
    )
    return code


def _unanswered_query(assignment_id: int) -> Any:
    """The first two unanswered trials of an assignment (the current one and the next)."""
    return Trial.objects.filter(assignment_id=assignment_id, vote__isnull=True).order_by("position").values("id")[:2]


def vote_trial(trial_token: str) -> Trial | None:
    """A trial with what answering it needs: its study and its unit's page."""
    return (
        Trial.objects.select_related(
            "assignment__block__study", "comparison__page", "candidate__page", "predicate__candidate__page"
        ).filter(token=trial_token).order_by().first()
    )


def answer_for_trial(
    *,
    trial_token: str,
    rater_id: int | None,
    verdict: object,
    confidence: object,
    axes: Mapping[str, object],
    rationale: object,
    idempotency_key: str,
    ratings: Mapping[str, object] | None = None,
    trial: Trial | None = None,
) -> tuple[str, Trial, VoteAnswer]:
    """The checked key, the rater's own trial and the validated answer (before any lock).

    ``trial``: the caller's ``vote_trial(trial_token)`` when it already read it (saves a query).
    """
    key = (idempotency_key or "").strip()
    if not (8 <= len(key) <= 80):
        raise ValidationFailed("missing or malformed idempotency key (reload the page)", field="idempotency_key")
    if trial is None or trial.token != trial_token:
        trial = vote_trial(trial_token)
    if trial is None:
        raise NotFound("no such trial")
    if rater_id is None or trial.assignment.rater_id != rater_id:
        raise Forbidden("this trial is not yours")
    study = trial.assignment.block.study
    if study.kind in (StudyKind.CHECKLIST, StudyKind.RATING):
        answer = kind_answer_clean(
            study=study, verdict=verdict, confidence=confidence, ratings=ratings, rationale=rationale
        )
    else:
        answer = vote_answer_clean(
            active_axes=[a["id"] for a in trial_active_axes(trial, study_axes(study))]
            if study.kind == StudyKind.PAIRWISE_REFERENCE
            else [],
            verdict=verdict, confidence=confidence, axes=axes, rationale=rationale,
        )
    return key, trial, answer


def vote_submit(
    *,
    trial_token: str,
    rater_id: int | None,
    verdict: object,
    confidence: object,
    axes: Mapping[str, object],
    rationale: object,
    idempotency_key: str,
    ratings: Mapping[str, object] | None = None,
    trial: Trial | None = None,
    show_next: bool = False,
) -> VoteResult:
    """Store the answer to a trial canonically, once (SPEC §3, §4).

    Foreign trial → Forbidden (403); answered with another key, not the current trial, or a
    finished assignment → Conflict (409); same key and same body → the stored vote again.
    Submissions to one assignment are serialized by its row lock (only that row: a vote never
    locks the block or the study, so raters do not wait for each other).

    ``trial``: the caller's ``vote_trial(trial_token)`` when it already read it (saves a query).
    ``show_next``: the caller shows the next trial in its response (the htmx answer), so that
    trial's response clock starts in the vote's transaction (one commit instead of two).
    """
    key, trial, answer = answer_for_trial(
        trial_token=trial_token, rater_id=rater_id, verdict=verdict, confidence=confidence, axes=axes,
        rationale=rationale, idempotency_key=idempotency_key, ratings=ratings, trial=trial,
    )
    digest = answer.request_hash()
    with transaction.atomic():
        assignment = Assignment.objects.select_for_update().get(pk=trial.assignment_id)
        unanswered = [r["id"] for r in compiled_rows("unanswered", _unanswered_query, assignment.pk)]
        # The current trial has no vote by definition: only another trial needs the vote looked up.
        current = bool(unanswered) and unanswered[0] == trial.pk
        existing = None if current else Vote.objects.filter(trial_id=trial.pk).order_by().first()
        if existing is not None:
            # A late retry of an answer since revised with Undo is the same submission, not a new one.
            earlier = {h.get("idempotency_key"): h.get("request_hash") for h in existing.history or []}
            if key in earlier and key != existing.idempotency_key:
                if earlier[key] != digest:
                    raise Conflict("this submission key was already used with a different answer")
                return VoteResult(vote=existing, replayed=True,
                                  finished=assignment.state == AssignmentState.FINISHED,
                                  completion_code=assignment.completion_code)
            if existing.idempotency_key != key:
                raise Conflict("this trial was already answered")
            if existing.request_hash != digest:
                raise Conflict("this submission key was already used with a different answer")
            return VoteResult(
                vote=existing, replayed=True,
                finished=assignment.state == AssignmentState.FINISHED,
                completion_code=assignment.completion_code,
            )
        if assignment.state == AssignmentState.FINISHED:
            raise Conflict("this assignment is finished; it cannot be answered again")
        if assignment.state != AssignmentState.ACTIVE:
            raise Forbidden("this assignment is no longer open")
        if not current:
            raise Conflict("this is not the current trial (reload the page)")
        label, scores = canonical_answer(answer, swapped=trial.swapped)
        response_ms = None
        if trial.shown_at is not None:
            response_ms = max(int((timezone.now() - trial.shown_at).total_seconds() * 1000), 0)
        vote = Vote.objects.create(
            trial_id=trial.pk, label=label, confidence=answer.confidence, axis_scores=scores,
            rationale=answer.rationale, response_ms=response_ms, idempotency_key=key, request_hash=digest,
            answers={"ratings": answer.ratings} if answer.ratings is not None else {},
        )
        if trial.version_a is None:  # answered without having been shown through trial_next
            trials_record_versions(trial_ids=[trial.pk])
        finished = len(unanswered) == 1
        code = _finish(assignment) if finished else ""
        if show_next and not finished:
            # Shown now: its clock starts and the candidate versions it displays are recorded (B.5).
            Trial.objects.filter(pk=unanswered[1], shown_at__isnull=True).update(
                shown_at=timezone.now(), **versions_now()
            )
    return VoteResult(vote=vote, replayed=False, finished=finished, completion_code=code)


# --- researcher / admin actions -------------------------------------------------------------------


def assignment_void(*, assignment: Assignment, actor: Any, reason: str = "") -> Assignment:
    """Void an assignment: its votes stay in the database but are excluded from analysis."""
    with transaction.atomic():
        locked = Assignment.objects.select_for_update(of=("self",)).select_related("block__study", "rater").get(pk=assignment.pk)
        if locked.state == AssignmentState.VOIDED:
            raise Conflict("this assignment is already voided")
        if locked.state == AssignmentState.OPEN:
            raise Conflict("an open assignment has no rater yet; nothing to void")
        Assignment.objects.filter(pk=locked.pk).update(
            state=AssignmentState.VOIDED, voided_at=timezone.now(), void_reason=reason.strip()[:300]
        )
        audit_record(
            action="assignment_void", user=actor, study=locked.block.study,
            target=f"{locked.block.name} slot {locked.slot}",
            assignment=locked.pk, rater=locked.rater.external_id if locked.rater else "",
            previous_state=locked.state, reason=reason.strip()[:300],
            votes=Vote.objects.filter(trial__assignment=locked).count(),
        )
    locked.refresh_from_db()
    return locked


def slot_reopen(*, assignment: Assignment, actor: Any) -> Assignment:
    """A new open assignment for a voided assignment's slot, with the same plan copied."""
    with transaction.atomic():
        locked = Assignment.objects.select_for_update(of=("self",)).select_related("block__study").get(pk=assignment.pk)
        if locked.state != AssignmentState.VOIDED:
            raise Conflict("only a voided assignment's slot can be reopened (void it first)")
        if Assignment.objects.filter(block=locked.block, slot=locked.slot).exclude(state=AssignmentState.VOIDED).exists():
            raise Conflict(f"slot {locked.slot} of {locked.block.name} is already open again")
        copy = assignment_plan_copy(source=locked)
        audit_record(action="slot_reopen", user=actor, study=locked.block.study,
                     target=f"{locked.block.name} slot {locked.slot}",
                     voided_assignment=locked.pk, new_assignment=copy.pk)
    return copy


def rater_assign(*, block: Block, user: User, actor: Any) -> Assignment:
    """Give a named rater account an open place in a block (admin)."""
    study = block.study
    rater = account_rater_get_or_create(study=study, user=user)
    with transaction.atomic():
        Rater.objects.select_for_update().get(pk=rater.pk)
        current = rater_assignment(rater)
        if current is not None:
            raise Conflict(f"{user.get_username()} already has an assignment in {current.block.name}")
        for pk in Assignment.objects.filter(block=block, state=AssignmentState.OPEN).order_by("slot").values_list("pk", flat=True):
            if Assignment.objects.filter(pk=pk, state=AssignmentState.OPEN, rater__isnull=True).update(
                rater=rater, state=AssignmentState.ACTIVE, claimed_at=timezone.now()
            ):
                audit_record(action="rater_assign", user=actor, study=study, target=block.name,
                             assignment=pk, rater=rater.external_id)
                return Assignment.objects.get(pk=pk)
    raise Conflict(f"{block.name} has no open place left (reopen a voided slot first)")


@dataclass(frozen=True)
class TrialImage:
    """Who may see a trial's image and which stored file it is (nothing else is looked up)."""

    rater_id: int | None
    study_id: int
    live: bool
    file: str | None


@dataclass(frozen=True)
class TrialImages:
    """Who may see a trial's images and the stored file behind each of its slots."""

    rater_id: int | None
    study_id: int
    live: bool
    slots: tuple[str, ...]  # the trial's slots (an image may still be missing from ``files``)
    files: dict[str, str]


_PAIR_HOLDERS = ("comparison__page", "comparison__candidate_a", "comparison__candidate_b")
_ITEM_HOLDERS = ("candidate", "predicate__candidate")


def _images_query(item: bool) -> Any:
    holders = _ITEM_HOLDERS if item else _PAIR_HOLDERS
    shape = Q(candidate__isnull=False) | Q(predicate__isnull=False) if item else Q(comparison__isnull=False)
    return lambda token: (
        Trial.objects.filter(shape, token=token).order_by()
        .values(
            "swapped", "predicate_id", "assignment__rater_id", "assignment__state",
            "assignment__block__study_id", "assignment__block__study__neutralize_media",
            *(f"{h}__{variant}__file" for h in holders for variant in ("image", "neutralized_image")),
        )[:1]
    )


def trial_images(*, trial_token: str, item: bool) -> TrialImages | None:
    """Every image slot of a trial in one query: ``ref`` / ``left`` / ``right``, or ``item`` (a
    rating or checklist trial, SPEC §11); None when the trial is not of that shape.

    The neutralized variant is served when the study neutralizes media and the variant exists.
    ``left`` is what the rater sees as "A": canonical B when the trial is swapped (SPEC §3).
    """
    rows = compiled_rows(f"trial_images:{item}", _images_query(item), trial_token)
    if not rows:
        return None
    row = values = rows[0]  # keys built from the holders below, not literals

    def file_of(holder: str) -> str | None:
        file = values[f"{holder}__image__file"] or None
        if values["assignment__block__study__neutralize_media"] and values[f"{holder}__neutralized_image__file"]:
            file = values[f"{holder}__neutralized_image__file"]
        return file

    if not item:
        first, second = ("candidate_b", "candidate_a") if row["swapped"] else ("candidate_a", "candidate_b")
        slots = {"ref": file_of("comparison__page"), "left": file_of(f"comparison__{first}"),
                 "right": file_of(f"comparison__{second}")}
    else:
        slots = {"item": file_of("predicate__candidate" if row["predicate_id"] else "candidate")}
    return TrialImages(
        rater_id=row["assignment__rater_id"], study_id=row["assignment__block__study_id"],
        live=row["assignment__state"] in LIVE_STATES, slots=tuple(slots),
        files={k: v for k, v in slots.items() if v},
    )


def trial_image(*, trial_token: str, slot: str) -> TrialImage | None:
    """The stored image behind one slot of a trial (``trial_images`` for the rules)."""
    if slot not in ("ref", "left", "right", "item"):
        return None
    found = trial_images(trial_token=trial_token, item=slot == "item")
    if found is None or slot not in found.slots:
        return None
    return TrialImage(rater_id=found.rater_id, study_id=found.study_id, live=found.live,
                      file=found.files.get(slot))


__all__ = [
    "Forbidden",
    "ParticipationEnded",
    "StudyClosed",
    "StudyFull",
    "VoteResult",
    "account_rater_get_or_create",
    "assignment_void",
    "participant_claim",
    "participant_rater_get_or_create",
    "rater_assign",
    "slot_reopen",
    "trial_next",
    "vote_submit",
]
