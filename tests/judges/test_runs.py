"""Dispatch (docs/protocol.md "Judges and calibration", "Commands" run_judges): idempotent rows, claims with
leases, attempt caps, progress."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from judges.limits import Limits, LocalLimiter
from judges.models import Judge, JudgeOutput
from judges.selectors import judge_outputs_frame, judge_progress
from judges.services.calls import _Claim, judge_output_claim
from judges.services.runs import _limiter_caps_in_flight, judge_outputs_requeue, judge_run_start
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider


def run(*args: str) -> str:
    out = StringIO()
    call_command("run_judges", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_run_judges_eager_runs_every_call_once_and_a_rerun_skips_them(provider: FakeProvider) -> None:
    study = make_example_study()
    make_judge(base_url=provider.url, concurrency=1)
    out = run("example", "--judge", "judge-x", "--repeats", "2")
    assert "12 calls, 12 new, 0 already done, 12 to run" in out
    assert "12/12" in out and "valid 12" in out
    assert JudgeOutput.objects.filter(status="valid").count() == 12
    assert len(provider.requests) == 12
    assert provider.problems == []
    out = run("example", "--judge", "judge-x", "--repeats", "2")
    assert "12 calls, 0 new, 12 already done, 0 to run" in out
    assert len(provider.requests) == 12
    # More repeats: only the new calls run.
    run("example", "--judge", "judge-x", "--repeats", "3")
    assert JudgeOutput.objects.count() == 18 and len(provider.requests) == 18
    progress = judge_progress(study=study)
    assert [(p.judge, p.done, p.valid, p.pending) for p in progress] == [("judge-x", 18, 18, 0)]


@pytest.mark.django_db
def test_run_judges_set_and_orders(provider: FakeProvider) -> None:
    make_example_study()
    make_judge(base_url=provider.url, concurrency=1)
    run("example", "--judge", "judge-x", "--set", "human", "--orders", "swapped")
    rows = set(JudgeOutput.objects.values_list("comparison__external_id", "order", "repeat"))
    assert rows == {("c1", "swapped", 0), ("c2", "swapped", 0)}


@pytest.mark.django_db
def test_failed_calls_stay_failed_unless_asked(provider: FakeProvider) -> None:
    make_example_study()
    make_judge(base_url=provider.url, concurrency=1, max_transport_retries=0)
    provider.default = "500"
    with pytest.raises(CommandError, match="no call of this run succeeded"):  # nothing succeeded: exit non-zero
        run("example", "--judge", "judge-x", "--set", "human", "--orders", "primary")
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"failed"}
    provider.default = "valid"
    run("example", "--judge", "judge-x", "--set", "human", "--orders", "primary")
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"failed"}
    run("example", "--judge", "judge-x", "--set", "human", "--orders", "primary", "--retry-failed")
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--judge", "judge-x"], "no study"),
        (["example", "--judge", "nobody"], "no judge named"),
        (["example", "--judge", "judge-x", "--orders", "primary,upside"], "upside is not primary or swapped"),
        (["example", "--judge", "judge-x", "--repeats", "0"], "repeats must be"),
        (["example", "--judge", "imported-one"], "imported-only"),
    ],
)
def test_run_judges_bad_input_is_one_line_and_writes_nothing(provider: FakeProvider, args: list[str], message: str) -> None:
    make_example_study()
    make_judge(base_url=provider.url)
    Judge.objects.create(name="imported-one", provider="imported")
    with pytest.raises(CommandError) as info:
        run(*args)
    assert message in str(info.value)
    assert not JudgeOutput.objects.exists()


@pytest.mark.django_db
def test_run_start_queues_on_commit_only_unfinished_ids(provider: FakeProvider, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        plan = judge_run_start(study=study, judge=judge, orders=["primary"])
    assert len(callbacks) == 1 and len(plan.output_ids) == 3
    JudgeOutput.objects.filter(pk=plan.output_ids[0]).update(status="valid", winner="A")
    with django_capture_on_commit_callbacks(execute=False):
        again = judge_run_start(study=study, judge=judge, orders=["primary"])
    assert again.created == 0 and again.done == 1
    assert set(again.output_ids) == set(plan.output_ids[1:])


@pytest.mark.django_db
def test_claim_is_exclusive_until_the_lease_expires() -> None:
    study = make_example_study()
    judge = make_judge(base_url="http://127.0.0.1:9/v1", max_attempts=3)
    output = JudgeOutput.objects.create(judge=judge, comparison=study.comparisons.get(external_id="c1"), order="primary")
    first = judge_output_claim(output_id=output.pk, lease_seconds=60, max_attempts=3)
    assert first is not None
    assert judge_output_claim(output_id=output.pk, lease_seconds=60, max_attempts=3) is None
    # The holder dies: its lease runs out, another worker takes over.
    JudgeOutput.objects.filter(pk=output.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert judge_outputs_requeue(study=study) == 1
    second = judge_output_claim(output_id=output.pk, lease_seconds=60, max_attempts=3)
    assert second is not None and second != first
    # The old holder wakes up: it can neither renew nor write.
    assert _Claim(output.pk, first).update(status="valid", winner="B") is False
    assert _Claim(output.pk, second).update(status="valid", winner="A") is True
    output.refresh_from_db()
    assert (output.status, output.winner, output.attempts) == ("valid", "A", 2)


@pytest.mark.django_db
def test_attempt_cap_stores_failed() -> None:
    study = make_example_study()
    judge = make_judge(base_url="http://127.0.0.1:9/v1", max_attempts=2)
    output = JudgeOutput.objects.create(
        judge=judge, comparison=study.comparisons.get(external_id="c1"), order="primary",
        status="running", attempts=2, lease_until=timezone.now() - timedelta(seconds=1),
    )
    assert judge_output_claim(output_id=output.pk, lease_seconds=60, max_attempts=2) is None
    output.refresh_from_db()
    assert output.status == "failed" and "gave up after 2 attempts" in output.error


@pytest.mark.django_db
def test_outputs_frame_for_calibration(provider: FakeProvider) -> None:
    study = make_example_study()
    make_judge(base_url=provider.url, concurrency=1, family="acme")
    provider.script.extend(["valid", "prose", "prose", "prose"])
    run("example", "--judge", "judge-x", "--set", "human")
    frame = judge_outputs_frame(study=study, set="human")
    assert list(frame.columns) == ["comparison", "judge", "family", "order", "repeat", "status", "winner", "confidence"]
    assert len(frame) == 4
    assert set(frame["family"]) == {"acme"}
    swapped = frame[(frame["order"] == "swapped") & (frame["status"] == "valid")]
    assert set(swapped["winner"]) == {"B"}  # the fake judge always says "A" about what it sees first
    invalid = frame[frame["status"] == "invalid"]
    assert len(invalid) == 1 and invalid["winner"].isna().all() and invalid["confidence"].isna().all()
    assert judge_outputs_frame(study=study, set="deployment").empty


def test_local_limiter_holds_concurrency_and_rate() -> None:
    import threading
    import time

    limiter = LocalLimiter()
    limits = Limits(key="t", concurrency=2, rate_per_second=20.0, hold_seconds=5)
    active = 0
    peak = 0
    starts: list[float] = []
    lock = threading.Lock()

    def work() -> None:
        nonlocal active, peak
        with limiter.slot(limits):
            with lock:
                active += 1
                peak = max(peak, active)
                starts.append(time.monotonic())
            time.sleep(0.02)
            with lock:
                active -= 1

    threads = [threading.Thread(target=work) for _ in range(40)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2
    # 40 calls at 20/s with a burst of 20: at least (40 - 20) / 20 = 1 s.
    assert max(starts) - began >= 0.9


@pytest.mark.django_db(transaction=True)
def test_eager_run_with_threads(provider: FakeProvider) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("threads need a server database (in-memory SQLite is per-connection locked)")
    make_example_study()
    make_judge(base_url=provider.url, concurrency=4)
    out = run("example", "--judge", "judge-x", "--repeats", "4")
    assert "24/24" in out
    assert JudgeOutput.objects.filter(status="valid").count() == 24
    assert len(provider.requests) == 24


@pytest.mark.django_db
def test_a_call_that_would_overrun_its_budget_is_released_not_killed(provider: FakeProvider) -> None:
    from judges.services.calls import judge_output_execute

    study = make_example_study()
    judge = make_judge(base_url=provider.url, timeout_seconds=5)
    output = JudgeOutput.objects.create(judge=judge, comparison=study.comparisons.get(external_id="c1"), order="primary")
    provider.script.append("500")
    # The first attempt always runs; the retry needs up to 2 × 5 s + margin, over a 3 s budget.
    assert judge_output_execute(output_id=output.pk, budget_seconds=3) == "released"
    output.refresh_from_db()
    assert (output.status, output.claim_token, output.attempts, output.transport_failures) == ("pending", "", 1, 1)
    assert len(provider.requests) == 1
    assert judge_output_execute(output_id=output.pk) == "valid"
    output.refresh_from_db()
    assert (output.attempts, output.transport_failures) == (2, 1)


@pytest.mark.django_db
def test_dry_run_prints_calls_tokens_and_cost_and_queues_nothing(provider: FakeProvider) -> None:
    from judges.costs import image_tokens

    make_example_study()
    make_judge(base_url=provider.url, price_input_per_mtok=2.5, price_output_per_mtok=10.0)
    out = run("example", "--judge", "judge-x", "--set", "human", "--repeats", "2", "--dry-run")
    assert not JudgeOutput.objects.exists() and provider.requests == []
    line = out.strip()
    assert "\n" not in line
    assert line.startswith("judge-x (dry run, nothing queued): 8 calls, 0 already done; estimated input ")
    # The example's images are 400 × 520 px: OpenAI's tile rule gives 85 + 170 × 2 tiles each, three per call.
    assert image_tokens("openai", 400, 520) == 425
    assert f"(images {8 * 3 * 425:,}, text " in line
    assert "cost $" in line and "per million input / output tokens" in line
    # Run it, then the estimate of what is left is zero calls.
    run("example", "--judge", "judge-x", "--set", "human", "--repeats", "2", "--concurrency", "1")
    again = run("example", "--judge", "judge-x", "--set", "human", "--repeats", "2", "--dry-run")
    assert ": 0 calls, 8 already done; estimated input 0 tokens" in again


@pytest.mark.django_db
def test_run_prints_the_tokens_recorded_and_unknown_prices_say_so(provider: FakeProvider) -> None:
    make_example_study()
    make_judge(base_url=provider.url)
    dry = run("example", "--judge", "judge-x", "--set", "human", "--dry-run")
    assert "cost unknown (no prices: add_judge NAME --update --price-input X --price-output Y)" in dry
    out = run("example", "--judge", "judge-x", "--set", "human", "--concurrency", "1")
    assert "recorded: 4 requests, input 4,800 tokens (0 cached), output 160 tokens" in out


def test_image_token_rules_of_each_provider() -> None:
    from judges.costs import Prices, cost_usd, image_tokens

    assert image_tokens("openai", 1024, 1024) == 765  # OpenAI's documented examples
    assert image_tokens("openai", 2048, 4096) == 1105
    assert image_tokens("anthropic", 1000, 1000) == 1334  # Anthropic: w × h / 750
    assert image_tokens("gemini", 300, 300) == 258 and image_tokens("gemini", 1000, 1000) == 1032
    prices = Prices(2.0, 8.0, 0.5)
    assert cost_usd(prices, 1_000_000, 100_000) == 2.8
    assert cost_usd(prices, 1_000_000, 100_000, batch=True) == 1.4
    assert cost_usd(Prices(None, 8.0), 1, 1) is None


@pytest.mark.django_db
def test_judge_usage_for_the_calibration_report(provider: FakeProvider) -> None:
    from judges.selectors import judge_usage

    study = make_example_study()
    make_judge(base_url=provider.url, price_input_per_mtok=1.0, price_output_per_mtok=4.0)
    run("example", "--judge", "judge-x", "--set", "human", "--concurrency", "1")
    usage = judge_usage(study=study, judges=["judge-x"], comparisons=["c1"])
    assert usage == {"judge-x": {"comparisons": 1, "input_tokens": 2400, "output_tokens": 80, "cached_tokens": 0,
                                 "cost_usd": 0.00272, "cost_per_comparison_usd": 0.00272}}


@pytest.mark.django_db
def test_spare_threads_only_where_the_judge_limiter_caps_the_requests(provider: FakeProvider) -> None:
    study = make_example_study()
    narrow = make_judge(name="narrow", base_url=provider.url, concurrency=4)
    wide = make_judge(name="wide", base_url=provider.url, concurrency=8)
    narrow_ids = list(judge_run_start(study=study, judge=narrow, dispatch=False).output_ids)
    wide_ids = list(judge_run_start(study=study, judge=wide, dispatch=False).output_ids)
    assert _limiter_caps_in_flight(narrow_ids, 4)
    assert _limiter_caps_in_flight(narrow_ids, 6)
    assert not _limiter_caps_in_flight(wide_ids, 4)  # --concurrency below the judge's: threads are the cap
    assert not _limiter_caps_in_flight(narrow_ids + wide_ids, 8)  # two judges: their limiters add up


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("judge_concurrency", "asked"), [(4, 4), (8, 3)])
def test_eager_run_never_has_more_requests_in_flight_than_asked(
    provider: FakeProvider, judge_concurrency: int, asked: int
) -> None:
    if connection.vendor == "sqlite":
        pytest.skip("threads need a server database (in-memory SQLite is per-connection locked)")
    provider.delay = 0.05
    make_example_study()
    make_judge(base_url=provider.url, concurrency=judge_concurrency)
    out = run("example", "--judge", "judge-x", "--repeats", "4", "--concurrency", str(asked))
    assert "24/24" in out
    assert len(provider.requests) == 24
    assert 2 <= provider.peak_in_flight <= asked  # threads did overlap, and never past the cap
