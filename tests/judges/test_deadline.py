"""One deadline over a judge call's whole exchange, and no second request while the first can be answered (issue 32).

Real slow servers on loopback (``tests.judges.fake_provider``): one drips its status line and
headers a byte every 1.5 s, the other its body. With ``add_judge --timeout 5`` (2.5 in the one-run
test) every attempt is a transport failure at about that deadline, and the lease (renewed before each request, 2 × timeout + 5 s)
outlasts it: a second ``run_judges`` started while the first is still working finds every call
held and sends nothing. In every case the requests the server received equal the outputs stored
plus the retries recorded on them.

The in-process runs (SQLite or PostgreSQL) are unmarked; two runs in threads need a server
database (``postgres``); the same with a real Celery worker is marked ``broker``.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from annotation.models import Comparison
from judges.models import Judge, JudgeOutput
from judges.services.calls import HELD, _Claim, attempt_seconds, judge_output_claim, judge_output_execute
from tests.judges.factories import make_example_study
from tests.judges.fake_provider import FakeProvider

TIMEOUT = 5.0
DRIP = 1.5
#: The one-run test's deadline: shorter (its four attempts run one after the other), still longer
#: than a drip's pause, so every read is quick and only the whole exchange is late.
SHORT_TIMEOUT = 2.5
MESSAGES = {"header_drip": "no reply within the {:g} s deadline", "drip": "the reply was still arriving after the {:g} s deadline"}


@pytest.fixture(params=["header_drip", "drip"])
def slow(request: pytest.FixtureRequest) -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    server.default = request.param
    server.drip_interval = DRIP
    yield server
    server.stop()


def add_judge(url: str, *extra: str, timeout: float = TIMEOUT) -> None:
    call_command("add_judge", "judge-x", "--family", "acme", "--provider", "openai", "--model", "vlm-1",
                 "--base-url", url, "--api-key-env", "ARBITER_TEST_JUDGE_KEY", "--timeout", f"{timeout:g}", *extra,
                 stdout=StringIO())


def run_judges(*extra: str, fails: bool = False) -> str:
    """The command's output; ``fails``: it must exit non-zero because no call of the run succeeded."""
    out = StringIO()
    if not fails:
        call_command("run_judges", "example", "--judge", "judge-x", "--set", "human", *extra, stdout=out)
        return out.getvalue()
    with pytest.raises(CommandError, match="judge-x: no call of this run succeeded"):
        call_command("run_judges", "example", "--judge", "judge-x", "--set", "human", *extra, stdout=out)
    return out.getvalue()


def accounted(server: FakeProvider) -> tuple[int, int]:
    """(requests received, outputs stored + recorded retries), and every output finished."""
    rows = list(JudgeOutput.objects.values_list("status", "transport_failures", "invalid_attempts", "calls"))
    assert rows and {r[0] for r in rows} <= {"valid", "invalid", "failed"}, rows
    stored = len(rows)
    # A failed / invalid output's last failure is the stored outcome; the others were retried.
    retries = sum(t + i - (1 if s != "valid" else 0) for s, t, i, _ in rows)
    assert sum(r[3] for r in rows) == len(server.requests)  # every request counted on its output
    return len(server.requests), stored + retries


@pytest.mark.django_db
def test_each_attempt_fails_as_a_transport_failure_at_the_deadline(slow: FakeProvider) -> None:
    make_example_study()
    add_judge(slow.url, "--concurrency", "1", "--max-transport-retries", "1", timeout=SHORT_TIMEOUT)
    began = time.monotonic()
    run_judges("--orders", "primary", "--concurrency", "1", fails=True)
    elapsed = time.monotonic() - began
    rows = list(JudgeOutput.objects.values_list("status", "error", "transport_failures", "attempt_log"))
    assert len(rows) == 2
    for status, error, failures, log in rows:
        assert status == "failed"
        assert error.startswith("transport failure after 2 tries: ")
        assert MESSAGES[slow.default].format(SHORT_TIMEOUT) in error
        assert failures == 2 and [a["outcome"] for a in log] == ["transport", "transport"]
    # 2 calls × 2 attempts × 2.5 s, one after the other; without the one deadline a header drip
    # takes 1.5 s per byte of a 150-byte head (over 200 s per attempt).
    assert 4 * SHORT_TIMEOUT <= elapsed < 4 * SHORT_TIMEOUT + 6
    # Each request was cut at its deadline, not at the next read.
    starts = sorted(r.at for r in slow.requests)
    assert all(b - a < SHORT_TIMEOUT + 1.5 for a, b in itertools.pairwise(starts))
    received, expected = accounted(slow)
    assert received == expected == 4
    # A run again re-sends nothing: every call is finished.
    assert "0 to run" in run_judges("--orders", "primary", "--concurrency", "1")
    assert len(slow.requests) == 4


@pytest.mark.django_db
def test_the_lease_outlasts_every_attempt_and_a_held_call_is_not_sent_again(provider: FakeProvider) -> None:
    """The task entry point run again while the first holds the call: it finds the call held."""
    make_example_study()
    add_judge(provider.url, "--max-transport-retries", "0")
    judge = Judge.objects.get(name="judge-x")
    output = JudgeOutput.objects.create(judge=judge, comparison=Comparison.objects.get(external_id="c1"), order="primary")
    assert attempt_seconds(judge) >= 2 * TIMEOUT  # the lease covers the attempt with a deadline to spare
    # A claim's first request renews a lease that aged while the request was being built.
    token = judge_output_claim(output_id=output.pk, lease_seconds=1, max_attempts=5, count_call=True)
    assert token
    claim = _Claim(output.pk, token, renewed_at=time.monotonic() - 10, counted=True)
    claim.count_call(attempt_seconds(judge))
    output.refresh_from_db()
    assert output.calls == 1  # counted once, by the claim
    assert (output.lease_until - timezone.now()).total_seconds() > 2 * TIMEOUT
    assert judge_output_execute(output_id=output.pk) == HELD  # a second delivery while it is held
    assert provider.requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
@pytest.mark.slow
def test_two_concurrent_runs_send_no_more_than_stored_plus_retries(slow: FakeProvider) -> None:
    assert connection.vendor == "postgresql"
    make_example_study()
    add_judge(slow.url, "--concurrency", "4", "--max-transport-retries", "1")
    outs: dict[str, str] = {}
    errors: list[BaseException] = []

    def run(name: str, delay: float) -> None:
        time.sleep(delay)
        try:
            outs[name] = run_judges(fails=name == "first")
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    began = time.monotonic()
    # The second starts while the first's calls are between their first and second attempt, and
    # again after what the lease was before (15 s) would have run out had an attempt not been cut.
    threads = [threading.Thread(target=run, args=(n, d)) for n, d in (("first", 0.0), ("second", 6.0), ("third", 8.0))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    elapsed = time.monotonic() - began
    assert not errors, errors
    assert "4 to run" in outs["first"]
    for name in ("second", "third"):
        assert "0 to run, 4 held by a worker" in outs[name], outs[name]
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"failed"}
    assert elapsed < 2 * TIMEOUT + 8
    received, expected = accounted(slow)
    assert received == expected == 8  # 4 calls × (1 + 1 retry)


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.serial
def test_a_real_worker_and_two_waiting_runs_send_no_more_than_stored_plus_retries(  # type: ignore[no-untyped-def]
    slow: FakeProvider, celery_worker_process
) -> None:
    make_example_study()
    add_judge(slow.url, "--concurrency", "2", "--max-transport-retries", "0")
    outs: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            outs.append(run_judges("--wait", "--poll", "0.5", "--wait-timeout", "90", fails=True))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    began = time.monotonic()
    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(1.0)
    for thread in threads:
        thread.join(120)
    elapsed = time.monotonic() - began
    assert not errors, errors
    rows = list(JudgeOutput.objects.values_list("status", "error"))
    assert len(rows) == 4 and {s for s, _ in rows} == {"failed"}, rows
    assert all(MESSAGES[slow.default].format(TIMEOUT) in e for _, e in rows), rows
    # The worker runs 2 at a time: two rounds of 5 s (and the --wait polls requeue nothing live).
    assert elapsed < 4 * TIMEOUT + 10
    received, expected = accounted(slow)
    assert received == expected == 4
    assert JudgeOutput.objects.aggregate(n=Sum("attempts"))["n"] == 4  # no call was claimed twice
