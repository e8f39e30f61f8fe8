"""Researcher page and REST endpoints: personas, htmx progress partial, admin-only endpoints."""

from __future__ import annotations

import pytest
from django.test import Client

from judges.models import Judge, JudgeOutput
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(researcher):  # type: ignore[no-untyped-def]
    study = make_example_study()
    study.researchers.add(researcher)
    return study


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_page_shows_progress_per_judge(study, researcher, provider: FakeProvider) -> None:  # type: ignore[no-untyped-def]
    judge = make_judge(base_url=provider.url, concurrency=1)
    comparison = study.comparisons.get(external_id="c1")
    JudgeOutput.objects.create(judge=judge, comparison=comparison, order="primary", status="valid", winner="A")
    JudgeOutput.objects.create(judge=judge, comparison=comparison, order="swapped", status="invalid")
    JudgeOutput.objects.create(judge=judge, comparison=comparison, order="primary", repeat=1)
    client = login(researcher)
    page = client.get("/studies/example/judges/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "judge-x" in html and "2 / 3" in html
    assert 'hx-trigger="every 2s"' in html  # a call is pending: keep polling
    partial = client.get("/studies/example/judges/", headers={"HX-Request": "true"})
    assert partial.status_code == 200
    body = partial.content.decode()
    assert body.lstrip().startswith('<section id="judge-progress"') and "<html" not in body
    assert "HX-Request" in partial["Vary"]


def test_finished_runs_stop_polling(study, researcher, provider: FakeProvider) -> None:  # type: ignore[no-untyped-def]
    judge = make_judge(base_url=provider.url)
    JudgeOutput.objects.create(judge=judge, comparison=study.comparisons.get(external_id="c1"), order="primary",
                               status="valid", winner="A")
    html = login(researcher).get("/studies/example/judges/").content.decode()
    assert "every 2s" not in html


def test_run_form_queues_calls(study, researcher, provider: FakeProvider, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    judge = make_judge(base_url=provider.url, concurrency=1)
    client = login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/studies/example/judges/run/", {"judge": judge.pk, "set": "human", "orders": ["primary"], "repeats": "1"}
        )
    assert response.status_code == 302
    # Tests run tasks eagerly: the calls ran on commit.
    assert set(JudgeOutput.objects.values_list("comparison__external_id", "status")) == {("c1", "valid"), ("c2", "valid")}
    again = client.post(
        "/studies/example/judges/run/", {"judge": judge.pk, "set": "human", "orders": ["primary"], "repeats": "1"},
        follow=True,
    )
    assert "0 calls queued (2 already done" in again.content.decode()
    assert len(provider.requests) == 2


def test_other_researchers_and_raters_cannot_see_or_run(study, other_researcher, rater_user, provider) -> None:  # type: ignore[no-untyped-def]
    judge = make_judge(base_url=provider.url)
    for user in (other_researcher, rater_user):
        client = login(user)
        assert client.get("/studies/example/judges/").status_code == 404
        assert client.post("/studies/example/judges/run/", {"judge": judge.pk}).status_code == 404
        assert client.get("/api/studies/example/judge-runs/").status_code in (403, 404)
    assert Client().get("/studies/example/judges/").status_code == 302
    assert not JudgeOutput.objects.exists()


def test_api_progress_and_run(study, researcher, provider: FakeProvider, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    make_judge(base_url=provider.url, concurrency=1)
    client = login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/studies/example/judge-runs/", {"judge": "judge-x", "orders": ["swapped"], "repeats": 1},
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    assert response.json() == {"judge": "judge-x", "calls": 3, "created": 3, "done": 0, "queued": 3}
    progress = client.get("/api/studies/example/judge-runs/").json()
    assert progress == [{"judge": "judge-x", "family": "acme", "provider": "openai", "total": 3, "done": 3,
                         "valid": 3, "invalid": 0, "failed": 0, "pending": 0, "input_tokens": 3600,
                         "output_tokens": 120, "cached_tokens": 0, "cost_usd": None, "cost_per_comparison_usd": None,
                         "reasons": []}]
    Judge.objects.filter(name="judge-x").update(price_input_per_mtok=2.5, price_output_per_mtok=10.0)
    priced = client.get("/api/studies/example/judge-runs/").json()[0]
    # 3,600 × $2.50 + 120 × $10 per million tokens, over 3 comparisons.
    assert priced["cost_usd"] == 0.0102 and priced["cost_per_comparison_usd"] == 0.0034
    bad = client.post("/api/studies/example/judge-runs/", {"judge": "nobody"}, content_type="application/json")
    assert bad.status_code == 404 and "no judge named" in bad.json()["detail"]


def test_only_admins_register_judges(researcher, admin_user) -> None:  # type: ignore[no-untyped-def]
    body = {"name": "api-judge", "family": "acme", "provider": "openai", "model": "m",
            "base_url": "http://127.0.0.1:9/v1", "api_key_env": "SOME_KEY", "rate": "2/s"}
    assert login(researcher).post("/api/judges/", body, content_type="application/json").status_code == 403
    admin = login(admin_user)
    created = admin.post("/api/judges/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["rate_per_second"] == 2.0
    refused = admin.post("/api/judges/", {**body, "name": "meta", "base_url": "http://169.254.169.254/"},
                         content_type="application/json")
    assert refused.status_code == 400 and "link-local" in refused.json()["detail"]
    assert [j["name"] for j in login(researcher).get("/api/judges/").json()] == ["api-judge"]
    gemini = admin.post("/api/judges/", {"name": "g", "provider": "gemini", "model": "gemini-2.5-flash",
                                         "base_url": "", "price_input_per_mtok": "0.3", "price_output_per_mtok": "2.5",
                                         "send_temperature": False, "reasoning_effort": "low"},
                        content_type="application/json")
    assert gemini.status_code == 201, gemini.content
    assert gemini.json()["base_url"] == "https://generativelanguage.googleapis.com"
    assert (gemini.json()["price_output_per_mtok"], gemini.json()["send_temperature"]) == (2.5, False)
    cheap = admin.post("/api/judges/", {**body, "name": "cheap", "price_input_per_mtok": "cheap"},
                       content_type="application/json")
    assert cheap.status_code == 400 and "expected a price in dollars per million tokens" in cheap.json()["detail"]


def test_admin_pages(make_user, provider: FakeProvider) -> None:  # type: ignore[no-untyped-def]
    make_judge(base_url=provider.url)
    client = login(make_user("root", is_staff=True, is_superuser=True))
    assert client.get("/admin/judges/judge/").status_code == 200
    assert client.get("/admin/judges/judgeoutput/").status_code == 200
    response = client.post("/admin/judges/judge/add/", {
        "name": "meta", "family": "", "provider": "openai", "model": "m", "base_url": "http://169.254.169.254/v1",
        "api_key_env": "", "concurrency": 4, "timeout_seconds": 120, "max_invalid_retries": 2,
        "max_transport_retries": 5, "max_attempts": 10, "max_tokens": 1024,
    })
    assert response.status_code == 200 and "link-local" in response.content.decode()
    assert not Judge.objects.filter(name="meta").exists()


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_page_answers_at_once_and_shows_the_calls_finishing(  # type: ignore[no-untyped-def]
    researcher, settings
) -> None:
    """The embedded default (``make run``): "Run judges" answers before the calls are done, the
    page polls while they run in a thread of the process, and every call ends valid once."""
    import threading
    import time

    from django.db import connection

    if connection.vendor == "sqlite":
        pytest.skip("threads need a server database (in-memory SQLite is per-connection locked)")
    settings.ARBITER_JUDGES_IN_BACKGROUND = True
    provider = FakeProvider(delay=0.4)
    provider.start()
    try:
        study = make_example_study()
        study.researchers.add(researcher)
        judge = make_judge(base_url=provider.url, concurrency=1)
        client = login(researcher)
        started = time.monotonic()
        response = client.post(
            "/studies/example/judges/run/", {"judge": judge.pk, "orders": ["primary", "swapped"], "repeats": "1"}
        )
        answered = time.monotonic() - started
        assert response.status_code == 302
        page = client.get("/studies/example/judges/").content.decode()
        assert 'hx-trigger="every 2s"' in page  # still running: the page polls
        calls = JudgeOutput.objects.filter(judge=judge).count()
        assert calls >= 4 and answered < 0.4 * calls  # it did not wait for the calls
        for thread in [t for t in threading.enumerate() if t.name == "arbiter-judges"]:
            thread.join(timeout=60)
        assert set(JudgeOutput.objects.filter(judge=judge).values_list("status", flat=True)) == {"valid"}
        assert len(provider.requests) == calls
        assert 'hx-trigger="every 2s"' not in client.get("/studies/example/judges/").content.decode()
    finally:
        provider.stop()
