"""Judge calls move their Prometheus counters (annotation/metrics.py) by how they end."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider
from tests.judges.test_calls import call

pytestmark = pytest.mark.django_db


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_valid_and_a_failed_call_are_counted_by_status(provider: FakeProvider) -> None:
    valid, failed = _value("arbiter_judge_calls_total", status="valid"), _value("arbiter_judge_calls_total", status="failed")
    study = make_example_study()
    assert call(study, make_judge(base_url=provider.url)).status == "valid"
    assert _value("arbiter_judge_calls_total", status="valid") == valid + 1
    provider.default = "500"
    assert call(study, make_judge("judge-y", base_url=provider.url, max_transport_retries=1)).status == "failed"
    assert _value("arbiter_judge_calls_total", status="failed") == failed + 1
