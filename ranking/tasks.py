"""Celery tasks of the ranking app: thin, take ids, call one service (SPEC §7 leaderboards).

``leaderboard_run_task`` claims a queued leaderboard (conditional update: a second delivery is a
no-op), snapshots its inputs and queues one ``leaderboard_chunk_task`` per seeded bootstrap chunk;
chunks run on any worker, each stores its resamples, and the one that stores the last merges.
An unexpected error marks the leaderboard failed (so the page stops polling) and is re-raised.
"""

from __future__ import annotations

from celery import shared_task

from ranking.services import leaderboard_chunk_run, leaderboard_fail, leaderboard_run


@shared_task(name="ranking.leaderboard_run", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def leaderboard_run_task(leaderboard_id: int) -> str:
    try:
        return leaderboard_run(leaderboard_id=int(leaderboard_id))
    except Exception as exc:
        leaderboard_fail(int(leaderboard_id), f"internal error ({exc.__class__.__name__})")
        raise


@shared_task(name="ranking.leaderboard_chunk", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def leaderboard_chunk_task(leaderboard_id: int, index: int) -> str:
    try:
        return leaderboard_chunk_run(leaderboard_id=int(leaderboard_id), index=int(index))
    except Exception as exc:
        leaderboard_fail(int(leaderboard_id), f"internal error in bootstrap chunk {index} ({exc.__class__.__name__})")
        raise
