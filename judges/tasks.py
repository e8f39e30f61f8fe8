"""Celery tasks of the judges app: thin, take an id, call one service
(docs/protocol.md "Judges and calibration").

``acks_late`` + ``reject_on_worker_lost`` (also set project-wide) return the message to the queue
when a worker dies mid-call; the claim in ``judge_output_execute`` makes a second delivery a no-op
once the call is finished, so nothing is lost and nothing is duplicated. A delivery that finds
the call held by a live lease is retried after the lease; a database error (PostgreSQL restarting)
is retried with backoff; ``judges.sweep_leases`` (Celery beat, every
``ARBITER_JUDGE_SWEEP_SECONDS``) re-queues calls whose lease ran out with no message left, and,
once the queue is empty, calls never claimed whose message a dead worker had taken (prefetched
or delayed), which the broker would return only after its visibility timeout.
The batch poller is in :mod:`judges.batch_tasks` (it uses the run services, which queue these
tasks: kept apart, the imports do not circle).
"""

from __future__ import annotations

import random

from celery import shared_task
from django.conf import settings

from annotation.tasks import broker_queue_empty
from judges.services.calls import (
    DATABASE_ERRORS,
    HELD,
    RELEASED,
    held_seconds,
    judge_output_execute,
    swept_output_ids,
)

# Message priorities on the Redis broker, whose lists kombu serves lowest number first: a run's
# calls queue at RUN_PRIORITY, and a call re-queued because its worker died (its lease ran out)
# at RECOVERED_PRIORITY, ahead of the run's backlog, so it ends within about two leases of the
# loss instead of after every call queued before it (docs/deploy.md, "Losing a node"). On a
# broker without priorities (RabbitMQ without x-max-priority) both are ignored: first in, first out.
RUN_PRIORITY = 6
RECOVERED_PRIORITY = 0

# Stop starting attempts this long before the soft time limit; the call goes back to the queue.
TIME_LIMIT_MARGIN_SECONDS = 30
DATABASE_RETRY_SECONDS = 5.0


@shared_task(name="judges.call_judge", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             max_retries=None)
def call_judge(self, output_id: int) -> str:  # type: ignore[no-untyped-def]
    soft = getattr(settings, "CELERY_TASK_SOFT_TIME_LIMIT", None)
    budget = max(float(soft) - TIME_LIMIT_MARGIN_SECONDS, 60.0) if soft and not self.request.is_eager else None
    try:
        status = judge_output_execute(output_id=int(output_id), budget_seconds=budget)
    except DATABASE_ERRORS as exc:
        if self.request.is_eager:
            raise
        retries = int(self.request.retries or 0)
        countdown = min(DATABASE_RETRY_SECONDS * 2 ** min(retries, 4), 60.0) * random.uniform(0.8, 1.2)
        raise self.retry(exc=exc, countdown=countdown, max_retries=50) from None
    if status == RELEASED:
        call_judge.apply_async((output_id,), countdown=1)
    elif status == HELD and not self.request.is_eager:
        try:
            wait = held_seconds(int(output_id))
        except DATABASE_ERRORS:
            wait = DATABASE_RETRY_SECONDS
        call_judge.apply_async((output_id,), countdown=max(wait, 0.0) + 1.0)
    return status


@shared_task(name="judges.sweep_leases", ignore_result=True)
def sweep_leases() -> int:
    """Re-queue every call whose worker died, in every study: running with an expired lease, and,
    when no message waits in the queue, pending calls no worker claimed for a sweep interval."""
    # Not judges.services.runs: it imports this module (no cycle).
    ids = swept_output_ids(queue_empty=broker_queue_empty())
    for output_id in ids:
        call_judge.apply_async((output_id,), priority=RECOVERED_PRIORITY)
    return len(ids)
