"""Celery tasks of the annotation app: thin, take an id, call one service.

``new_study_run_task`` makes a study from an upload on a worker (rendering its HTML pages), as
``annotation.services.new_study_runs`` describes; queued on commit by :func:`new_study_run_start`,
and again by ``sweep_new_study_runs`` (Celery beat) when its worker died.
``refit_serve_weights`` refits an adaptive study's serve-time weights (docs/protocol.md
"Serve-time choice").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.db import transaction

from annotation.models import NewStudyRun
from annotation.services.new_study_runs import (
    HELD,
    held_seconds,
    new_study_run_create,
    new_study_run_execute,
    new_study_runs_sweep,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


@shared_task(name="annotation.new_study_run", bind=True, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def new_study_run_task(self, run_id: int) -> str:  # type: ignore[no-untyped-def]
    status = new_study_run_execute(run_id=int(run_id))
    if status == HELD and not (self.request.is_eager or self.app.conf.task_always_eager):
        # Another worker holds the run: if it died, its lease runs out and this delivery takes over.
        new_study_run_task.apply_async((run_id,), countdown=held_seconds(int(run_id)) + 1.0)
    return status


def broker_queue_empty(queue: str | None = None) -> bool:
    """True when the broker holds no message waiting in ``queue`` (the task queue by default).

    A queue the broker does not know is empty (Redis drops the list of an empty queue); a broker
    that cannot be asked counts as not empty, so nothing is re-queued on a guess.
    """
    name = queue or new_study_run_task.app.conf.task_default_queue
    try:
        with new_study_run_task.app.connection_for_read() as conn:
            try:
                declared = conn.default_channel.queue_declare(queue=name, passive=True)
            except conn.channel_errors:
                return True
            return int(declared.message_count) == 0
    except Exception:  # the broker is down or refuses: decide nothing
        return False


@shared_task(name="annotation.sweep_new_study_runs", ignore_result=True)
def sweep_new_study_runs() -> int:
    """Queue again every run whose worker died (Celery beat, every ARBITER_NEW_STUDY_LEASE_SECONDS);
    how many were queued."""
    ids = new_study_runs_sweep(queue_empty=broker_queue_empty())
    for run_id in ids:
        new_study_run_task.delay(run_id)
    return len(ids)


def new_study_run_start(
    *, upload: Any, parameters: dict[str, Any], user: AbstractBaseUser | AnonymousUser | None = None
) -> NewStudyRun:
    """Store the upload, create its run and queue the task once the row is committed."""
    with transaction.atomic():
        run = new_study_run_create(upload=upload, parameters=parameters, user=user)
        transaction.on_commit(lambda: new_study_run_task.delay(run.pk))
    return run


@shared_task(name="annotation.refit_serve_weights", ignore_result=True)
def refit_serve_weights(study_id: int) -> int:
    """Refit an adaptive study's serve-time pair weights from its stored votes; the votes fitted."""
    from annotation.services.serve_weights import serve_weights_refit

    weights = serve_weights_refit(study_id=int(study_id))
    return weights.votes if weights is not None else 0
