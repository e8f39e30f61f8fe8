"""Batch mode (issue 14 item 5): ``run_judges --batch`` through the providers' batch APIs.

Same rows, same validation, same status values as live calls; about half the price.

1. ``judge_batch_submit`` creates the run's rows (``judge_run_start``, no dispatch), then in one
   transaction creates a :class:`JudgeBatch` (``preparing``) and claims the unfinished outputs
   for it (``running``, ``claim_token = batch<pk>``, ``batch_id = <pk>``, a lease as long as the
   provider's completion window plus a margin, ``calls + 1``). Only then is the batch built
   (``custom_id`` = output id; the body the live adapter builds, structured output included) and
   submitted; the provider's id is saved (``submitted``).
2. ``judge_batches_poll`` (Celery beat ``judges.poll_batches``; ``run_judges --batch --wait`` in
   the embedded default) reads each submitted batch's state and, once the provider is done,
   downloads the results and stores each one with a write conditional on the batch's claim —
   so polling again, or after a crash half-way through storing, writes nothing twice. Outputs the
   results do not cover (errored, expired, cancelled items) go back to ``pending`` for a live
   run; the batch ends ``stored`` (or ``cancelled`` / ``failed``).
3. ``judge_batches_cancel`` asks the provider to cancel, then stores what it finished.
Crash safety: a crash before the provider id is saved leaves a ``preparing`` batch; polling
releases its outputs (after ``PREPARING_GRACE_SECONDS``) and marks it failed. If the lease of a
batch runs out with nobody polling, the sweeper hands its outputs to live calls.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.errors import ArbiterError, NotFound
from annotation.models import Study
from judges.models import BatchStatus, Judge, JudgeBatch, JudgeOutput, Order, OutputStatus
from judges.providers import ADAPTERS, ProviderRefused, TransportFailure, build_body
from judges.providers.batch import BATCH_CALLS, BatchApi, BatchResult, batch_api
from judges.request_building import (
    RequestNotBuildable,
    endpoint_of,
    load_unit,
    request_contract,
    study_axes,
    unit_study_id,
)
from judges.services.calls import _one_line, _Usage, build_unit_request, store_valid
from judges.services.runs import judge_run_start
from judges.validation import InvalidReply

logger = logging.getLogger(__name__)

BATCH_LEASE = timedelta(hours=26)  # the providers' 24 h completion window, plus a margin
PREPARING_GRACE_SECONDS = 600.0
MAX_BATCH_CALLS = 50_000
MAX_BATCH_BYTES = 190 * 1024 * 1024  # OpenAI takes batch files up to 200 MB; the others less per job


def _api(judge: Judge) -> BatchApi:
    if judge.provider not in BATCH_CALLS:
        raise ArbiterError(f"judge {judge.name}: provider {judge.provider} has no batch API here; run it live")
    return batch_api(endpoint_of(judge), ADAPTERS[judge.provider])


def judge_batch_submit(
    *, study: Study, judge: Judge, set: str | None = None, orders: Sequence[str] = (Order.PRIMARY, Order.SWAPPED),
    repeats: int = 1, retry_failed: bool = False, user: Any = None,
) -> JudgeBatch | None:
    """Claim the run's unfinished calls for one provider batch and submit it; None when nothing is left."""
    if judge.provider not in BATCH_CALLS:
        raise ArbiterError(f"judge {judge.name}: provider {judge.provider} has no batch API here; run it live")
    plan = judge_run_start(study=study, judge=judge, set=set, orders=orders, repeats=repeats,
                           retry_failed=retry_failed, dispatch=False, user=user)
    ids = list(plan.output_ids[:MAX_BATCH_CALLS])
    if not ids:
        return None
    now = timezone.now()
    with transaction.atomic():
        batch = JudgeBatch.objects.create(judge=judge, study=study)
        claimed = JudgeOutput.objects.filter(pk__in=ids, status=OutputStatus.PENDING).update(
            status=OutputStatus.RUNNING, claim_token=batch.claim_token, batch_id=str(batch.pk),
            lease_until=now + BATCH_LEASE, attempts=F("attempts") + 1, calls=F("calls") + 1,
        )
        batch.calls = claimed
        batch.save(update_fields=["calls"])
    rows = list(JudgeOutput.objects.filter(claim_token=batch.claim_token).order_by("pk"))
    endpoint = endpoint_of(judge)
    requests: list[tuple[str, dict[str, Any]]] = []
    size = 0
    for index, output in enumerate(rows):
        output_id, order = output.pk, output.order
        if size > MAX_BATCH_BYTES:  # the rest waits for the next batch (run_judges --batch submits it)
            rest = [r.pk for r in rows[index:]]
            JudgeOutput.objects.filter(pk__in=rest, claim_token=batch.claim_token).update(
                status=OutputStatus.PENDING, claim_token="", batch_id="", lease_until=None,
                attempts=F("attempts") - 1, calls=F("calls") - 1,
            )
            JudgeBatch.objects.filter(pk=batch.pk).update(calls=F("calls") - len(rest))
            break
        unit = load_unit(output)
        try:
            built = build_unit_request(judge=judge, unit=unit, order=order, axes=study_axes(unit_study_id(unit)))
        except RequestNotBuildable as exc:
            _store(batch, output_id, status=OutputStatus.FAILED, error=str(exc))
            continue
        body = build_body(endpoint, built.request, contract=built.contract)
        size += sum(len(i.encoded) for i in built.request.images) + 4096
        requests.append((str(output_id), body))
    try:
        provider_id, file_id = _api(judge).submit(requests)
    except (ProviderRefused, TransportFailure) as exc:
        _abandon(batch, f"submitting failed: {exc}")
        raise ArbiterError(f"judge {judge.name}: the batch could not be submitted: {exc}") from None
    JudgeBatch.objects.filter(pk=batch.pk).update(
        status=BatchStatus.SUBMITTED, provider_batch_id=provider_id[:200], input_file_id=file_id[:200],
        submitted_at=timezone.now(),
    )
    batch.refresh_from_db()
    return batch


def _store(batch: JudgeBatch, output_id: int, **fields: Any) -> bool:
    fields.update(lease_until=None, finished_at=timezone.now())
    return bool(JudgeOutput.objects.filter(pk=output_id, claim_token=batch.claim_token,
                                           status=OutputStatus.RUNNING).update(**fields))


def _release_rest(batch: JudgeBatch, reason: str) -> int:
    """Outputs of the batch without a stored result go back to pending (a live run takes them)."""
    return JudgeOutput.objects.filter(claim_token=batch.claim_token, status=OutputStatus.RUNNING).update(
        status=OutputStatus.PENDING, claim_token="", lease_until=None, batch_id="", error=_one_line(reason),
    )


def _abandon(batch: JudgeBatch, reason: str) -> None:
    _release_rest(batch, f"released: {reason}")
    JudgeBatch.objects.filter(pk=batch.pk).update(status=BatchStatus.FAILED, error=_one_line(reason),
                                                  finished_at=timezone.now())


def _store_result(batch: JudgeBatch, result: BatchResult) -> bool:
    if not result.custom_id.isdigit():
        return False
    output = JudgeOutput.objects.filter(pk=int(result.custom_id), claim_token=batch.claim_token,
                                        status=OutputStatus.RUNNING).select_related("judge").first()
    if output is None:
        return False  # stored already (a second poll), or not ours
    usage = _Usage.of(output)
    if result.reply is None:
        return False  # released with the rest, for a live call
    reply = result.reply
    unit = load_unit(output)
    try:
        # The contract and the prompt's fingerprint, as the submitted request had them (no image is
        # read; a unit whose request can no longer be built is released with the rest).
        asked = request_contract(unit=unit, axes=study_axes(unit_study_id(unit)))
    except RequestNotBuildable:
        return False
    sha = asked.prompt_sha256
    try:
        answer = asked.contract.parse(reply.text, output.order)
    except InvalidReply as exc:
        usage.record("invalid", error=str(exc), reply=reply)
        return _store(batch, output.pk, status=OutputStatus.INVALID, raw=reply.text, error=str(exc),
                      invalid_attempts=output.invalid_attempts + 1, prompt_sha256=sha, **usage.fields())
    usage.record("valid", reply=reply)
    return store_valid(lambda **fields: _store(batch, output.pk, **fields), output.pk, answer, asked.keys,
                       status=OutputStatus.VALID, raw=reply.text, error="", prompt_sha256=sha, **usage.fields())


def judge_batch_poll(batch: JudgeBatch, *, cancelled: bool = False) -> str:
    """Advance one batch: store its results once the provider is done. Returns the batch status."""
    if batch.status == BatchStatus.PREPARING:
        if (timezone.now() - batch.created_at).total_seconds() > PREPARING_GRACE_SECONDS:
            _abandon(batch, "the batch was never submitted (the process stopped while preparing it)")
            return BatchStatus.FAILED
        return batch.status
    if batch.status != BatchStatus.SUBMITTED:
        return batch.status
    api = _api(batch.judge)
    try:
        state = api.state(batch.provider_batch_id)
    except ProviderRefused as exc:
        _abandon(batch, f"batch {batch.provider_batch_id}: {exc}")
        return BatchStatus.FAILED
    JudgeBatch.objects.filter(pk=batch.pk).update(provider_status=state.provider_status[:40])
    if not state.done:
        return batch.status
    stored = 0
    for result in api.results(state):
        stored += _store_result(batch, result)
    released = _release_rest(batch, f"released: batch {batch.provider_batch_id} ended "
                                    f"({state.provider_status}) without a result for this call")
    final = BatchStatus.CANCELLED if cancelled or "cancel" in state.provider_status.lower() else BatchStatus.STORED
    JudgeBatch.objects.filter(pk=batch.pk).update(
        status=final, stored=F("stored") + stored, finished_at=timezone.now(),
        error=_one_line(state.error) if state.error else (f"{released} calls released for live runs" if released else ""),
    )
    return final


def judge_batches_poll(*, study: Study | None = None, judge: Judge | None = None) -> dict[str, int]:
    """Poll every open batch (optionally of one study / judge); counts of the statuses they are in."""
    batches = JudgeBatch.objects.filter(status__in=[BatchStatus.PREPARING, BatchStatus.SUBMITTED]).select_related("judge")
    if study is not None:
        batches = batches.filter(study=study)
    if judge is not None:
        batches = batches.filter(judge=judge)
    counts: dict[str, int] = {}
    for batch in batches:
        try:
            status = judge_batch_poll(batch)
        except TransportFailure as exc:  # the provider is unreachable now: poll again later
            logger.warning("batch %s: %s", batch.pk, exc)
            status = batch.status
        counts[status] = counts.get(status, 0) + 1
    return counts


def judge_batches_cancel(*, study: Study, judge: Judge, batch_id: str | None = None) -> list[JudgeBatch]:
    """Cancel the judge's open batches in the study (or the one named by id or provider id)."""
    batches = JudgeBatch.objects.filter(study=study, judge=judge, status=BatchStatus.SUBMITTED)
    if batch_id:
        named = batches.filter(provider_batch_id=batch_id) | (
            batches.filter(pk=int(batch_id)) if batch_id.isdigit() else batches.none()
        )
        if not named.exists():
            raise NotFound(f"no open batch {batch_id!r} of judge {judge.name} in study {study.slug}")
        batches = named
    cancelled = []
    for batch in batches.select_related("judge"):
        try:
            _api(judge).cancel(batch.provider_batch_id)
        except ProviderRefused as exc:
            _abandon(batch, f"cancel: {exc}")
        judge_batch_poll(batch, cancelled=True)
        batch.refresh_from_db()
        cancelled.append(batch)
    return cancelled


def judge_batches_open(*, study: Study, judge: Judge) -> int:
    return JudgeBatch.objects.filter(study=study, judge=judge,
                                     status__in=[BatchStatus.PREPARING, BatchStatus.SUBMITTED]).count()
