from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.judges.fake_provider import FakeProvider


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fast_backoff(settings, monkeypatch):  # type: ignore[no-untyped-def]
    settings.ARBITER_JUDGE_BACKOFF_BASE = 0.01
    settings.ARBITER_JUDGE_BACKOFF_CAP = 0.05
    monkeypatch.setenv("ARBITER_TEST_JUDGE_KEY", "sk-test-secret-0123456789")


@pytest.fixture(autouse=True)
def _fresh_local_limits() -> Iterator[None]:
    """Pauses and stops of the in-process limiter do not leak from one test into the next."""
    from judges.limits import _local

    yield
    with _local._lock:
        _local._paused.clear()
        _local._stopped.clear()
