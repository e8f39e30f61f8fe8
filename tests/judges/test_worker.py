"""Real Celery workers (marked ``broker``): a worker killed mid-call loses nothing, duplicates nothing.

Run with PostgreSQL and Redis, e.g.
DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_judges CELERY_BROKER_URL=redis://127.0.0.1:6379/5 \
    .venv/bin/python -m pytest tests/judges -q
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from judges.limits import Limits, RedisLimiter
from judges.models import JudgeOutput
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

ROOT = Path(__file__).resolve().parents[2]


def start_worker() -> subprocess.Popen[bytes]:
    """A second worker like ``celery_worker_process`` starts (same database, broker and media)."""
    from config.celery_app import app

    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.test",
        DATABASE_URL=f"postgres://{db.get('USER') or ''}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}",
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        ARBITER_CELERY_EAGER="0",
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=prefork", "--concurrency=2",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", "celery", "--loglevel=WARNING"],
        cwd=ROOT, env=env, start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if app.control.ping(timeout=0.5, limit=1):  # back as soon as it answers
            return worker
        if worker.poll() is not None:
            break
    os.killpg(worker.pid, signal.SIGKILL)
    pytest.fail("the replacement worker did not start")


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.serial
def test_sigkill_mid_call_then_new_worker_finishes_with_one_output_per_call(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    replacement = None
    try:
        make_example_study()
        make_judge(base_url=provider.url, timeout_seconds=2.0, concurrency=2, max_attempts=5)
        provider.script.append("hold")
        out = StringIO()
        call_command("run_judges", "example", "--judge", "judge-x", "--set", "human", "--repeats", "2", stdout=out)
        assert "8 queued" in out.getvalue()
        assert provider.holding.wait(30), "no worker reached the judge"
        os.killpg(celery_worker_process.pid, signal.SIGKILL)
        celery_worker_process.wait(10)
        provider.release.set()
        held = JudgeOutput.objects.filter(status="running")
        assert held.count() >= 1

        replacement = start_worker()
        out = StringIO()
        call_command("run_judges", "example", "--judge", "judge-x", "--set", "human", "--repeats", "2",
                     "--wait", "--poll", "0.5", "--wait-timeout", "120", stdout=out)
        rows = list(JudgeOutput.objects.values_list("comparison__external_id", "order", "repeat", "status", "attempts"))
        assert len(rows) == 8  # 2 comparisons × 2 orders × 2 repeats, exactly one row each
        assert {r[3] for r in rows} == {"valid"}, rows
        assert max(r[4] for r in rows) == 2  # the killed call was claimed again once
        assert provider.problems == []
        # Every call reached the judge once, plus once more for the held call and at most once more for
        # the other child's call if the kill cut it off after it had claimed its row.
        cut_off = sum(1 for r in rows if r[4] == 2)
        assert 1 <= cut_off <= 2
        assert 9 <= len(provider.requests) <= 8 + cut_off
    finally:
        provider.stop()
        if replacement is not None and replacement.poll() is None:
            os.killpg(replacement.pid, signal.SIGTERM)
            try:
                replacement.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(replacement.pid, signal.SIGKILL)


@pytest.mark.broker
def test_redis_limits_hold_across_clients() -> None:
    limits = Limits(key=f"test-{time.time_ns()}", concurrency=3, rate_per_second=25.0, hold_seconds=5)
    limiters = [RedisLimiter(settings.CELERY_BROKER_URL) for _ in range(4)]  # as if four workers
    active = 0
    peak = 0
    lock = threading.Lock()

    def work(limiter: RedisLimiter) -> None:
        nonlocal active, peak
        for _ in range(10):
            with limiter.slot(limits):
                with lock:
                    active += 1
                    peak = max(peak, active)
                time.sleep(0.01)
                with lock:
                    active -= 1

    began = time.monotonic()
    threads = [threading.Thread(target=work, args=(limiters[i % 4],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 3
    # 80 calls at 25/s with a burst of 25: at least (80 - 25) / 25 = 2.2 s.
    assert time.monotonic() - began >= 2.0


@pytest.mark.broker
@pytest.mark.serial
def test_the_sweep_requeues_calls_whose_message_a_dead_worker_took(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    """A worker SIGKILLed with a prefetched, unstarted message leaves its call pending with no
    message in the queue (the broker returns it only after the visibility timeout): once the queue
    is empty, the sweep queues it again. A stopped judge's call and a batch's are left waiting."""
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import Comparison
    from judges.tasks import sweep_leases

    provider = FakeProvider().start()
    try:
        study = make_example_study()
        judge = make_judge(base_url=provider.url, timeout_seconds=2.0, concurrency=2, max_attempts=5)
        c1, c2 = Comparison.objects.filter(study=study).order_by("pk")[:2]
        lost = [JudgeOutput.objects.create(judge=judge, comparison=c, order=o) for c in (c1, c2)
                for o in ("primary", "swapped")]
        stopped = JudgeOutput.objects.create(judge=judge, comparison=c1, order="primary", repeat=1,
                                             error="stopped: the provider refused the key")
        batched = JudgeOutput.objects.create(judge=judge, comparison=c1, order="swapped", repeat=1, batch_id="b-1")
        fresh = JudgeOutput.objects.create(judge=judge, comparison=c2, order="primary", repeat=1)
        an_hour_ago = timezone.now() - timedelta(hours=1)
        JudgeOutput.objects.exclude(pk=fresh.pk).update(created_at=an_hour_ago)

        assert sweep_leases() == len(lost)  # the fresh call may still be on its way to a worker
        deadline = time.monotonic() + 30
        while JudgeOutput.objects.filter(pk__in=[o.pk for o in lost], status="valid").count() < len(lost):
            assert time.monotonic() < deadline, list(JudgeOutput.objects.values_list("pk", "status", "error"))
            time.sleep(0.1)
        assert len(provider.requests) == len(lost)
        assert set(JudgeOutput.objects.filter(pk__in=[stopped.pk, batched.pk, fresh.pk]).values_list("status", flat=True)) == {
            "pending"}
    finally:
        provider.stop()


@pytest.mark.broker
@pytest.mark.django_db
def test_a_waiting_message_keeps_the_sweep_from_requeueing_pending_calls() -> None:
    """The sweep reads an empty queue only when no message waits in it (any broker, any priority)."""
    from judges.tasks import broker_queue_empty, call_judge

    queue = f"arbiter-test-idle-{os.getpid()}"
    assert broker_queue_empty(queue)
    with warnings.catch_warnings():  # the test settings run tasks eagerly; send_task goes to the broker
        warnings.simplefilter("ignore")
        call_judge.app.send_task("judges.call_judge", args=(0,), queue=queue, priority=6)  # no worker reads it
    try:
        assert not broker_queue_empty(queue)
    finally:
        with call_judge.app.connection_for_write() as conn:
            conn.default_channel.queue_purge(queue)
    assert broker_queue_empty(queue)
