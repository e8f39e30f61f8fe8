"""Without a broker (the embedded default of ``make run``), a plan or a leaderboard started from its page
runs in a thread of the process once its row is committed (``annotation.task_queue``): the form's
request answers with the run queued, the page it leads to shows the progress indicator and its htmx
poll, and the poll then finds the result. With ``ARBITER_TASKS_IN_BACKGROUND`` off the run happens
inside the request, as Celery's eager mode does it (the behaviour these tests would catch coming back).

On SQLite the thread is recorded and run by the test after the request (an in-memory test database
is locked per connection); on PostgreSQL a real thread runs it while the test polls the page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from ranking import tasks
from ranking.models import Leaderboard, StudyPlanRun
from tests.ranking.rank_factories import add_votes, make_ranked_study
from tests.task_threads import RecordedThread, record_task_threads

# These tests are about the thread and the poll, not the plan: a Brier plan (tests/ranking/test_plan_page.py's
# CHEAP), computed in a fraction of a second where a κ plan takes seconds, checked on 20 fresh studies
# (the page's default check on 200, tested there, took 2-3 times the plan itself).
QUICK_PLAN = {"target": "brier", "half_width": "0.04", "systems": "4", "studies": "10", "seed": "2", "verify": "20"}
POLL = 'hx-trigger="every 2s"'


@pytest.fixture
def recorded_threads(settings, monkeypatch) -> list[RecordedThread]:  # type: ignore[no-untyped-def]
    return record_task_threads(settings, monkeypatch)


@pytest.fixture
def computed_in(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """The names of the threads in which a plan or a leaderboard was computed."""
    threads: list[str] = []

    def spy(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(**kwargs: Any) -> Any:
            threads.append(threading.current_thread().name)
            return function(**kwargs)

        return wrapped

    monkeypatch.setattr(tasks, "study_plan_run_execute", spy(tasks.study_plan_run_execute))
    monkeypatch.setattr(tasks, "leaderboard_run", spy(tasks.leaderboard_run))
    return threads


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_plan_answers_queued_shows_progress_and_its_thread_fills_it_in(
    researcher, recorded_threads, computed_in, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("ranking:plan"), QUICK_PLAN)
    run = StudyPlanRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "ranking:plan-detail", args=[run.pk]
    )
    # Committed: the run went to a daemon thread, not into the request.
    assert run.status == StudyPlanRun.Status.QUEUED and computed_in == []
    [thread] = recorded_threads
    assert thread.started and thread.daemon and thread.args == (tasks.study_plan_run_task, (run.pk,))
    page = client.get(response["Location"]).content.decode()
    status_url = reverse("ranking:plan-status", args=[run.pk])
    assert f'hx-get="{status_url}"' in page and POLL in page and "<progress" in page and "simulating" in page
    assert 'id="votes-needed"' not in page
    thread.run()
    run.refresh_from_db()
    assert run.status == StudyPlanRun.Status.DONE and computed_in == ["MainThread"]
    fragment = client.get(status_url).content.decode()
    assert POLL not in fragment and f'id="votes-needed">{run.result["votes_needed"]}<' in fragment


@pytest.mark.django_db
def test_with_the_setting_off_the_plan_is_computed_before_the_page_answers(
    researcher, settings, computed_in, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_TASKS_IN_BACKGROUND = False
    with django_capture_on_commit_callbacks(execute=True):
        login(researcher).post(reverse("ranking:plan"), QUICK_PLAN)
    assert StudyPlanRun.objects.get().status == StudyPlanRun.Status.DONE and computed_in == ["MainThread"]


@pytest.mark.django_db
def test_a_leaderboard_answers_queued_its_row_polls_and_its_thread_fills_it_in(
    researcher, recorded_threads, computed_in, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("lb-thread", n_pages=10, researchers=[researcher])
    client = login(researcher)
    url = reverse("ranking:leaderboards", args=[ranked.study.slug])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url, {"coefficients": "frozen", "bootstrap": "30", "seed": "5", "model": "davidson"}
        )
    leaderboard = Leaderboard.objects.get(study=ranked.study)
    assert (
        response.status_code == 302 and leaderboard.status == Leaderboard.Status.QUEUED and computed_in == []
    )
    [thread] = recorded_threads
    assert thread.args == (tasks.leaderboard_run_task, (leaderboard.pk,))
    row_url = reverse("ranking:row", args=[ranked.study.slug, leaderboard.pk])
    listing = client.get(url).content.decode()
    assert f'hx-get="{row_url}"' in listing and POLL in listing and "<progress" in listing
    # The leaderboard's own page, opened while it runs, polls its status too.
    detail_url = reverse("ranking:detail", args=[ranked.study.slug, leaderboard.pk])
    detail = client.get(detail_url)
    assert f'hx-get="{detail_url}"' in detail.content.decode() and "<progress" in detail.content.decode()
    assert detail["Cache-Control"] == "no-store" and "HX-Request" in detail["Vary"]
    running_poll = client.get(detail_url, headers={"HX-Request": "true"})
    assert "HX-Refresh" not in running_poll and 'id="lb-status"' in running_poll.content.decode()
    thread.run()
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.DONE, leaderboard.error
    # Done: the page's poll reloads the whole page, which shows the leaderboard and polls no more.
    assert client.get(detail_url, headers={"HX-Request": "true"})["HX-Refresh"] == "true"
    done = client.get(detail_url).content.decode()
    assert (
        POLL not in done
        and "<progress" not in done
        and reverse("ranking:download", args=[ranked.study.slug, leaderboard.pk, "csv"]) in done
    )
    row = client.get(row_url).content.decode()
    assert (
        POLL not in row
        and reverse("ranking:download", args=[ranked.study.slug, leaderboard.pk, "json"]) in row
    )


@pytest.mark.django_db
def test_an_error_in_the_thread_marks_the_run_failed_and_the_poll_stops(
    researcher, recorded_threads, monkeypatch, django_capture_on_commit_callbacks, caplog
) -> None:  # type: ignore[no-untyped-def]
    def broken(*, run_id: int) -> str:
        raise RuntimeError("simulated")

    monkeypatch.setattr(tasks, "study_plan_run_execute", broken)
    client = login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("ranking:plan"), QUICK_PLAN)
    run = StudyPlanRun.objects.get()
    recorded_threads[0].run()  # logs the error instead of raising it out of the thread
    run.refresh_from_db()
    assert run.status == StudyPlanRun.Status.FAILED and run.error == "internal error (RuntimeError)"
    assert "task ranking.study_plan_run" in caplog.text and "RuntimeError: simulated" in caplog.text
    assert POLL not in client.get(reverse("ranking:plan-status", args=[run.pk])).content.decode()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_a_server_database_a_real_thread_computes_while_the_page_polls(
    researcher, settings, computed_in
) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_TASKS_IN_BACKGROUND = True
    ranked = make_ranked_study("pilot-thread", n_pages=8, n_human_pages=8, researchers=[researcher])
    add_votes(ranked, rng=np.random.default_rng(4), n_raters=3)
    client = login(researcher)
    response = client.post(
        reverse("ranking:plan-study", args=["pilot-thread"]),
        {"pilot": "pilot-thread", "target": "top_k", "k": "2", "studies": "40", "seed": "1"},
    )
    run = StudyPlanRun.objects.get()
    assert response.status_code == 302
    status_url = reverse("ranking:plan-status", args=[run.pk])
    fragment = client.get(status_url).content.decode()
    if StudyPlanRun.objects.get().is_active:  # not yet done: the fragment polls
        assert POLL in fragment and "<progress" in fragment
    for thread in [t for t in threading.enumerate() if t.name == "arbiter-task"]:
        thread.join(timeout=120)
    deadline = time.monotonic() + 5
    while StudyPlanRun.objects.get().is_active and time.monotonic() < deadline:
        time.sleep(0.1)
    run.refresh_from_db()
    assert run.status == StudyPlanRun.Status.DONE, run.error
    assert computed_in == ["arbiter-task"]  # computed in the thread, never in the request's
    assert POLL not in client.get(status_url).content.decode()
