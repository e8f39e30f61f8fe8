"""Uploads made into studies by a real Celery worker (marked ``broker`` and ``serial``): the API
answers 202, the worker renders the HTML pages and makes the study, the run's address reports it;
a worker SIGKILLed mid-render loses nothing and duplicates nothing (docs/new-study.md "Upload page
and API"). The upload helpers are tests/annotation/test_new_study_runs.py's.

Run with PostgreSQL, Redis and Chromium, e.g.
DATABASE_URL=postgres://postgres@127.0.0.1:5432/arb_uprun CELERY_BROKER_URL=redis://127.0.0.1:6379/11 \
    .venv/bin/python -m pytest tests/annotation/test_new_study_runs_worker.py -q
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Candidate, NewStudyRun, Study
from tests.annotation.render.conftest import browser_available
from tests.annotation.test_new_study import png, zipped

pytestmark = [pytest.mark.broker, pytest.mark.serial]

PAGES = 12  # HTML pages of the "claude" system, each rendered on the worker
WAIT_SECONDS = 180  # bound on every wait for the worker (Chromium start-up on a loaded machine included)
LEASE_SECONDS = 4  # the workers' lease on a run (ARBITER_NEW_STUDY_LEASE_SECONDS), short for the test


@pytest.fixture
def worker_env(tmp_path: Path, settings: Any, monkeypatch: Any) -> None:
    """Uploads run on workers; the workers started after this (``celery_worker_process``, listed
    after it, and ``start_worker``) take the test's short lease and keep their bundles in tmp."""
    browser_available()
    settings.CELERY_TASK_ALWAYS_EAGER = False  # runs_on_workers(): the API queues the run
    settings.ARBITER_NEW_STUDY_LEASE_SECONDS = LEASE_SECONDS
    monkeypatch.setenv("ARBITER_NEW_STUDY_LEASE_SECONDS", str(LEASE_SECONDS))
    monkeypatch.setenv("ARBITER_BUNDLE_ARCHIVE", str(tmp_path / "bundles"))


@pytest.fixture
def upload(tmp_path: Path) -> Any:
    """refs/p*.png and out/claude/p*.html: PAGES pages, each rendered with a settle time."""
    root = tmp_path / "in"
    for i in range(PAGES):
        png(root / "refs" / f"p{i}.png", size=(400, 300), shade=10 * i)
        page = root / "out" / "claude" / f"p{i}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<body style='margin:0'><h1>Page {i}</h1></body>")
    return zipped(root, names=("refs", "out/claude"))


def post_upload(researcher: Any, upload: Any, slug: str) -> tuple[APIClient, str]:
    """POST /api/studies/new/ with the researcher's token: 202 and the run's address."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=researcher).key}")
    options = {"render": {"viewport": "400x300", "mode": "canvas", "settle_ms": 300}}
    made = api.post(
        "/api/studies/new/",
        {"kind": "pairwise_reference", "reference": "refs", "slug": slug, "options": json.dumps(options),
         "file": upload},
        format="multipart",
    )
    assert made.status_code == 202, made.content
    body = made.json()
    # The answer reads the run back after queueing it: a real worker may have started it by then.
    assert body["status"] in ("queued", "running") and body["url"] == f"/api/studies/new/runs/{body['run']}/"
    return api, body["url"]


def poll_until(api: APIClient, url: str, ended: Any, seen: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    """GET the run's address until ``ended(body)`` (bounded); every (status, done, total) seen."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        body = api.get(url).json()
        seen.append((body["status"], body["done"], body["total"]))
        if ended(body):
            return body
        assert time.monotonic() < deadline, f"the run did not get there in {WAIT_SECONDS} s: {body}"
        time.sleep(0.2)


def stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def test_the_worker_renders_the_upload_and_the_api_reports_the_study(
    worker_env: None, researcher: Any, upload: Any, celery_worker_process: Any
) -> None:
    api, url = post_upload(researcher, upload, "worker-made")
    seen: list[tuple[str, Any, Any]] = []
    leases: set[Any] = set()

    def ended(body: dict[str, Any]) -> bool:
        leases.update(NewStudyRun.objects.filter(status="running").values_list("lease_until", flat=True))
        return body["status"] in ("done", "failed")

    body = poll_until(api, url, ended, seen)
    assert body["status"] == "done" and body["slug"] == "worker-made", body
    assert f"rendered claude: {PAGES} pages rendered, 0 failed" in body["report"], body["report"]
    study = Study.objects.get(slug="worker-made", researchers=researcher)
    assert Candidate.objects.filter(page__study=study, system__external_id="claude", rendered=True).count() == PAGES
    run = NewStudyRun.objects.get()
    assert run.study_id == study.pk and run.attempts == 1 and run.lease_until is None
    # The poll saw the pages rendering, then the run done with its last stage's progress at its total.
    assert any(s == "running" and t == PAGES and d is not None and d < PAGES for s, d, t in seen), seen
    assert seen[-1][0] == "done" and seen[-1][2] and seen[-1][1] == seen[-1][2], seen
    assert (run.done, run.total) == seen[-1][1:]
    # The holder renewed its lease while it rendered (the run takes longer than a third of a lease).
    assert len(leases - {None}) >= 2, leases
    # The upload is dropped once made, and the run forgets its name.
    assert run.archive == "" and not list(Path(django_settings.MEDIA_ROOT).rglob("*.zip"))


def test_a_pool_child_killed_mid_render_hands_the_run_to_the_redelivery(
    worker_env: None, researcher: Any, upload: Any, celery_worker_process: Any
) -> None:
    """SIGKILL of the prefork children mid-render: the master returns the message at once
    (``reject_on_worker_lost``); the delivery finds the dead child's lease live, waits it out
    ("held") and takes the run over; no sweep needed, one study made."""
    from tests.judges.test_faults_worker import children_of

    api, url = post_upload(researcher, upload, "survives-a-child-kill")
    seen: list[tuple[str, Any, Any]] = []
    body = poll_until(api, url, lambda b: b["status"] in ("done", "failed") or (b["total"] == PAGES and bool(b["done"])), seen)
    assert body["status"] == "running" and 0 < body["done"] < PAGES, body  # killed while it renders
    children = children_of(celery_worker_process.pid)
    assert children
    for child in children:  # the master lives on and forks new children
        os.kill(child, signal.SIGKILL)
    body = poll_until(api, url, lambda b: b["status"] in ("done", "failed"), seen)
    assert body["status"] == "done" and body["slug"] == "survives-a-child-kill", body
    assert Study.objects.count() == 1
    run = NewStudyRun.objects.get()
    assert run.attempts == 2 and run.study is not None and run.study.slug == "survives-a-child-kill"
    assert (
        Candidate.objects.filter(page__study=run.study, system__external_id="claude", rendered=True).count() == PAGES
    )


def test_a_worker_killed_mid_render_loses_the_run_to_a_new_worker_and_one_study_is_made(
    worker_env: None, researcher: Any, upload: Any, celery_worker_process: Any
) -> None:
    """SIGKILL of the whole worker (master and pool) mid-render: Redis keeps its unacknowledged
    message until the visibility timeout, so the beat sweep (called here) re-queues the run once its
    lease has run out, and a new worker takes it over and makes the study, once."""
    from django.utils import timezone

    from annotation.services.new_study_runs import new_study_run_execute
    from annotation.tasks import sweep_new_study_runs
    from tests.judges.test_worker import start_worker

    api, url = post_upload(researcher, upload, "survives-a-kill")
    seen: list[tuple[str, Any, Any]] = []
    body = poll_until(api, url, lambda b: b["status"] in ("done", "failed") or (b["total"] == PAGES and bool(b["done"])), seen)
    assert body["status"] == "running" and 0 < body["done"] < PAGES, body  # killed while it renders
    os.killpg(celery_worker_process.pid, signal.SIGKILL)
    celery_worker_process.wait(10)
    run = NewStudyRun.objects.get()
    assert run.status == "running" and run.attempts == 1 and run.lease_until is not None
    replacement = start_worker()
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while NewStudyRun.objects.filter(pk=run.pk, lease_until__gte=timezone.now()).exists():
            assert time.monotonic() < deadline, "the dead worker's lease never ran out"
            time.sleep(0.2)
        assert sweep_new_study_runs() == 1  # the run, whose message the dead worker holds
        body = poll_until(api, url, lambda b: b["status"] in ("done", "failed"), seen)
        assert body["status"] == "done" and body["slug"] == "survives-a-kill", body
        assert Study.objects.count() == 1
        study = Study.objects.get(slug="survives-a-kill")
        assert Candidate.objects.filter(page__study=study, system__external_id="claude", rendered=True).count() == PAGES
        run.refresh_from_db()
        assert run.study_id == study.pk and run.attempts == 2 and run.done == run.total
        assert sweep_new_study_runs() == 0  # nothing left to take over
        assert new_study_run_execute(run_id=run.pk) == "not queued"  # a late delivery does nothing
        assert NewStudyRun.objects.get(pk=run.pk).finished_at == run.finished_at
    finally:
        stop(replacement)
        # The dead worker's message waits in Redis's unacknowledged set until the visibility
        # timeout; drop it so a later test's worker does not get a run id of this test.
        from config.celery_app import app

        with app.connection_for_write() as conn:
            channel = conn.default_channel
            channel.client.delete(channel.unacked_key, channel.unacked_index_key)
