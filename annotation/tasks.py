"""Celery tasks of the annotation app: thin, take an id, call one service.

``new_study_run_task`` makes a study from an upload on a worker (rendering its HTML pages), as
``annotation.services.new_study_runs`` describes; queued on commit by :func:`new_study_run_start`.
``refit_serve_weights`` refits an adaptive study's serve-time weights (docs/protocol.md
"Serve-time choice").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery import shared_task
from django.db import transaction

from annotation.models import NewStudyRun
from annotation.services.new_study_runs import new_study_run_create, new_study_run_execute, new_study_run_fail

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


@shared_task(name="annotation.new_study_run", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def new_study_run_task(run_id: int) -> str:
    try:
        return new_study_run_execute(run_id=int(run_id))
    except Exception as exc:
        new_study_run_fail(int(run_id), f"internal error ({exc.__class__.__name__})")
        raise


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
