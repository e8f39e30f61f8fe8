"""Uploads made into studies by a Celery worker (docs/new-study.md "Upload page and API").

Rendering an upload's HTML pages takes seconds per page: too long for a web request once a study
has hundreds of them. With a broker configured the upload page and ``POST /api/studies/new/`` call
:func:`new_study_run_create`: the ``.zip`` goes to the media storage (the bucket on a cluster, so
any worker can read it) and a :class:`~annotation.models.NewStudyRun` row is queued. The task
(``annotation.tasks.new_study_run_task``) calls :func:`new_study_run_execute`: it claims the row
with a conditional update (a second delivery does nothing), makes the study with the same
:func:`~annotation.services.new_study.new_study_from_upload` as the request would, and writes its
progress (the stage, pages rendered of all) to the row, which the run's page polls. Without a
broker (``CELERY_TASK_ALWAYS_EAGER``) the request does it all, as before.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db.models import Q
from django.utils import timezone

from annotation.errors import ArbiterError, ValidationFailed
from annotation.models import NewStudyRun, new_token
from annotation.progress import progress_reported

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

PROGRESS_EVERY_S = 0.5  # at most this often a running upload writes its progress


def runs_on_workers() -> bool:
    """Whether uploads are made into studies by the Celery workers (a broker is configured)."""
    return not bool(getattr(settings, "CELERY_TASK_ALWAYS_EAGER", True))


def new_study_run_create(
    *, upload: Any, parameters: dict[str, Any], user: AbstractBaseUser | AnonymousUser | None = None
) -> NewStudyRun:
    """Store the upload in the media storage and queue its run (the caller queues the task on commit)."""
    limit = int(settings.ARBITER_MAX_UPLOAD_BYTES)
    name = (upload.name or "upload.zip").rsplit("/", 1)[-1][:200]
    if upload.size is not None and upload.size > limit:
        raise ValidationFailed(
            f"the upload is {upload.size:,} bytes, over the {limit:,}-byte limit", where=name
        )
    token = new_token()
    stored = default_storage.save(f"new-study/{token}.zip", upload)
    return NewStudyRun.objects.create(
        token=token,
        archive=stored,
        archive_name=name,
        parameters=parameters,
        created_by=user if getattr(user, "is_authenticated", False) else None,  # type: ignore[misc]
    )


def new_study_run_fail(run_id: int, message: str) -> None:
    """Mark a run failed with a one-line reason (unless it already ended) and drop its upload."""
    NewStudyRun.objects.filter(
        pk=run_id, status__in=[NewStudyRun.Status.QUEUED, NewStudyRun.Status.RUNNING]
    ).update(
        status=NewStudyRun.Status.FAILED, error=" ".join(message.split())[:2000], finished_at=timezone.now()
    )
    _drop_upload(run_id)


def new_study_run_execute(*, run_id: int) -> str:
    """Claim a queued run and make its study (or its dry-run report), writing progress as it goes."""
    from annotation.services.new_study.uploads import new_study_from_upload

    # A run whose worker died may be taken over once the task time limit has passed.
    stale = timezone.now() - timedelta(seconds=int(getattr(settings, "CELERY_TASK_TIME_LIMIT", 900)))
    claimed = (
        NewStudyRun.objects.filter(pk=run_id)
        .filter(
            Q(status=NewStudyRun.Status.QUEUED) | Q(status=NewStudyRun.Status.RUNNING, started_at__lt=stale)
        )
        .update(status=NewStudyRun.Status.RUNNING, started_at=timezone.now(), error="")
    )
    if not claimed:
        return "not queued"
    run = NewStudyRun.objects.select_related("created_by").get(pk=run_id)
    values = run.parameters
    last = 0.0

    def report(stage: str, done: int | None, total: int | None) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_EVERY_S and not (total and done == total):
            return
        last = now
        NewStudyRun.objects.filter(pk=run_id, status=NewStudyRun.Status.RUNNING).update(
            stage=stage[:200], done=done, total=total
        )

    try:
        with default_storage.open(run.archive, "rb") as handle, progress_reported(report):
            plan, study = new_study_from_upload(
                upload=File(handle, name=run.archive_name),
                kind=str(values.get("kind") or "pairwise_reference"),
                manifest=str(values.get("manifest") or ""),
                reference=str(values.get("reference") or ""),
                match=values.get("match") or None,
                options=dict(values.get("options") or {}),
                comparisons=str(values.get("comparisons") or "all"),
                dry_run=bool(values.get("dry_run")),
                user=run.created_by,
            )
    except ArbiterError as exc:
        new_study_run_fail(run_id, str(exc))
        return "failed"
    NewStudyRun.objects.filter(pk=run_id).update(
        status=NewStudyRun.Status.DONE, study=study, report=plan.report(), finished_at=timezone.now()
    )
    _drop_upload(run_id)
    return "done"


def _drop_upload(run_id: int) -> None:
    archive = NewStudyRun.objects.filter(pk=run_id).values_list("archive", flat=True).first()
    if archive:
        default_storage.delete(archive)
