"""Every way a judge call can go wrong ends in a known state (issue 14 item 7), in-process.

A reply nested 100,000 deep, a 50 MB reply, a reply dripped a byte at a time, an error in our own
code, a lease held by someone else, a lease that ran out: each ends ``valid`` / ``invalid`` /
``failed`` / ``pending`` with its reason, never ``running``, and ``calls`` counts every request
the server received. The same faults with a real worker are in ``test_faults_worker.py``.
"""

from __future__ import annotations

import time

import pytest

from annotation.models import Comparison
from judges.models import JudgeOutput
from judges.services.calls import HELD, held_seconds, judge_output_claim, judge_output_execute
from judges.services.runs import judge_outputs_sweep
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db


def new_output(study, judge, order: str = "primary") -> JudgeOutput:  # type: ignore[no-untyped-def]
    return JudgeOutput.objects.create(judge=judge, comparison=Comparison.objects.get(study=study, external_id="c1"),
                                      order=order)


def run_one(study, judge, order: str = "primary") -> JudgeOutput:  # type: ignore[no-untyped-def]
    output = new_output(study, judge, order)
    judge_output_execute(output_id=output.pk)
    output.refresh_from_db()
    return output


def test_reply_nested_100000_deep_is_invalid_with_its_reason(provider: FakeProvider) -> None:
    provider.default = "nested"
    output = run_one(make_example_study(), make_judge(base_url=provider.url, max_invalid_retries=1))
    assert output.status == "invalid"
    assert "nested too deeply" in output.error
    assert output.calls == len(provider.requests) == 2
    assert [a["outcome"] for a in output.attempt_log] == ["invalid", "invalid"]


def test_envelope_nested_100000_deep_is_invalid(provider: FakeProvider) -> None:
    provider.default = "nested_envelope"
    output = run_one(make_example_study(), make_judge(base_url=provider.url, max_invalid_retries=0))
    assert output.status == "invalid"
    assert output.error == "the provider's response is nested too deeply to read"
    assert output.calls == len(provider.requests) == 1


def test_50_mb_reply_is_invalid_over_the_cap(provider: FakeProvider) -> None:
    provider.default = "huge"
    output = run_one(make_example_study(), make_judge(base_url=provider.url, max_invalid_retries=0))
    assert output.status == "invalid"
    assert "over the 8,388,608-byte cap" in output.error
    assert output.raw == ""


def test_slow_drip_reply_is_cut_at_one_deadline(provider: FakeProvider) -> None:
    provider.default = "drip"
    provider.drip_interval = 0.02  # every read is quick, the whole reply takes ~6 s
    began = time.monotonic()
    output = run_one(make_example_study(), make_judge(base_url=provider.url, timeout_seconds=0.5, max_transport_retries=1))
    elapsed = time.monotonic() - began
    assert output.status == "failed"
    assert "still arriving after the 0.5 s deadline" in output.error
    assert output.calls == len(provider.requests) == 2
    assert elapsed < 3.0


def test_an_error_in_our_own_code_is_failed_with_its_reason(provider: FakeProvider, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Fault injection into our code (not into a client): validation blowing up unexpectedly.
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("validator exploded")

    monkeypatch.setattr("judges.replies.canonical_answer", explode)  # the verdict contract's validator
    output = run_one(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "failed"
    assert output.error == "internal error (RuntimeError): validator exploded"
    assert output.lease_until is None and output.finished_at is not None
    assert output.calls == len(provider.requests) == 1


def test_a_held_lease_is_reported_held_with_the_time_left(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = new_output(study, judge)
    assert judge_output_claim(output_id=output.pk, lease_seconds=30, max_attempts=5)
    assert judge_output_execute(output_id=output.pk) == HELD
    assert 25 < held_seconds(output.pk) <= 30
    assert provider.requests == []


def test_sweeper_requeues_expired_leases(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = new_output(study, judge)
    assert judge_output_claim(output_id=output.pk, lease_seconds=-1, max_attempts=5)  # a dead worker's claim
    fresh = new_output(study, judge, order="swapped")
    assert judge_output_claim(output_id=fresh.pk, lease_seconds=60, max_attempts=5)  # a live one
    assert judge_outputs_sweep() == 1  # eager: the re-queued call runs here
    output.refresh_from_db()
    fresh.refresh_from_db()
    assert output.status == "valid" and output.attempts == 2
    assert fresh.status == "running"
