"""The queued leaderboard computation (docs/protocol.md "Deployment leaderboard"): chunked bootstrap tasks
merge into exactly the result of one ``leaderboard_compute`` call; a real worker runs it (``broker`` test)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from judges.models import JudgeOutput
from ranking.leaderboard import leaderboard_compute
from ranking.leaderboard_runs import leaderboard_chunk_run, leaderboard_run
from ranking.models import Leaderboard, LeaderboardChunk
from ranking.tasks import leaderboard_run_task, leaderboard_start
from tests.ranking.rank_factories import make_ranked_study


@pytest.mark.django_db
def test_chunked_tasks_equal_the_single_computation(settings, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_LEADERBOARD_CHUNK_RESAMPLES = 37  # 150 resamples -> 5 chunks, the last one short
    ranked = make_ranked_study("lb-chunks", n_pages=16)
    objective = {"alpha": 3.0, "beta": 1.0, "gamma": 2.0, "delta": 0.0}
    with django_capture_on_commit_callbacks(execute=True):
        leaderboard = leaderboard_start(
            study=ranked.study, coefficient_set="frozen", resamples=150, seed=9, objective=objective
        )
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.DONE, leaderboard.error
    assert leaderboard.chunks_total == 5 and leaderboard.progress == 1.0
    assert LeaderboardChunk.objects.filter(leaderboard=leaderboard, status="done").count() == 5
    single = leaderboard_compute(
        study=ranked.study, coefficient_set="frozen", resamples=150, seed=9, objective=objective
    )
    assert leaderboard.result == single  # bit for bit, through the JSON round trip


@pytest.mark.django_db
def test_chunks_in_any_order_and_redelivered_merge_once(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_LEADERBOARD_CHUNK_RESAMPLES = 25
    ranked = make_ranked_study("lb-order", n_pages=10)
    leaderboard = Leaderboard.objects.create(
        study=ranked.study, coefficient_set=ranked.coefficient_set, resamples=100, seed=4
    )
    # Run the claim without dispatching (pretend the broker holds the chunk messages).
    dispatched: list[tuple[int, int]] = []

    def queue(leaderboard_id: int, index: int) -> None:
        dispatched.append((leaderboard_id, index))

    assert leaderboard_run(leaderboard_id=leaderboard.pk, queue_chunk=queue) == "queued 4 chunks"
    assert leaderboard_run_task(leaderboard.pk) == "not queued"  # a second delivery is a no-op
    assert dispatched == [(leaderboard.pk, k) for k in range(4)]
    # Judge outputs change after the snapshot: the chunks still use the snapshot.
    JudgeOutput.objects.filter(comparison__study=ranked.study).update(winner="B")
    for k in (3, 1, 1, 0):
        leaderboard_chunk_run(leaderboard_id=leaderboard.pk, index=k)
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.RUNNING
    assert leaderboard.progress == pytest.approx(0.05 + 0.95 * 3 / 4)
    assert leaderboard_chunk_run(leaderboard_id=leaderboard.pk, index=2) == "done"
    assert leaderboard_chunk_run(leaderboard_id=leaderboard.pk, index=2) == "not running"
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.DONE
    assert leaderboard.result["systems"][0]["system"] == "alpha"


@pytest.mark.django_db
def test_a_run_whose_worker_died_before_chunking_is_taken_over_later() -> None:
    ranked = make_ranked_study("lb-stale", n_pages=4)
    fresh = Leaderboard.objects.create(
        study=ranked.study,
        coefficient_set=ranked.coefficient_set,
        resamples=20,
        seed=1,
        status=Leaderboard.Status.RUNNING,
        started_at=timezone.now(),
    )
    assert leaderboard_run_task(fresh.pk) == "not queued"
    stale = Leaderboard.objects.create(
        study=ranked.study,
        coefficient_set=ranked.coefficient_set,
        resamples=20,
        seed=1,
        status=Leaderboard.Status.RUNNING,
        started_at=timezone.now() - timedelta(hours=2),
    )
    assert leaderboard_run_task(stale.pk) == "done"
    stale.refresh_from_db()
    assert stale.status == Leaderboard.Status.DONE


@pytest.mark.django_db
def test_unscorable_study_fails_with_a_reason(django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("lb-fail", n_pages=4)
    JudgeOutput.objects.filter(comparison__study=ranked.study).delete()
    with django_capture_on_commit_callbacks(execute=True):
        leaderboard = leaderboard_start(study=ranked.study, coefficient_set="frozen", resamples=20, seed=1)
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.FAILED
    assert "no comparison" in leaderboard.error and "\n" not in leaderboard.error


@pytest.mark.broker
@pytest.mark.serial
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_computes_the_chunked_leaderboard(celery_worker_process, settings) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("lb-broker", n_pages=12)
    # The worker reads its chunk size from its own settings (default 500): 1,200 resamples -> 3 chunks.
    with transaction.atomic():
        leaderboard = leaderboard_start(study=ranked.study, coefficient_set="frozen", resamples=1200, seed=2)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        leaderboard.refresh_from_db()
        if leaderboard.status in (Leaderboard.Status.DONE, Leaderboard.Status.FAILED):
            break
        time.sleep(0.5)
    assert leaderboard.status == Leaderboard.Status.DONE, leaderboard.error or leaderboard.status
    assert leaderboard.chunks_total == 3
    single = leaderboard_compute(study=ranked.study, coefficient_set="frozen", resamples=1200, seed=2)
    assert leaderboard.result == single
