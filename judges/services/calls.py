"""Executing one judge call (SPEC §6): claim, build, send, validate, store — exactly once.

Crash safety (a worker killed mid-call loses nothing and duplicates nothing):
- the row exists before any task runs (``judge_run_start``), unique on (judge, comparison, order,
  repeat), so there is never a second output for a call;
- a task *claims* its row with one conditional UPDATE (``status = pending`` or ``running`` with an
  expired lease, and ``attempts < judge.max_attempts``), which also bumps ``attempts`` and writes a
  fresh ``claim_token`` and ``lease_until``;
- the holder renews its lease before each HTTP attempt and while waiting for a limiter slot; every
  write it makes is conditional on its ``claim_token``, so a worker that lost its lease can never
  overwrite the result of the one that took over;
- a row whose claims hit the attempt cap is stored as ``failed``.
Celery adds ``acks_late`` + ``reject_on_worker_lost`` (the message comes back when a worker dies),
and ``judge_outputs_requeue`` re-queues rows whose lease ran out (``run_judges`` again or
``--wait``).

Retries inside one claim: an invalid reply is asked again up to ``judge.max_invalid_retries``
times, then stored ``invalid`` with its reason; transport failures are retried with exponential
backoff and full jitter (Retry-After honoured, capped) up to ``judge.max_transport_retries``
times, counted in ``transport_failures``, then stored ``failed``. A 413 also halves the image
byte budget for the next attempt.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from judges.limits import Limits, limiter_for
from judges.models import Judge, JudgeOutput, OutputStatus, Provider
from judges.providers import ProviderRefused, TransportFailure, send
from judges.request_building import (
    RequestNotBuildable,
    build_judge_request,
    endpoint_of,
    load_comparison,
    study_axes,
)
from judges.validation import InvalidReply, canonical_answer

logger = logging.getLogger(__name__)

LEASE_MARGIN_SECONDS = 5.0


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def attempt_seconds(judge: Judge) -> float:
    """An upper bound for one HTTP attempt: connect + write + read timeouts, plus a margin."""
    return 2 * float(judge.timeout_seconds) + LEASE_MARGIN_SECONDS


def backoff_seconds(failures: int, retry_after: float | None = None) -> float:
    """Exponential backoff with full jitter; a server's Retry-After is a floor (capped)."""
    base = _setting("ARBITER_JUDGE_BACKOFF_BASE", 1.0)
    cap = _setting("ARBITER_JUDGE_BACKOFF_CAP", 60.0)
    delay = random.uniform(0, min(cap, base * 2 ** max(failures - 1, 0)))
    if retry_after is not None:
        delay = max(delay, min(retry_after, _setting("ARBITER_JUDGE_RETRY_AFTER_CAP", 300.0)))
    return delay


def judge_limits(judge: Judge) -> Limits:
    return Limits(
        key=f"{judge.pk}-{int(judge.created_at.timestamp())}",
        concurrency=max(int(judge.concurrency), 1),
        rate_per_second=judge.rate_per_second or None,
        hold_seconds=attempt_seconds(judge),
    )


class LostClaim(Exception):
    """Another worker holds this output now (our lease ran out): stop without writing."""


@dataclass
class _Claim:
    output_id: int
    token: str
    renewed_at: float = field(default_factory=time.monotonic)

    def rows(self) -> Any:
        return JudgeOutput.objects.filter(pk=self.output_id, claim_token=self.token, status=OutputStatus.RUNNING)

    def renew(self, seconds: float) -> None:
        if not self.rows().update(lease_until=timezone.now() + timedelta(seconds=seconds)):
            raise LostClaim(self.output_id)
        self.renewed_at = time.monotonic()

    def ensure(self, judge: Judge) -> None:
        """Make sure the lease covers one more attempt (2 × timeout); renew only when it may not.

        The lease is ``attempt_seconds`` long, so a lease renewed less than LEASE_MARGIN_SECONDS ago
        still has 2 × timeout left: the common path writes nothing here.
        """
        if time.monotonic() - self.renewed_at > LEASE_MARGIN_SECONDS:
            self.renew(attempt_seconds(judge))

    def update(self, **fields: Any) -> bool:
        return bool(self.rows().update(**fields))


def _claimable(now: Any) -> Q:
    return Q(status=OutputStatus.PENDING) | Q(status=OutputStatus.RUNNING, lease_until__lt=now)


def judge_output_claim(*, output_id: int, lease_seconds: float, max_attempts: int) -> str | None:
    """Claim a pending (or abandoned) output with one conditional UPDATE; its claim token or None."""
    now = timezone.now()
    token = secrets.token_hex(16)
    claimed = (
        JudgeOutput.objects.filter(_claimable(now), pk=output_id, attempts__lt=max_attempts)
        .update(
            status=OutputStatus.RUNNING,
            claim_token=token,
            lease_until=now + timedelta(seconds=lease_seconds),
            attempts=F("attempts") + 1,
        )
    )
    if claimed:
        return token
    # Claimed too often (workers keep dying on it): give up on it for good.
    JudgeOutput.objects.filter(_claimable(now), pk=output_id, attempts__gte=max_attempts).update(
        status=OutputStatus.FAILED,
        error=f"gave up after {max_attempts} attempts (the worker stopped mid-call each time)",
        lease_until=None,
        claim_token="",
        finished_at=now,
    )
    return None


def _finish(claim: _Claim, **fields: Any) -> bool:
    fields.update(lease_until=None, finished_at=timezone.now())
    done = claim.update(**fields)
    if not done:
        logger.warning("judge output %s: lease lost before the result was stored; the new holder decides", claim.output_id)
    return done


RELEASED = "released"


def judge_output_execute(*, output_id: int, budget_seconds: float | None = None) -> str:
    """Run one judge call to its final status. Returns the status written, or ``"skipped"``.

    ``budget_seconds`` (a Celery task passes its soft time limit, minus a margin): when the next
    attempt might not finish within it, the claim is released (the row goes back to ``pending``
    with its counters kept) and ``"released"`` is returned so the caller can queue it again,
    instead of the task being killed mid-call by its hard time limit.
    """
    try:
        output = JudgeOutput.objects.select_related("judge").get(pk=output_id)
    except JudgeOutput.DoesNotExist:
        return "skipped"
    judge = output.judge
    token = judge_output_claim(
        output_id=output_id, lease_seconds=attempt_seconds(judge), max_attempts=int(judge.max_attempts)
    )
    if token is None:
        return "skipped"
    claim = _Claim(output_id, token)
    deadline = time.monotonic() + budget_seconds if budget_seconds else None
    try:
        return str(_run_claimed(claim, output, judge, deadline))
    except LostClaim:
        return "skipped"


def _release(claim: _Claim) -> str:
    claim.update(status=OutputStatus.PENDING, lease_until=None, claim_token="")
    return RELEASED


def _run_claimed(claim: _Claim, output: JudgeOutput, judge: Judge, deadline: float | None) -> str:
    if judge.provider == Provider.IMPORTED:
        _finish(claim, status=OutputStatus.FAILED, error=f"judge {judge.name} is imported-only and cannot be called")
        return OutputStatus.FAILED
    comparison = load_comparison(output.comparison_id)
    axes = study_axes(comparison.study_id)
    endpoint = endpoint_of(judge)
    limits = judge_limits(judge)
    limiter = limiter_for()
    lease = attempt_seconds(judge)
    byte_scale = 1.0
    invalid = output.invalid_attempts
    transport = output.transport_failures
    # Budgets are per call, across crashes: counters come from the row.
    built = None
    repairs: list[dict[str, Any]] = []
    tried = False  # the first attempt of a claim always runs, so a release always makes progress
    while True:
        if built is None:
            try:
                built = build_judge_request(
                    judge=judge, comparison=comparison, order=output.order, axes=axes, byte_scale=byte_scale
                )
            except RequestNotBuildable as exc:
                _finish(claim, status=OutputStatus.FAILED, error=str(exc))
                return OutputStatus.FAILED
            repairs = built.image_repairs
        if tried and deadline is not None and time.monotonic() + attempt_seconds(judge) > deadline:
            return _release(claim)
        tried = True
        try:
            with limiter.slot(limits, heartbeat=lambda: claim.renew(lease)):
                claim.ensure(judge)
                text = send(endpoint, built.body)
        except ProviderRefused as exc:
            transport += 1
            _finish(claim, status=OutputStatus.FAILED, error=f"provider refused: {exc}", transport_failures=transport,
                    image_repairs=repairs)
            return OutputStatus.FAILED
        except TransportFailure as exc:
            transport += 1
            if transport > judge.max_transport_retries:
                _finish(
                    claim,
                    status=OutputStatus.FAILED,
                    error=f"transport failure after {transport} tries: {exc}",
                    transport_failures=transport,
                    image_repairs=repairs,
                )
                return OutputStatus.FAILED
            if exc.status == 413:
                byte_scale /= 2
                built = None
            delay = backoff_seconds(transport, exc.retry_after)
            if deadline is not None and time.monotonic() + delay + attempt_seconds(judge) > deadline:
                claim.update(transport_failures=transport, error=f"retrying after transport failure: {exc}")
                return _release(claim)
            # One write: the counter, the reason, and a lease that covers the sleep and the next try.
            if not claim.update(
                transport_failures=transport,
                error=f"retrying after transport failure: {exc}",
                lease_until=timezone.now() + timedelta(seconds=delay + lease),
            ):
                raise LostClaim(claim.output_id) from None
            time.sleep(delay)
            claim.renewed_at = time.monotonic()
            continue
        try:
            answer = canonical_answer(text, active_axes=built.active_axes, order=output.order)
        except InvalidReply as exc:
            invalid += 1
            if invalid > judge.max_invalid_retries:
                _finish(claim, status=OutputStatus.INVALID, raw=text, error=str(exc), invalid_attempts=invalid,
                        transport_failures=transport, image_repairs=repairs, prompt_sha256=built.prompt_sha256)
                return OutputStatus.INVALID
            claim.update(invalid_attempts=invalid, raw=text, error=f"retrying after invalid reply: {exc}")
            continue
        _finish(
            claim,
            status=OutputStatus.VALID,
            raw=text,
            error="",
            winner=answer.winner,
            confidence=answer.confidence,
            axis_scores=answer.axes_list(),
            reason=answer.reason,
            invalid_attempts=invalid,
            transport_failures=transport,
            image_repairs=repairs,
            prompt_sha256=built.prompt_sha256,
        )
        return OutputStatus.VALID
