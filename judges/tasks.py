"""Celery tasks of the judges app: thin, take an id, call one service (SPEC §6).

``acks_late`` + ``reject_on_worker_lost`` (also set project-wide) return the message to the queue
when a worker dies mid-call; the claim in ``judge_output_execute`` makes a second delivery a no-op
once the call is finished, so nothing is lost and nothing is duplicated.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from judges.services.calls import RELEASED, judge_output_execute

# Stop starting attempts this long before the soft time limit; the call goes back to the queue.
TIME_LIMIT_MARGIN_SECONDS = 30


@shared_task(name="judges.call_judge", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def call_judge(self, output_id: int) -> str:  # type: ignore[no-untyped-def]
    soft = getattr(settings, "CELERY_TASK_SOFT_TIME_LIMIT", None)
    budget = max(float(soft) - TIME_LIMIT_MARGIN_SECONDS, 60.0) if soft and not self.request.is_eager else None
    status = judge_output_execute(output_id=int(output_id), budget_seconds=budget)
    if status == RELEASED:
        call_judge.apply_async((output_id,), countdown=1)
    return status
