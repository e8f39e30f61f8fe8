"""Raters taking part: identities, claims, study links, voids and reopened slots
(docs/protocol.md "Who does what", "Planning the human study").

A rater is a study-link participant, a rater account or an imported id. Automatic assignment gives
the block furthest below its rater target. Claims never exceed a target: a block's targets are its
planned open assignments, and a participant only ever takes one with a conditional ``UPDATE …
WHERE state = 'open'`` (checking the row count), inside a transaction that holds the rater's row
lock so two arrivals of the same participant cannot take two slots.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.models import Assignment, AssignmentState, Block, Rater, Study, Vote
from annotation.services.adaptive_allocation import adaptive_block_extend
from annotation.services.audit import audit_record
from annotation.services.comprehension import ComprehensionRequired, comprehension_required
from annotation.services.scheduling import assignment_plan_copy

PARTICIPANT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:+-]{0,99}$")
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
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
    """Block ids, the one furthest below its rater target first (docs/protocol.md "Planning the human study"
    automatic assignment)."""
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
    # Adaptive allocation (docs/protocol.md "Adaptive allocation and stopping"): every place taken,
    # so the next block is built from the current fit, unless the target is reached.
    if adaptive_block_extend(study=study) is not None:
        return participant_claim(study=study, rater=rater)
    raise StudyFull("All places in this study are taken. Thank you for your interest.")


def study_link_url(*, study: Study, origin: str = "") -> str:
    """The participant URL of a study (docs/protocol.md "Commands" ``study_link``).

    The origin is ``ARBITER_PUBLIC_URL`` when set; otherwise the serving origin the caller knows
    (a web page passes its request's), else ``ARBITER_SERVE_ORIGIN`` (``make run`` sets it to its
    host and port), else http://127.0.0.1:8000.
    """
    from django.urls import reverse

    public = str(getattr(settings, "ARBITER_PUBLIC_URL", "") or os.environ.get("ARBITER_PUBLIC_URL", ""))
    base = (public or origin or os.environ.get("ARBITER_SERVE_ORIGIN", "") or DEFAULT_ORIGIN).rstrip("/")
    return f"{base}{reverse('rater:link', args=[study.link_token])}"


DEFAULT_ORIGIN = "http://127.0.0.1:8000"


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
