"""Uploads made into studies in the background (docs/new-study.md "Upload page and API").

Rendering an upload's HTML pages takes seconds per page: never inside a web request. The upload
page and ``POST /api/studies/new/`` call :func:`new_study_run_create`: the ``.zip`` goes to the
media storage (the bucket on a cluster, so any worker can read it) and a
:class:`~annotation.models.NewStudyRun` row is queued. With a broker a Celery worker runs the task
(``annotation.tasks.new_study_run_task``); without one, the web process's background queue
(``annotation.task_queue``: a thread, one task computing at a time per process). The task calls
:func:`new_study_run_execute`: it claims the row with a conditional update, makes the study with
the same :func:`~annotation.services.new_study.uploads.new_study_from_upload` as the command's
service, and writes its progress to the row (the stage, pages rendered of all, per system the
pages rendered and failed and why), which the run's page polls. Each researcher has at most
``ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER`` runs rendering at once; the others wait, queued.

A dry run keeps its upload and its renders (``ARBITER_NEW_STUDY_RENDERS/<token>``); the real run
started from its result (:func:`new_study_run_from_dry_run`) takes both over, so nothing is
uploaded again and a page is rendered again only if its bytes or settings changed (none are:
``render_folder`` keeps a render made from the same bytes, settings and browser). What a dry run
kept and no real run took is removed after ``ARBITER_NEW_STUDY_KEEP_HOURS``. A run is cancelled
from its page (:func:`new_study_run_cancel`): a queued one at once, a running one at its next
progress write (after the page being rendered).

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
import shutil
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.models import NewStudyRun, new_token
from annotation.progress import Detail, progress_reported

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

PROGRESS_EVERY_S = 0.5  # at most this often a running upload writes its progress
MAX_ATTEMPTS = 3  # claims of one run (the first and two take-overs after a dead worker)
HELD = "held"
WAITING = "waiting"  # the researcher's other runs use their share: queued until one ends
ACTIVE = (NewStudyRun.Status.QUEUED, NewStudyRun.Status.RUNNING)


class RunStopped(Exception):
    """The run was cancelled, or taken over by another worker, while this holder worked."""

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
    new_study_runs_expire()
    token = new_token()
    stored = default_storage.save(f"new-study/{token}.zip", upload)
    return NewStudyRun.objects.create(
        token=token,
        archive=stored,
        archive_name=name,
        parameters=parameters,
        created_by=user if getattr(user, "is_authenticated", False) else None,  # type: ignore[misc]
    )


def new_study_run_from_dry_run(*, dry_run: NewStudyRun) -> NewStudyRun:
    """The real run of a finished dry run: its upload, its parameters and its renders, taken over
    (the dry run keeps its report). Once only: a second click finds them taken."""
    if dry_run.status != NewStudyRun.Status.DONE or not dry_run.parameters.get("dry_run") or dry_run.study_id:
        raise Conflict("only a finished dry run can be made into the study")
    with transaction.atomic():
        taken = NewStudyRun.objects.filter(pk=dry_run.pk).exclude(archive="").update(archive="", renders="")
        if not taken:
            raise Conflict(
                "this dry run's upload was already made into a study, or removed after "
                f"{float(settings.ARBITER_NEW_STUDY_KEEP_HOURS):g} hours; upload it again"
            )
        return NewStudyRun.objects.create(
            archive=dry_run.archive,
            archive_name=dry_run.archive_name,
            parameters={**dry_run.parameters, "dry_run": False, "from_dry_run": dry_run.token},
            renders=dry_run.renders,
            created_by=dry_run.created_by,
        )


def new_study_run_cancel(*, run: NewStudyRun) -> bool:
    """Cancel a queued or running run; whether it was. A queued run's files go at once; a running
    one stops at its holder's next progress write, and the holder removes them."""
    cancelled = NewStudyRun.objects.filter(pk=run.pk, status__in=ACTIVE).update(
        status=NewStudyRun.Status.CANCELLED, error="cancelled", finished_at=timezone.now(), lease_until=None
    )
    if cancelled and run.status == NewStudyRun.Status.QUEUED:
        _drop_upload(run.pk)
    return bool(cancelled)


def renders_folder(run: NewStudyRun) -> Path | None:
    """Where the run keeps its renders (None before it renders)."""
    return Path(settings.ARBITER_NEW_STUDY_RENDERS) / run.renders if run.renders else None


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


def share_used(run_id: int) -> bool:
    """Whether the run's researcher already has as many runs rendering (a live lease) as
    ``ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER`` allows. Checked before the claim: two workers
    claiming at the same instant may both pass (the limit is a fair share, not a lock)."""
    user_id = NewStudyRun.objects.filter(pk=run_id).values_list("created_by_id", flat=True).first()
    if user_id is None:
        return False
    running = (
        NewStudyRun.objects.filter(created_by_id=user_id, status=NewStudyRun.Status.RUNNING, lease_until__gte=timezone.now())
        .exclude(pk=run_id)
        .count()
    )
    return running >= max(1, int(settings.ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER))


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

    ``"done"``, ``"failed"``, ``"cancelled"``, ``"held"`` (another worker's lease is live: try
    again after :func:`held_seconds`), ``"waiting"`` (the researcher's share of runs is in use: try
    again shortly) or ``"not queued"`` (ended already, or gone).
    """
    from annotation.services.new_study.uploads import new_study_from_upload

    if share_used(run_id) and NewStudyRun.objects.filter(pk=run_id, status=NewStudyRun.Status.QUEUED).exists():
        return WAITING
    claim = new_study_run_claim(run_id=run_id)
    if claim is None:
        if held_seconds(run_id) > 0:
            return HELD
        _fail_if_exhausted(run_id)
        return "not queued"
    run = NewStudyRun.objects.select_related("created_by").get(pk=run_id)
    if not run.renders:
        run.renders = run.token
        NewStudyRun.objects.filter(pk=run_id).update(renders=run.renders)
    values = run.parameters
    dry_run = bool(values.get("dry_run"))
    last = 0.0

    def holder() -> Any:
        return NewStudyRun.objects.filter(pk=run_id, claim=claim, status=NewStudyRun.Status.RUNNING)

    def report(stage: str, done: int | None, total: int | None) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_EVERY_S and not (total and done == total):
            return
        last = now
        if not holder().update(stage=stage[:200], done=done, total=total):
            raise RunStopped

    def detail(progress: Detail) -> None:
        if not holder().update(progress=progress):
            raise RunStopped

    try:
        with _Lease(run_id, claim), default_storage.open(run.archive, "rb") as handle, progress_reported(report, detail):
            plan, study = new_study_from_upload(
                upload=File(handle, name=run.archive_name),
                kind=str(values.get("kind") or "pairwise_reference"),
                manifest=str(values.get("manifest") or ""),
                reference=str(values.get("reference") or ""),
                truth=str(values.get("truth") or ""),
                match=values.get("match") or None,
                options=dict(values.get("options") or {}),
                comparisons=str(values.get("comparisons") or "all"),
                dry_run=dry_run,
                user=run.created_by,
                render_cache=renders_folder(run),
            )
    except RunStopped:
        if NewStudyRun.objects.filter(pk=run_id, status=NewStudyRun.Status.CANCELLED).exists():
            _drop_upload(run_id)
            return "cancelled"
        return "not queued"  # another worker took the run over
    except ArbiterError as exc:
        new_study_run_fail(run_id, str(exc), claim=claim)
        return "failed"
    except Exception as exc:
        new_study_run_fail(run_id, f"internal error ({exc.__class__.__name__})", claim=claim)
        raise
    # Whoever made the study records it, holder or not: the slug is unique, so no one else made one.
    # A dry run cancelled at its last moment stays cancelled.
    ended = [NewStudyRun.Status.DONE] if study is not None else [NewStudyRun.Status.DONE, NewStudyRun.Status.CANCELLED]
    progress = NewStudyRun.objects.filter(pk=run_id).values_list("progress", flat=True).first() or {}
    NewStudyRun.objects.filter(pk=run_id).exclude(status__in=ended).update(
        status=NewStudyRun.Status.DONE,
        study=study,
        progress={**progress, "counts": plan.counts()},
        report=plan.report(),
        finished_at=timezone.now(),
        lease_until=None,
    )
    if study is not None or not NewStudyRun.objects.filter(pk=run_id, status=NewStudyRun.Status.DONE).exists():
        _drop_upload(run_id)  # a dry run keeps its upload and renders for the real run
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


def new_study_runs_expire() -> int:
    """Remove what finished dry runs kept for a real run that never came, after
    ``ARBITER_NEW_STUDY_KEEP_HOURS``; how many runs' files were removed."""
    before = timezone.now() - timedelta(hours=float(settings.ARBITER_NEW_STUDY_KEEP_HOURS))
    ids = list(
        NewStudyRun.objects.filter(finished_at__lt=before)
        .exclude(status__in=ACTIVE)
        .filter(~Q(archive="") | ~Q(renders=""))
        .values_list("pk", flat=True)[:100]
    )
    for run_id in ids:
        _drop_upload(run_id)
    return len(ids)


def _drop_upload(run_id: int) -> None:
    """Remove a run's upload and renders (once: the fields are cleared)."""
    row = NewStudyRun.objects.filter(pk=run_id).values_list("archive", "renders").first()
    if row is None:
        return
    archive, renders = row
    NewStudyRun.objects.filter(pk=run_id).update(archive="", renders="")
    if archive:
        default_storage.delete(archive)
    if renders:
        shutil.rmtree(Path(settings.ARBITER_NEW_STUDY_RENDERS) / renders, ignore_errors=True)
