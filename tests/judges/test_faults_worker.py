"""The issue-14 fault list with a real Celery worker on Redis and PostgreSQL (marked broker, slow).

SIGKILL of the prefork children mid-call, a PostgreSQL restart mid-run, a reply nested 100,000
deep, a reply dripped one byte at a time. After each: zero outputs ``running``, exactly one row per
call, and every request the judge server received is counted on its output (``calls``): calls
made = outputs stored + the retries recorded on them.

Run with
DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_judges CELERY_BROKER_URL=redis://127.0.0.1:6379/5 \
    .venv/bin/python -m pytest tests/judges/test_faults_worker.py -q
The restart test restarts the PostgreSQL server once (other sessions see their connections dropped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Sum

from judges.models import JudgeOutput
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.serial]

ARGS = ("example", "--judge", "judge-x", "--set", "human")


def run_and_wait(*extra: str, fails: str = "") -> str:
    """The output of ``run_judges --wait``; ``fails``: it must exit non-zero with this in its error."""
    out = StringIO()
    if not fails:
        call_command("run_judges", *ARGS, *extra, "--wait", "--poll", "0.5", "--wait-timeout", "150", stdout=out)
        return out.getvalue()
    with pytest.raises(CommandError, match=fails):
        call_command("run_judges", *ARGS, *extra, "--wait", "--poll", "0.5", "--wait-timeout", "150", stdout=out)
    return out.getvalue()


def assert_accounted(provider: FakeProvider, expected_rows: int, killed: int = 0) -> dict[str, int]:
    """Zero outputs running or pending, one row per call, every request received counted.

    ``killed``: calls cut mid-way (a SIGKILLed process, a database restart); each may have counted
    a request it never sent (cut between the counting UPDATE and the send), never the other way
    round.
    """
    rows = list(JudgeOutput.objects.values_list("comparison__external_id", "order", "repeat", "status"))
    assert len(rows) == expected_rows
    assert len({r[:3] for r in rows}) == expected_rows  # nothing duplicated
    assert not [r for r in rows if r[3] in ("running", "pending")], rows
    calls = JudgeOutput.objects.aggregate(n=Sum("calls"))["n"]
    assert len(provider.requests) <= calls <= len(provider.requests) + killed, (calls, len(provider.requests))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r[3]] = counts.get(r[3], 0) + 1
    return counts


def children_of(pid: int) -> list[int]:
    listing = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in listing.split()]


def test_sigkill_of_prefork_children_mid_call(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    try:
        make_example_study()
        make_judge(base_url=provider.url, timeout_seconds=2.0, concurrency=2, max_attempts=5)
        provider.script.append("hold")
        out = StringIO()
        call_command("run_judges", *ARGS, "--repeats", "2", stdout=out)
        assert provider.holding.wait(30), "no worker reached the judge"
        children = children_of(celery_worker_process.pid)
        assert children
        for child in children:  # the master lives on and forks new children
            os.kill(child, signal.SIGKILL)
        provider.release.set()
        run_and_wait("--repeats", "2")
        counts = assert_accounted(provider, 8, killed=len(children))
        assert counts == {"valid": 8}
        assert JudgeOutput.objects.filter(calls__gt=1).count() >= 1  # the killed call was made again
        assert provider.problems == []
    finally:
        provider.stop()


@pytest.mark.postgres
def test_postgresql_restart_mid_run(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    from tests.security.test_database_restart import _restart_postgres, _wait_ready

    provider = FakeProvider(delay=0.4).start()
    try:
        make_example_study()
        make_judge(base_url=provider.url, timeout_seconds=5.0, concurrency=2, max_attempts=6)
        call_command("run_judges", *ARGS, "--repeats", "4", stdout=StringIO())
        deadline = time.monotonic() + 30
        while len(provider.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        at_restart = len(provider.requests)
        connection.close()
        _restart_postgres()
        from django.conf import settings

        _wait_ready(settings.DATABASES["default"])
        connection.close()
        run_and_wait("--repeats", "4")
        # The restart may cut the calls in flight (concurrency 2) after their counting UPDATE
        # committed and before their send: counted once more, never lost (CI run at de0dad1).
        counts = assert_accounted(provider, 16, killed=2)
        assert counts == {"valid": 16}
        assert 3 <= at_restart < 16  # the restart came mid-run
        assert provider.problems == []
    finally:
        provider.stop()


def test_nested_json_reply_with_a_worker(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    try:
        make_example_study()
        make_judge(base_url=provider.url, concurrency=2, max_invalid_retries=1)
        provider.default = "nested"
        run_and_wait(fails="no call of this run succeeded")
        counts = assert_accounted(provider, 4)
        assert counts == {"invalid": 4}
        assert set(JudgeOutput.objects.values_list("error", flat=True)) == {"the reply is nested too deeply to be an answer"}
        assert len(provider.requests) == 8
    finally:
        provider.stop()


def test_slow_drip_reply_with_a_worker(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    try:
        make_example_study()
        make_judge(base_url=provider.url, concurrency=2, timeout_seconds=1.0, max_transport_retries=1)
        provider.default = "drip"
        run_and_wait(fails="no call of this run succeeded")
        counts = assert_accounted(provider, 4)
        assert counts == {"failed": 4}
        for error in JudgeOutput.objects.values_list("error", flat=True):
            assert "still arriving after the 1 s deadline" in error
    finally:
        provider.stop()
