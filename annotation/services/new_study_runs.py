"""Uploads made into studies by a Celery worker (docs/new-study.md "Upload page and API").

Rendering an upload's HTML pages takes seconds per page: too long for a web request once a study
has hundreds of them. With a broker configured the upload page and ``POST /api/studies/new/`` call
:func:`new_study_run_create`: the ``.zip`` goes to the media storage (the bucket on a cluster, so
any worker can read it) and a :class:`~annotation.models.NewStudyRun` row is queued. The task
(``annotation.tasks.new_study_run_task``) calls :func:`new_study_run_execute`: it claims the row
with a conditional update, makes the study with the same
:func:`~annotation.services.new_study.uploads.new_study_from_upload` as the request would, and writes its
progress (the stage, pages rendered of all) to the row, which the run's page polls. Without a
broker (``CELERY_TASK_ALWAYS_EAGER``) the request does it all, as before.

A worker that dies mid-run (SIGKILL, out of memory, its node lost) must not leave the run
``running`` for ever, and a second delivery must not make a second study. So the claim is a lease,
as a judge call's is (``judges.services.calls``): the claim writes a fresh ``claim`` token and
``lease_until``, a thread of the holder renews the lease every third of
``ARBITER_NEW_STUDY_LEASE_SECONDS`` while it works, and every write of the holder but the last is
conditional on its token. A delivery that finds the lease live answers ``"held"`` (the task tries
again once it would have run out); one that finds it run out takes the run over and renders again,
at most :data:`MAX_ATTEMPTS` times in all. The study is made all or nothing under its unique slug,
so two holders cannot both make it: whichever made it records it. When the broker keeps the dead
worker's message (Redis returns it only after its visibility timeout), the periodic
:func:`new_study_runs_sweep` (task ``annotation.sweep_new_study_runs``) re-queues the run.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import DatabaseError, connection
from django.db.models import F, Q
from django.utils import timezone

from annotation.errors import ArbiterError, ValidationFailed
from annotation.models import NewStudyRun, new_token
from annotation.progress import progress_reported

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

PROGRESS_EVERY_S = 0.5  # at most this often a running upload writes its progress
MAX_ATTEMPTS = 3  # claims of one run (the first and two take-overs after a dead worker)
HELD = "held"

logger = logging.getLogger(__name__)


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


def new_study_run_fail(run_id: int, message: str, *, claim: str | None = None) -> bool:
    """Mark a run failed with a one-line reason (unless it already ended, or, given the holder's
    ``claim``, another worker took it over) and drop its upload; whether it was marked."""
    runs = NewStudyRun.objects.filter(pk=run_id, status__in=[NewStudyRun.Status.QUEUED, NewStudyRun.Status.RUNNING])
    if claim is not None:
        runs = runs.filter(claim=claim)
    failed = runs.update(
        status=NewStudyRun.Status.FAILED,
        error=" ".join(message.split())[:2000],
        finished_at=timezone.now(),
        lease_until=None,
    )
    if failed:
        _drop_upload(run_id)
    return bool(failed)


def lease_seconds() -> float:
    return float(getattr(settings, "ARBITER_NEW_STUDY_LEASE_SECONDS", 60.0))


def new_study_run_claim(*, run_id: int) -> str | None:
    """Take a queued run, or a running one whose lease ran out (its worker died), with a fresh
    claim token and lease; the token, or None when the run is not to be taken."""
    now = timezone.now()
    claim = new_token()
    claimed = (
        NewStudyRun.objects.filter(pk=run_id, attempts__lt=MAX_ATTEMPTS)
        .filter(Q(status=NewStudyRun.Status.QUEUED) | Q(status=NewStudyRun.Status.RUNNING, lease_until__lt=now))
        .update(
            status=NewStudyRun.Status.RUNNING,
            claim=claim,
            lease_until=now + timedelta(seconds=lease_seconds()),
            attempts=F("attempts") + 1,
            started_at=now,
            error="",
        )
    )
    return claim if claimed else None


def held_seconds(run_id: int) -> float:
    """How long the holder's lease on this run still runs (0 when it is not held)."""
    lease = (
        NewStudyRun.objects.filter(pk=run_id, status=NewStudyRun.Status.RUNNING)
        .values_list("lease_until", flat=True)
        .first()
    )
    return max(0.0, (lease - timezone.now()).total_seconds()) if lease else 0.0


class _Lease:
    """The holder's lease on a run, renewed by a thread every third of it while the work goes on.

    Rendering a page or writing a large study can take longer than a lease with no progress
    reported, so the renewal does not wait for progress; it stops when the holder does, and a
    SIGKILLed worker's thread dies with it, so its lease runs out. A renewal the database refuses
    is tried again at the next beat.
    """

    def __init__(self, run_id: int, claim: str) -> None:
        self.run_id = run_id
        self.claim = claim
        self.seconds = lease_seconds()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._renew, name=f"new-study-run-{run_id}-lease", daemon=True)

    def rows(self) -> Any:
        return NewStudyRun.objects.filter(pk=self.run_id, claim=self.claim, status=NewStudyRun.Status.RUNNING)

    def _renew(self) -> None:
        try:
            while not self.stopped.wait(self.seconds / 3):
                try:
                    self.rows().update(lease_until=timezone.now() + timedelta(seconds=self.seconds))
                except DatabaseError:
                    logger.warning("new study run %s: the lease could not be renewed", self.run_id)
        finally:
            connection.close()  # this thread's own connection

    def __enter__(self) -> _Lease:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def new_study_run_execute(*, run_id: int) -> str:
    """Claim a run and make its study (or its dry-run report), writing progress as it goes.

    ``"done"``, ``"failed"``, ``"held"`` (another worker's lease is live: try again after
    :func:`held_seconds`) or ``"not queued"`` (ended already, or gone).
    """
    from annotation.services.new_study.uploads import new_study_from_upload

    claim = new_study_run_claim(run_id=run_id)
    if claim is None:
        if held_seconds(run_id) > 0:
            return HELD
        _fail_if_exhausted(run_id)
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
        NewStudyRun.objects.filter(pk=run_id, claim=claim, status=NewStudyRun.Status.RUNNING).update(
            stage=stage[:200], done=done, total=total
        )

    try:
        with _Lease(run_id, claim), default_storage.open(run.archive, "rb") as handle, progress_reported(report):
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
        new_study_run_fail(run_id, str(exc), claim=claim)
        return "failed"
    except Exception as exc:
        new_study_run_fail(run_id, f"internal error ({exc.__class__.__name__})", claim=claim)
        raise
    # Whoever made the study records it, holder or not: the slug is unique, so no one else made one.
    NewStudyRun.objects.filter(pk=run_id).exclude(status=NewStudyRun.Status.DONE).update(
        status=NewStudyRun.Status.DONE,
        study=study,
        report=plan.report(),
        finished_at=timezone.now(),
        lease_until=None,
    )
    _drop_upload(run_id)
    return "done"


def _fail_if_exhausted(run_id: int) -> bool:
    """A run whose worker died on each of its MAX_ATTEMPTS claims fails (a page that kills the
    renderer, say, is not rendered for ever)."""
    return NewStudyRun.objects.filter(
        pk=run_id, status=NewStudyRun.Status.RUNNING, lease_until__lt=timezone.now(), attempts__gte=MAX_ATTEMPTS
    ).exists() and new_study_run_fail(
        run_id,
        f"the worker making this study stopped before it was done, {MAX_ATTEMPTS} times (killed, or out of "
        "memory rendering a page?); check the upload's HTML pages and upload it again",
    )


def new_study_runs_sweep(*, queue_empty: bool) -> list[int]:
    """The runs to queue again because their worker died: running with an expired lease, and, when
    no message waits in the broker's queue (``queue_empty``), queued runs no worker claimed for a
    lease. Runs out of attempts are failed instead."""
    now = timezone.now()
    expired = list(
        NewStudyRun.objects.filter(status=NewStudyRun.Status.RUNNING, lease_until__lt=now)
        .order_by("pk")
        .values_list("pk", "attempts")
    )
    ids = []
    for pk, attempts in expired:
        if attempts < MAX_ATTEMPTS:
            ids.append(pk)
        else:
            _fail_if_exhausted(pk)
    if queue_empty:
        waited = now - timedelta(seconds=lease_seconds())
        ids += NewStudyRun.objects.filter(status=NewStudyRun.Status.QUEUED, created_at__lt=waited).order_by(
            "pk"
        ).values_list("pk", flat=True)
    return ids


def _drop_upload(run_id: int) -> None:
    archive = NewStudyRun.objects.filter(pk=run_id).values_list("archive", flat=True).first()
    if archive:
        default_storage.delete(archive)
