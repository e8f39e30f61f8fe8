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
    WAITING,
    held_seconds,
    new_study_run_create,
    new_study_run_execute,
    new_study_run_from_dry_run,
    new_study_runs_sweep,
)
from annotation.task_queue import task_queue, task_queue_later, task_runs_in_background

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


WAITING_RETRY_S = 1.0  # a run waiting for its researcher's share asks again this often


@shared_task(name="annotation.new_study_run", bind=True, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def new_study_run_task(self, run_id: int) -> str:  # type: ignore[no-untyped-def]
    status = new_study_run_execute(run_id=int(run_id))
    if status not in (HELD, WAITING):
        return status
    # Another worker holds the run (if it died, its lease runs out and this delivery takes over),
    # or the researcher's share of runs is in use: try again later, leaving the slot to others.
    delay = held_seconds(int(run_id)) + 1.0 if status == HELD else WAITING_RETRY_S
    if not (self.request.is_eager or self.app.conf.task_always_eager):
        new_study_run_task.apply_async((run_id,), countdown=delay)
    elif task_runs_in_background(new_study_run_task):
        task_queue_later(new_study_run_task, delay, run_id)
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
    """Store the upload, create its run and queue it (:func:`new_study_run_queue`)."""
    with transaction.atomic():
        run = new_study_run_create(upload=upload, parameters=parameters, user=user)
    new_study_run_queue(run)
    run.refresh_from_db()
    return run


def new_study_run_start_from_dry_run(*, dry_run: NewStudyRun) -> NewStudyRun:
    """The real run of a finished dry run (its upload and renders taken over), queued."""
    run = new_study_run_from_dry_run(dry_run=dry_run)
    new_study_run_queue(run)
    run.refresh_from_db()
    return run


def new_study_run_queue(run: NewStudyRun) -> None:
    """Queue a run once its row is committed: on the broker, or without one in the web process's
    background queue. Only with ``ARBITER_TASKS_IN_BACKGROUND=0`` and no broker (the tests' eager
    mode) does it run at once, in the caller's thread."""
    if new_study_run_task.app.conf.task_always_eager and not task_runs_in_background(new_study_run_task):
        new_study_run_task.apply(args=[run.pk])
        return
    run_id = run.pk
    transaction.on_commit(lambda: task_queue(new_study_run_task, run_id), robust=True)


@shared_task(name="annotation.refit_serve_weights", ignore_result=True)
def refit_serve_weights(study_id: int) -> int:
    """Refit an adaptive study's serve-time pair weights from its stored votes; the votes fitted."""
    from annotation.services.serve_weights import serve_weights_refit

    weights = serve_weights_refit(study_id=int(study_id))
    return weights.votes if weights is not None else 0


@shared_task(name="annotation.objective_scores", ignore_result=True, acks_late=True, reject_on_worker_lost=True)
def objective_scores_task(study_id: int) -> int:
    """Score a study's candidates against their pages' ground truth (the missing and stale ones:
    docs/protocol.md "Objective scores beside the rankings"); the number scored now."""
    from annotation.models import Study
    from annotation.services.objective_scores import objective_scores_refresh

    study = Study.objects.filter(pk=int(study_id)).first()
    return 0 if study is None else objective_scores_refresh(study=study).scored
