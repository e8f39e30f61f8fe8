"""Celery tasks of the ranking app: thin, take ids, call one service
(docs/protocol.md "Deployment leaderboard" leaderboards).

``leaderboard_start`` creates a queued leaderboard (``leaderboard_create``) and queues
``leaderboard_run_task`` once the row is committed (``annotation.task_queue``: without a broker,
in a thread of the process, so the page answers at once and polls). The run task claims it (conditional update: a
second delivery is a no-op), snapshots its inputs and queues one ``leaderboard_chunk_task`` per
seeded bootstrap chunk; chunks run on any worker, each stores its resamples, and the one that
stores the last merges. An unexpected error marks the leaderboard failed (so the page stops
polling) and is re-raised. ``study_plan_start`` does the same for a sample-size plan run
(``study_plan_run_task``, one task per plan). The services never import this module: it hands them the queueing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery import shared_task
from django.db.models import QuerySet

from annotation.models import Study
from annotation.task_queue import task_queue_on_commit
from calibration.models import CoefficientSet
from ranking.leaderboard import DEFAULT_RESAMPLES, DEFAULT_SEED
from ranking.leaderboard_runs import (
    leaderboard_chunk_run,
    leaderboard_create,
    leaderboard_fail,
    leaderboard_run,
)
from ranking.models import Leaderboard, RankingModel, StudyPlanRun
from ranking.planning import study_plan_run_create, study_plan_run_execute, study_plan_run_fail


def _queue_chunk(leaderboard_id: int, index: int) -> None:
    leaderboard_chunk_task.delay(leaderboard_id, index)


@shared_task(name="ranking.leaderboard_run", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def leaderboard_run_task(leaderboard_id: int) -> str:
    try:
        return leaderboard_run(leaderboard_id=int(leaderboard_id), queue_chunk=_queue_chunk)
    except Exception as exc:
        leaderboard_fail(int(leaderboard_id), f"internal error ({exc.__class__.__name__})")
        raise


@shared_task(name="ranking.leaderboard_chunk", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def leaderboard_chunk_task(leaderboard_id: int, index: int) -> str:
    try:
        return leaderboard_chunk_run(leaderboard_id=int(leaderboard_id), index=int(index))
    except Exception as exc:
        leaderboard_fail(
            int(leaderboard_id), f"internal error in bootstrap chunk {index} ({exc.__class__.__name__})"
        )
        raise


def leaderboard_start(
    *,
    study: Study,
    coefficient_set: CoefficientSet | str | None,
    resamples: Any = DEFAULT_RESAMPLES,
    seed: Any = DEFAULT_SEED,
    use_human_labels: bool = False,
    objective: Mapping[str, Any] | None = None,
    user: Any = None,
    model: Any = RankingModel.BRADLEY_TERRY,
) -> Leaderboard:
    """Create a queued Leaderboard (``leaderboard_create``) and queue its run once the row is committed."""
    leaderboard = leaderboard_create(
        study=study,
        coefficient_set=coefficient_set,
        resamples=resamples,
        seed=seed,
        use_human_labels=use_human_labels,
        objective=objective,
        user=user,
        model=model,
    )
    task_queue_on_commit(leaderboard_run_task, leaderboard.pk)
    return leaderboard


@shared_task(name="ranking.study_plan_run", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def study_plan_run_task(run_id: int) -> str:
    try:
        return study_plan_run_execute(run_id=int(run_id))
    except Exception as exc:
        study_plan_run_fail(int(run_id), f"internal error ({exc.__class__.__name__})")
        raise


def study_plan_start(*, values: Mapping[str, Any], pilots: QuerySet[Study], user: Any = None) -> StudyPlanRun:
    """Create a queued plan run (``study_plan_run_create``) and queue it once the row is committed."""
    run = study_plan_run_create(values=values, pilots=pilots, user=user)
    task_queue_on_commit(study_plan_run_task, run.pk)
    return run
