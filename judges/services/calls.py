"""Executing one judge call (docs/protocol.md "Judges and calibration"): claim, build, send, validate, store —
exactly once.

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
and ``judge_outputs_requeue`` / ``judge_outputs_sweep`` re-queue rows whose lease ran out
(``run_judges`` again, ``--wait``, or the periodic ``judges.sweep_leases`` task).

Every exception ends in a known state, never ``running``: a database error (``OperationalError``,
``InterfaceError``) releases the claim when it can and is re-raised for the task to retry; a
Celery soft time limit releases the claim (``"released"``: queued again); anything else is stored
``failed`` with its type and message. A message that finds the row held by a live lease gets
``"held"`` (the task retries after the lease, :func:`held_seconds`). Every HTTP request is counted
in ``calls`` *before* it is sent, in the same conditional UPDATE that renews the lease, and every
attempt's outcome and usage is appended to ``attempt_log``: calls made = ``sum(calls)``.

Retries inside one claim: an invalid reply is asked again up to ``judge.max_invalid_retries``
times — with the rejected reply and the validation error sent back as a repair turn — then stored
``invalid`` with its reason; transport failures are retried with exponential
backoff and full jitter (Retry-After honoured, capped) up to ``judge.max_transport_retries``
times, counted in ``transport_failures``, then stored ``failed``. A 413 also halves the image
byte budget for the next attempt, and so does a 400 saying an image is too large. A 429 pauses
the judge for every worker until the provider's reset (``Limiter.pause``); an auth failure or
exhausted quota stops the judge (``Limiter.stop``): the output goes back to ``pending`` with the
reason, and no worker calls the judge again until ``run_judges`` is run again.
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.media import MediaUnavailable
from annotation.metrics import JUDGE_ATTEMPTS, JUDGE_CALLS
from judges.limits import Limiter, Limits, limiter_for
from judges.models import Judge, JudgeChecklistAnswer, JudgeOutput, OutputStatus, Provider
from judges.providers import (
    Endpoint,
    JudgeImage,
    JudgeRequest,
    ParameterRefused,
    ProviderRefused,
    Reply,
    RunStopped,
    TransportFailure,
    Turn,
    UnusableReply,
    build_body,
    call,
    encode_body,
)
from judges.providers.base import ADAPTATIONS
from judges.replies import ParsedReply, ReplyContract
from judges.request_building import (
    RequestNotBuildable,
    build_judge_request,
    endpoint_of,
    load_unit,
    study_axes,
    unit_study_id,
)
from judges.validation import InvalidReply

logger = logging.getLogger(__name__)

LEASE_MARGIN_SECONDS = 5.0
DATABASE_ERRORS = (OperationalError, InterfaceError)
MAX_LOGGED_ATTEMPTS = 100
REPAIR_REPLY_CHARS = 4000


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def attempt_seconds(judge: Judge) -> float:
    """The lease one HTTP attempt gets: twice its whole-exchange deadline, plus a margin.

    The transport ends every exchange at ``timeout`` (connect, headers and body under one
    deadline), so the lease, renewed before each request, outlasts the attempt by at least
    ``timeout``: no other worker can claim the call while its request can still be answered.
    """
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
        key=f"{judge.pk}-{int(judge.created_at.timestamp() * 1_000_000)}",
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
    # The claim's UPDATE already counted the first request (one write fewer per call); the first
    # write that is not that request gives the count back.
    counted: bool = False

    def rows(self) -> Any:
        return JudgeOutput.objects.filter(pk=self.output_id, claim_token=self.token, status=OutputStatus.RUNNING)

    def renew(self, seconds: float) -> None:
        lease_until = timezone.now() + timedelta(seconds=seconds)
        if not self.rows().update(lease_until=lease_until):
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
        if self.counted:
            fields["calls"] = F("calls") - 1
            self.counted = False
        # A provider's text may carry NUL, which PostgreSQL text and jsonb cannot hold: stored escaped.
        fields = {k: _without_nul(v) for k, v in fields.items()}
        return bool(self.rows().update(**fields))

    def count_call(self, seconds: float) -> None:
        """Count the HTTP request about to be sent and cover it with the lease (one UPDATE).

        The first request of a claim was counted by the claim itself, under a fresh lease; when
        building the request took longer than LEASE_MARGIN_SECONDS, the lease is renewed here.
        Either way a request is sent only with at least 2 × timeout of lease left, and the
        exchange is abandoned at its deadline (timeout, ``judges.providers.transport``): the
        attempt is over before anyone else may claim the call (docs/decisions/0042-judge-call-lease.md).
        """
        if self.counted:
            self.counted = False
            if time.monotonic() - self.renewed_at > LEASE_MARGIN_SECONDS:
                self.renew(seconds)
            return
        lease_until = timezone.now() + timedelta(seconds=seconds)
        if not self.rows().update(calls=F("calls") + 1, lease_until=lease_until):
            raise LostClaim(self.output_id)
        self.renewed_at = time.monotonic()


def _without_nul(value: Any) -> Any:
    """``value`` with every NUL in its text (nested lists and dicts included) written as ``\\u0000``."""
    if isinstance(value, str):
        return value.replace("\x00", "\\u0000")
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    return value


def _claimable(now: Any) -> Q:
    return Q(status=OutputStatus.PENDING) | Q(status=OutputStatus.RUNNING, lease_until__lt=now)


def judge_output_claim(*, output_id: int, lease_seconds: float, max_attempts: int, count_call: bool = False) -> str | None:
    """Claim a pending (or abandoned) output with one conditional UPDATE; its claim token or None.

    ``count_call``: the same UPDATE counts the request the claimer is about to send.
    """
    now = timezone.now()
    token = secrets.token_hex(16)
    extra = {"calls": F("calls") + 1} if count_call else {}
    claimed = JudgeOutput.objects.filter(_claimable(now), pk=output_id, attempts__lt=max_attempts).update(
        status=OutputStatus.RUNNING,
        claim_token=token,
        lease_until=now + timedelta(seconds=lease_seconds),
        attempts=F("attempts") + 1,
        **extra,
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
    if done:
        JUDGE_CALLS.labels(status=str(fields.get("status", ""))).inc()
    if not done:
        logger.warning("judge output %s: lease lost before the result was stored; the new holder decides", claim.output_id)
    return done


RELEASED = "released"
HELD = "held"
STOPPED = "stopped"


def held_seconds(output_id: int) -> float:
    """How long another holder's lease on this output still runs (0 when it is not held)."""
    lease = (
        JudgeOutput.objects.filter(pk=output_id, status=OutputStatus.RUNNING)
        .values_list("lease_until", flat=True)
        .first()
    )
    return max(0.0, (lease - timezone.now()).total_seconds()) if lease else 0.0


def _soft_time_limit() -> tuple[type[BaseException], ...]:
    try:
        from celery.exceptions import SoftTimeLimitExceeded
    except ImportError:  # pragma: no cover - celery is a dependency
        return ()
    return (SoftTimeLimitExceeded,)


def _quietly(claim: _Claim, **fields: Any) -> None:
    """A last write for a claim after an error; a broken connection is dropped and tried once more.

    When the database is still away, nothing more can be done here: the lease runs out and the
    sweeper (or the task's retry) takes the output again.
    """
    for _ in range(2):
        try:
            claim.update(**fields)
            return
        except DATABASE_ERRORS:
            connection.close()
            close_old_connections()
        except Exception:
            logger.exception("judge output %s: could not record the end of the claim", claim.output_id)
            return


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def judge_output_execute(*, output_id: int, budget_seconds: float | None = None) -> str:
    """Run one judge call to its final status. Returns the status written, or one of
    ``"skipped"`` (finished already, or taken over), ``"held"`` (another worker's lease is live:
    try again after :func:`held_seconds`), ``"released"``, ``"stopped"``.

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
        output_id=output_id, lease_seconds=attempt_seconds(judge), max_attempts=int(judge.max_attempts),
        count_call=True,
    )
    if token is None:
        return HELD if held_seconds(output_id) > 0 else "skipped"
    claim = _Claim(output_id, token, counted=True)
    deadline = time.monotonic() + budget_seconds if budget_seconds else None
    try:
        return str(_run_claimed(claim, output, judge, deadline))
    except LostClaim:
        return "skipped"
    except DATABASE_ERRORS:
        connection.close()
        _quietly(claim, status=OutputStatus.PENDING, lease_until=None, claim_token="")
        raise
    except _soft_time_limit():
        _quietly(claim, status=OutputStatus.PENDING, lease_until=None, claim_token="",
                 error="released: the task reached its time limit")
        return RELEASED
    except Exception as exc:
        logger.exception("judge output %s: unexpected error", output_id)
        _quietly(claim, status=OutputStatus.FAILED, lease_until=None, finished_at=timezone.now(),
                 error=f"internal error ({type(exc).__name__}): {_one_line(str(exc))}")
        return OutputStatus.FAILED
    except BaseException:
        _quietly(claim, status=OutputStatus.PENDING, lease_until=None, claim_token="")
        raise


def _release(claim: _Claim, **fields: Any) -> str:
    if not claim.update(status=OutputStatus.PENDING, lease_until=None, claim_token="", **fields):
        raise LostClaim(claim.output_id)
    JUDGE_CALLS.labels(status="released").inc()
    return RELEASED


@dataclass
class _Usage:
    """What the attempts of this call cost and said, carried across claims through the row."""

    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    latency_ms: int | None
    log: list[dict[str, Any]]
    served_model: str = ""
    request_id: str = ""
    fingerprint: str = ""

    @classmethod
    def of(cls, output: JudgeOutput) -> _Usage:
        return cls(output.input_tokens, output.output_tokens, output.cached_tokens, output.latency_ms,
                   list(output.attempt_log or []), output.served_model, output.request_id, output.fingerprint)

    @staticmethod
    def _add(total: int | None, value: int | None) -> int | None:
        return total if value is None else (total or 0) + value

    def record(self, outcome: str, *, error: str = "", reply: Reply | None = None, status: int | None = None) -> None:
        JUDGE_ATTEMPTS.labels(outcome=outcome).inc()
        entry: dict[str, Any] = {"at": timezone.now().isoformat(timespec="milliseconds"), "outcome": outcome}
        if error:
            entry["error"] = _one_line(error)
        if status is not None:
            entry["http_status"] = status
        if reply is not None:
            self.input_tokens = self._add(self.input_tokens, reply.input_tokens)
            self.output_tokens = self._add(self.output_tokens, reply.output_tokens)
            self.cached_tokens = self._add(self.cached_tokens, reply.cached_tokens)
            self.latency_ms = self._add(self.latency_ms, reply.latency_ms)
            self.served_model = reply.model or self.served_model
            self.request_id = reply.request_id or self.request_id
            self.fingerprint = reply.fingerprint or self.fingerprint
            entry.update({k: v for k, v in reply.usage().items() if v is not None})
            for key, value in (("model", reply.model), ("request_id", reply.request_id),
                               ("latency_ms", reply.latency_ms), ("finish_reason", reply.finish_reason)):
                if value:
                    entry[key] = value
        self.log.append(entry)
        del self.log[:-MAX_LOGGED_ATTEMPTS]

    def fields(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cached_tokens": self.cached_tokens,
            "latency_ms": self.latency_ms, "attempt_log": self.log, "served_model": self.served_model[:200],
            "request_id": self.request_id[:200], "fingerprint": self.fingerprint[:200],
        }


def _wait_for_pause(claim: _Claim, judge: Judge, limiter: Limiter, limits: Limits, deadline: float | None) -> bool:
    """Sleep while a 429 pause of this judge lasts (renewing the lease); False when the budget cannot wait."""
    while (left := limiter.paused_for(limits)) > 0:
        if deadline is not None and time.monotonic() + left + attempt_seconds(judge) > deadline:
            return False
        time.sleep(min(left, 2.0))
        claim.renew(attempt_seconds(judge) + min(limiter.paused_for(limits), 60.0))
    return True


def _empty_reason(reply: Reply, exc: InvalidReply) -> str:
    if reply.finish_reason == "length" and not reply.text.strip():
        return "the reply is empty: the model used up max_tokens before answering (raise add_judge --max-tokens)"
    return str(exc)


def _without(endpoint: Endpoint, request: JudgeRequest, contract: ReplyContract, param: str) -> Endpoint | None:
    """The endpoint that no longer sends ``param`` (``ADAPTATIONS``), or None when that changes nothing sent."""
    adaptation = ADAPTATIONS.get(param)
    if adaptation is None:
        return None
    from dataclasses import replace

    adapted = replace(endpoint, **adaptation[0])
    bare = JudgeRequest(request.prompt, tuple(JudgeImage(i.label, i.mime, b"") for i in request.images))
    if build_body(adapted, bare, contract=contract) == build_body(endpoint, bare, contract=contract):
        return None
    return adapted


def _refusal_stops(judge: Judge, exc: ParameterRefused) -> str:
    """Why a refused parameter stops the judge's run (the provider's words and the fix)."""
    if not exc.required and not judge.adapt_parameters and exc.param in ADAPTATIONS:
        return f"{exc}, or add_judge {judge.name} --update --adapt-parameters to let a run drop it"
    if not exc.required and exc.param in ADAPTATIONS:
        return f"{exc} (dropping it did not help)"
    return str(exc)


# The errors of one attempt (RunStopped and ParameterRefused are ProviderRefused).
SEND_ERRORS = (ProviderRefused, UnusableReply, TransportFailure)


@dataclass
class _CallState:
    """One claimed call across its attempts. Budgets are per call, across crashes: the counters
    start from the row."""

    output: JudgeOutput
    judge: Judge
    unit: Any  # the comparison or the rendering the call is about
    axes: Any
    endpoint: Endpoint
    limits: Limits
    limiter: Limiter
    lease: float
    invalid: int
    transport: int
    usage: _Usage
    byte_scale: float = 1.0
    built: Any = None
    repairs: list[dict[str, Any]] = field(default_factory=list)
    # Each invalid reply and its validation error, sent back with the next attempt.
    turns: list[Turn] = field(default_factory=list)
    # Parameters the model refused and this call dropped (--adapt-parameters): param → what the
    # provider said; recorded on the judge when a reply comes back without them.
    dropped: dict[str, str] = field(default_factory=dict)
    tried: bool = False  # the first attempt of a claim always runs, so a release always makes progress

    @classmethod
    def of(cls, output: JudgeOutput, judge: Judge) -> _CallState:
        unit = load_unit(output)
        return cls(
            output=output, judge=judge, unit=unit, axes=study_axes(unit_study_id(unit)),
            endpoint=endpoint_of(judge), limits=judge_limits(judge), limiter=limiter_for(),
            lease=attempt_seconds(judge), invalid=output.invalid_attempts, transport=output.transport_failures,
            usage=_Usage.of(output),
        )


def _run_claimed(claim: _Claim, output: JudgeOutput, judge: Judge, deadline: float | None) -> str:
    """The attempts of one claimed call until a final status or a release: each readied under the
    claim and sent, then its reply classified, or retried or adapted after a refusal or a failure."""
    if judge.provider == Provider.IMPORTED:
        _finish(claim, status=OutputStatus.FAILED, error=f"judge {judge.name} is imported-only and cannot be called")
        return OutputStatus.FAILED
    state = _CallState.of(output, judge)
    while True:
        status = _ready(claim, state, deadline)
        if status is not None:
            return status
        try:
            reply = _send(claim, state)
        except SEND_ERRORS as exc:
            status = _retry_or_adapt(claim, state, exc, deadline)
        else:
            status = _classify(claim, state, reply)
        if status is not None:
            return status


def _ready(claim: _Claim, state: _CallState, deadline: float | None) -> str | None:
    """Build the request (again after a 413) and wait for the judge's limiter: None when the attempt
    may be sent, else the status the claim ends with (failed, released, stopped)."""
    judge = state.judge
    if state.built is None:
        try:
            state.built = build_unit_request(judge=judge, unit=state.unit, order=state.output.order,
                                             axes=state.axes, byte_scale=state.byte_scale)
        except RequestNotBuildable as exc:
            _finish(claim, status=OutputStatus.FAILED, error=str(exc), **state.usage.fields())
            return OutputStatus.FAILED
        except MediaUnavailable as exc:  # the bucket is away: the call waits, it does not fail
            return _release(claim, error=f"released: {exc}", **state.usage.fields())
        state.repairs = state.built.image_repairs
    if state.tried and deadline is not None and time.monotonic() + attempt_seconds(judge) > deadline:
        return _release(claim)
    state.tried = True
    stop = state.limiter.stopped(state.limits)
    if stop:
        return _stopped(claim, stop)
    if not _wait_for_pause(claim, judge, state.limiter, state.limits, deadline):
        return _release(claim, error="released: the judge is paused by the provider's rate limit")
    return None


def _send(claim: _Claim, state: _CallState) -> Reply:
    """One request, in a slot of the judge's limiter, counted on the row and covered by the lease."""
    built = state.built
    body = built.body if not state.turns and not state.dropped else encode_body(
        state.endpoint, built.request, contract=built.contract, turns=state.turns)
    with state.limiter.slot(state.limits, heartbeat=lambda: claim.renew(state.lease)):
        claim.count_call(state.lease)
        return call(state.endpoint, built.request, body=body)


def _retry_or_adapt(claim: _Claim, state: _CallState, exc: Exception, deadline: float | None) -> str | None:
    """After a refused or failed attempt: None to try again (a parameter dropped, a backoff slept),
    else the status the claim ends with."""
    judge, usage = state.judge, state.usage
    if isinstance(exc, RunStopped):
        state.limiter.stop(state.limits, str(exc))
        usage.record("stopped", error=str(exc))
        return _stopped(claim, str(exc), **usage.fields())
    if isinstance(exc, ParameterRefused):
        # A refusal is a failed try (counted like any refused request); the parameter is
        # dropped once per call (each parameter), else every other call would meet it too.
        state.transport += 1
        usage.record("refused", error=str(exc), status=exc.status)
        adapted = None
        if judge.adapt_parameters and not exc.required and exc.param not in state.dropped:
            adapted = _without(state.endpoint, state.built.request, state.built.contract, exc.param)
        if adapted is None:
            reason = _refusal_stops(judge, exc)
            state.limiter.stop(state.limits, reason)
            return _stopped(claim, reason, transport_failures=state.transport, **usage.fields())
        state.endpoint = adapted
        state.dropped[exc.param] = exc.said
        if not claim.update(transport_failures=state.transport, error=f"retrying without '{exc.param}': {exc.said}",
                            **usage.fields()):
            raise LostClaim(claim.output_id) from None
        return None
    if isinstance(exc, ProviderRefused):
        state.transport += 1
        usage.record("refused", error=str(exc))
        _finish(claim, status=OutputStatus.FAILED, error=f"provider refused: {exc}", transport_failures=state.transport,
                image_repairs=state.repairs, **usage.fields())
        return OutputStatus.FAILED
    if isinstance(exc, UnusableReply):
        state.invalid += 1
        usage.record("invalid", error=str(exc))
        if state.invalid > judge.max_invalid_retries:
            _finish(claim, status=OutputStatus.INVALID, raw=exc.raw, error=str(exc), invalid_attempts=state.invalid,
                    transport_failures=state.transport, image_repairs=state.repairs,
                    prompt_sha256=state.built.prompt_sha256, **usage.fields())
            return OutputStatus.INVALID
        if not claim.update(invalid_attempts=state.invalid, error=f"retrying after invalid reply: {exc}",
                            **usage.fields()):
            raise LostClaim(claim.output_id) from None
        return None
    assert isinstance(exc, TransportFailure)
    state.transport += 1
    usage.record("transport", error=str(exc), status=exc.status)
    if state.transport > judge.max_transport_retries:
        _finish(
            claim,
            status=OutputStatus.FAILED,
            error=f"transport failure after {state.transport} tries: {exc}",
            transport_failures=state.transport,
            image_repairs=state.repairs,
            **usage.fields(),
        )
        return OutputStatus.FAILED
    if exc.status == 413:
        state.byte_scale /= 2
        state.built = None
    delay = backoff_seconds(state.transport, exc.retry_after)
    if exc.status == 429:
        # Every worker holds its calls of this judge until the provider's reset.
        state.limiter.pause(state.limits, exc.retry_after if exc.retry_after is not None else delay)
        delay = 0.0 if exc.retry_after is not None else delay
    if deadline is not None and time.monotonic() + delay + attempt_seconds(judge) > deadline:
        return _release(claim, transport_failures=state.transport, error=f"retrying after transport failure: {exc}",
                        **usage.fields())
    # One write: the counter, the reason, and a lease that covers the sleep and the next try.
    if not claim.update(
        transport_failures=state.transport,
        error=f"retrying after transport failure: {exc}",
        lease_until=timezone.now() + timedelta(seconds=delay + state.lease),
        **usage.fields(),
    ):
        raise LostClaim(claim.output_id) from None
    time.sleep(delay)
    claim.renewed_at = time.monotonic()
    return None


def _classify(claim: _Claim, state: _CallState, reply: Reply) -> str | None:
    """A reply came back: valid (stored), or invalid (stored after the last retry, else None to send
    it back with the validation error as a repair turn)."""
    judge, usage, built = state.judge, state.usage, state.built
    if state.dropped:
        # The provider answered without them: the judge learns it (once), later calls send without.
        from judges.services.judges import judge_learn_parameters

        judge_learn_parameters(judge_id=judge.pk, refused=state.dropped)
        state.dropped = {}
    text = reply.text
    try:
        answer = built.contract.parse(text, state.output.order)
    except InvalidReply as exc:
        state.invalid += 1
        reason = _empty_reason(reply, exc)
        usage.record("invalid", error=reason, reply=reply)
        if state.invalid > judge.max_invalid_retries:
            _finish(claim, status=OutputStatus.INVALID, raw=text, error=reason, invalid_attempts=state.invalid,
                    transport_failures=state.transport, image_repairs=state.repairs,
                    prompt_sha256=built.prompt_sha256, **usage.fields())
            return OutputStatus.INVALID
        state.turns.append(Turn(reply=text[:REPAIR_REPLY_CHARS], error=reason))
        if not claim.update(invalid_attempts=state.invalid, raw=text, error=f"retrying after invalid reply: {reason}",
                            **usage.fields()):
            raise LostClaim(claim.output_id) from None
        return None
    usage.record("valid", reply=reply)
    store_valid(
        lambda **fields: _finish(claim, **fields), claim.output_id, answer, built.keys,
        status=OutputStatus.VALID,
        raw=text,
        error="",
        invalid_attempts=state.invalid,
        transport_failures=state.transport,
        image_repairs=state.repairs,
        prompt_sha256=built.prompt_sha256,
        **usage.fields(),
    )
    return OutputStatus.VALID


def build_unit_request(*, judge: Judge, unit: Any, order: str, axes: Any = None, byte_scale: float = 1.0) -> Any:
    """``build_judge_request`` for the comparison or the rendering ``unit``."""
    from annotation.models import Comparison

    if isinstance(unit, Comparison):
        return build_judge_request(judge=judge, comparison=unit, order=order, axes=axes, byte_scale=byte_scale)
    return build_judge_request(judge=judge, candidate=unit, order=order, axes=axes, byte_scale=byte_scale)


def store_valid(write: Any, output_id: int, answer: ParsedReply, keys: Sequence[int], **fields: Any) -> bool:
    """Store a valid reply whole: the output's row (``write``, conditional on its claim) and, for a
    checklist, one row per question, in one transaction; when the claim was lost nothing is kept."""
    with transaction.atomic():
        if not write(**fields, **answer.fields):
            return False
        if answer.checklist:
            # Rows of an earlier version of this call (a crash after the commit cannot leave any,
            # but an operator's reset could): replaced, never mixed.
            JudgeChecklistAnswer.objects.filter(output_id=output_id).delete()
            JudgeChecklistAnswer.objects.bulk_create(
                JudgeChecklistAnswer(output_id=output_id, predicate_id=key, answer=item.answer,
                                     evidence=item.evidence[:4000], passed=item.passed)
                for key, item in zip(keys, answer.checklist, strict=True)
            )
    return True


def _stopped(claim: _Claim, reason: str, **fields: Any) -> str:
    """The judge cannot be called (bad key, no quota): the output waits, pending, with the reason."""
    _release(claim, error=f"stopped: {reason}", **fields)
    return STOPPED


def expired_output_ids() -> list[int]:
    """Every call, in every study, whose worker died (running, lease expired): the sweeper's list."""
    return list(
        JudgeOutput.objects.filter(status=OutputStatus.RUNNING, lease_until__lt=timezone.now()).values_list("pk", flat=True)
    )


def swept_output_ids(*, queue_empty: bool) -> list[int]:
    """What the periodic sweep re-queues: every call whose lease ran out, and, when no message waits
    in the broker's queue (``queue_empty``), the calls left unclaimed for a sweep interval."""
    ids = expired_output_ids()
    if queue_empty:
        known = set(ids)
        waited = float(getattr(settings, "ARBITER_JUDGE_SWEEP_SECONDS", 60.0))
        ids += [i for i in unclaimed_output_ids(older_than_seconds=waited) if i not in known]
    return ids


def unclaimed_output_ids(*, older_than_seconds: float) -> list[int]:
    """Calls queued more than ``older_than_seconds`` ago that no worker has claimed: pending, with
    no error (a stopped judge's calls and a provider batch's leftovers wait for ``run_judges``),
    in no provider batch.

    Read when the broker's queue is empty: then no message of theirs is waiting, and the one they
    had went to a worker that died before claiming it (a prefetched or delayed message, which the
    broker returns only after its visibility timeout). Re-queueing one that a live worker still
    holds costs one message: the claim makes the second delivery a no-op.
    """
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return list(
        JudgeOutput.objects.filter(status=OutputStatus.PENDING, error="", batch_id="", created_at__lt=cutoff)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
