"""Uploads made into studies by a Celery worker when a broker is configured
(annotation.services.new_study_runs): the upload page stores the .zip and queues the run on commit,
the run's page polls its progress, the worker's task makes the study and writes progress while
the HTML pages render; a second delivery does nothing. Without a broker the request does it all
(the other upload tests). The broker is stood in for by recording what would be queued."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import default_storage
from django.test import Client

from annotation.models import Candidate, NewStudyRun, Study
from annotation.services import new_study_runs
from annotation.tasks import new_study_run_task
from tests.annotation.render.conftest import browser_available
from tests.annotation.test_new_study import png, zipped

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(settings: Any, monkeypatch: Any) -> list[int]:
    """A broker is configured; the ids the page queues (on commit) are recorded instead of sent."""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    sent: list[int] = []
    monkeypatch.setattr(new_study_run_task, "delay", lambda run_id: sent.append(run_id))
    return sent


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    for i in range(2):
        png(root / "refs" / f"p{i}.png", size=(400, 300), shade=10 * i)
        png(root / "out" / "gpt" / f"p{i}.png", size=(400, 300), shade=10 * i + 1)
    (root / "out" / "claude").mkdir(parents=True)
    for i in range(2):
        (root / "out" / "claude" / f"p{i}.html").write_text(
            f"<body style='margin:0'><h1>Page {i}</h1></body>"
        )
    return root


def test_the_page_queues_a_run_and_the_worker_makes_the_study(
    folders: Path,
    researcher: Any,
    other_researcher: Any,
    queued: list[int],
    django_capture_on_commit_callbacks: Any,
    monkeypatch: Any,
) -> None:
    browser_available()
    client = Client()
    client.force_login(researcher)
    form = {
        "kind": "pairwise_reference",
        "reference": "refs",
        "slug": "by-worker",
        "render_failures": "aescode",
    }
    form["options"] = json.dumps({"render": {"viewport": "400x300", "mode": "canvas", "settle_ms": 100}})
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/studies/new/", {**form, "archive": zipped(folders)})
    run = NewStudyRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/studies/new/runs/{run.token}/"
    assert (
        queued == [run.pk] and run.status == "queued" and not Study.objects.exists()
    )  # nothing rendered yet
    assert default_storage.exists(run.archive) and run.archive_name == "folders.zip"
    assert run.parameters["options"]["render"]["failure_rule"] == "aescode"
    page = client.get(f"/studies/new/runs/{run.token}/").content.decode()
    assert "Queued: waiting for a worker" in page and f'hx-get="/studies/new/runs/{run.token}/"' in page
    # Another researcher does not see the run.
    other = Client()
    other.force_login(other_researcher)
    assert other.get(f"/studies/new/runs/{run.token}/").status_code == 404

    # The worker: the rendering's progress is written to the row as it goes.
    seen: list[tuple[str, int | None, int | None]] = []
    original = new_study_runs.progress_reported

    def spying(report: Any, detail: Any = None) -> Any:
        def both(stage: str, done: int | None, total: int | None) -> None:
            report(stage, done, total)
            row = NewStudyRun.objects.get(pk=run.pk)
            seen.append((row.stage, row.done, row.total))

        return original(both, detail)

    monkeypatch.setattr(new_study_runs, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(new_study_runs, "progress_reported", spying)
    assert new_study_run_task(run.pk) == "done"
    assert ("rendering HTML pages: claude", 2, 2) in seen
    assert ("rendering HTML pages: claude", 1, 2) in seen
    archive = run.archive
    run.refresh_from_db()
    assert run.status == "done" and run.study is not None and run.study.slug == "by-worker"
    assert run.study.options["render"]["failure_rule"] == "aescode"
    assert (
        Candidate.objects.filter(page__study=run.study, system__external_id="claude", rendered=True).count()
        == 2
    )
    assert run.progress["groups"] == {"claude": {"rendered": 2, "failed": 0}} and run.progress["rendered"] == 2
    assert not default_storage.exists(archive) and run.archive == ""  # the upload is dropped once made
    polled = client.get(f"/studies/new/runs/{run.token}/", HTTP_HX_REQUEST="true")
    assert polled["HX-Redirect"] == "/studies/by-worker/" and "hx-get" not in polled.content.decode()
    assert new_study_run_task(run.pk) == "not queued"  # a second delivery does nothing


def test_a_running_run_shows_its_progress_and_a_failed_one_its_error(
    folders: Path, researcher: Any, queued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    client = Client()
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            "/studies/new/",
            {"kind": "pairwise_reference", "reference": "nowhere", "slug": "bad", "archive": zipped(folders)},
        )
    run = NewStudyRun.objects.get()
    NewStudyRun.objects.filter(pk=run.pk).update(
        status="running", stage="rendering HTML pages (folder 1 of 2)", done=3, total=8
    )
    polled = client.get(f"/studies/new/runs/{run.token}/", HTTP_HX_REQUEST="true").content.decode()
    assert (
        '<span id="new-study-run-count">3 of 8</span>' in polled and '<progress max="8" value="3">' in polled
    )
    assert 'hx-trigger="every 1s"' in polled and "<h1>" not in polled  # the partial only
    assert 'id="new-study-cancel"' in polled
    archive = run.archive
    NewStudyRun.objects.filter(pk=run.pk).update(status="queued")
    assert new_study_run_task(run.pk) == "failed"  # no reference folder "nowhere" in the upload
    run.refresh_from_db()
    assert run.status == "failed" and "nowhere" in run.error and "\n" not in run.error
    page = client.get(f"/studies/new/runs/{run.token}/").content.decode()
    assert 'id="new-study-error"' in page and "hx-get" not in page
    assert not Study.objects.exists() and archive and not default_storage.exists(archive)


def test_computed_before_the_answer_the_page_goes_to_the_study(folders: Path, researcher: Any) -> None:
    """With ARBITER_TASKS_IN_BACKGROUND=0 and no broker (the tests' setting) the run is made before the
    page answers, and the page goes to the study (tests/annotation/test_new_study_background.py: in
    the background, as `make run` does)."""
    client = Client()
    client.force_login(researcher)
    png(folders / "out" / "claude" / "p0.png", size=(400, 300))  # no HTML: no browser needed
    png(folders / "out" / "claude" / "p1.png", size=(400, 300))
    for html in (folders / "out" / "claude").glob("*.html"):
        html.unlink()
    response = client.post(
        "/studies/new/",
        {"kind": "pairwise_reference", "reference": "refs", "slug": "in-request", "archive": zipped(folders)},
    )
    assert response.status_code == 302 and response["Location"] == "/studies/in-request/"
    run = NewStudyRun.objects.get()
    assert run.status == "done" and Study.objects.filter(slug="in-request").exists() and run.archive == ""


def test_the_api_answers_202_with_the_run_and_then_its_result(
    folders: Path,
    researcher: Any,
    other_researcher: Any,
    queued: list[int],
    django_capture_on_commit_callbacks: Any,
) -> None:
    from rest_framework.test import APIClient

    for i in range(2):  # images only: no browser needed
        (folders / "out" / "claude" / f"p{i}.html").unlink()
        png(folders / "out" / "claude" / f"p{i}.png", size=(400, 300))
    api = APIClient()
    api.force_authenticate(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        made = api.post(
            "/api/studies/new/",
            {
                "kind": "pairwise_reference",
                "reference": "refs",
                "slug": "api-worker",
                "file": zipped(folders),
            },
            format="multipart",
        )
    assert made.status_code == 202, made.content
    run = NewStudyRun.objects.get()
    assert queued == [run.pk]
    assert (
        made.json()["run"] == run.token and made.json()["status"] == "queued" and made.json()["slug"] is None
    )
    url = made.json()["url"]
    assert url == f"/api/studies/new/runs/{run.token}/"
    stranger = APIClient()
    stranger.force_authenticate(other_researcher)
    assert stranger.get(url).status_code == 404
    assert new_study_run_task(run.pk) == "done"
    done = api.get(url).json()
    assert (
        done["status"] == "done"
        and done["slug"] == "api-worker"
        and "system claude: 2 images" in done["report"]
    )
    assert Study.objects.filter(slug="api-worker", researchers=researcher).exists()


@pytest.mark.slow
def test_on_a_cluster_the_upload_waits_in_the_bucket_and_is_removed_once_made(
    folders: Path,
    researcher: Any,
    queued: list[int],
    django_capture_on_commit_callbacks: Any,
    s3_media: str,
    s3_server: Any,
) -> None:
    """``ARBITER_MEDIA_STORAGE=s3`` (a real S3-compatible server on loopback): the worker on another
    node reads the upload from the bucket, and the bucket keeps only the study's images after."""
    for i in range(2):  # images only: no browser needed
        (folders / "out" / "claude" / f"p{i}.html").unlink()
        png(folders / "out" / "claude" / f"p{i}.png", size=(400, 300))
    client = Client()
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            "/studies/new/",
            {"kind": "pairwise_reference", "reference": "refs", "slug": "s3-run", "archive": zipped(folders)},
        )
    run = NewStudyRun.objects.get()
    assert s3_server.keys(s3_media) == [run.archive] and run.archive.startswith("new-study/")
    assert new_study_run_task(run.pk) == "done"
    keys = s3_server.keys(s3_media)
    assert keys and all(key.startswith("images/") for key in keys)  # the upload is gone, the images are there
    assert Candidate.objects.filter(page__study__slug="s3-run").count() == 4


def images_only(folders: Path) -> None:
    """The "claude" pages as images: the run needs no browser."""
    for i in range(2):
        (folders / "out" / "claude" / f"p{i}.html").unlink()
        png(folders / "out" / "claude" / f"p{i}.png", size=(400, 300))


def queued_run(client: Client, folders: Path, slug: str, capture: Any) -> NewStudyRun:
    with capture(execute=True):
        client.post(
            "/studies/new/",
            {"kind": "pairwise_reference", "reference": "refs", "slug": slug, "archive": zipped(folders)},
        )
    return NewStudyRun.objects.get(parameters__options__slug=slug)


def test_a_run_held_by_a_live_lease_waits_and_a_run_whose_lease_ran_out_is_taken_over(
    folders: Path, researcher: Any, queued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    """The worker that claimed the run died (its lease is not renewed): a delivery while the lease
    runs is held off, one after it takes the run over and makes the study; a later one does nothing."""
    from datetime import timedelta

    from django.utils import timezone

    images_only(folders)
    client = Client()
    client.force_login(researcher)
    run = queued_run(client, folders, "taken-over", django_capture_on_commit_callbacks)
    lease = timezone.now() + timedelta(seconds=60)
    NewStudyRun.objects.filter(pk=run.pk).update(status="running", claim="dead-worker", attempts=1, lease_until=lease)
    assert new_study_runs.new_study_run_execute(run_id=run.pk) == "held"
    assert 0 < new_study_runs.held_seconds(run.pk) <= 60
    run.refresh_from_db()
    assert (run.status, run.claim, run.attempts, run.lease_until) == ("running", "dead-worker", 1, lease)
    NewStudyRun.objects.filter(pk=run.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert new_study_runs.new_study_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and run.attempts == 2 and run.claim != "dead-worker" and run.lease_until is None
    assert Study.objects.filter(slug="taken-over").count() == 1 and run.study is not None
    assert not new_study_runs.new_study_run_fail(run.pk, "late", claim="dead-worker")  # no longer the holder
    assert new_study_runs.new_study_run_execute(run_id=run.pk) == "not queued"
    assert NewStudyRun.objects.get(pk=run.pk).status == "done"


def test_a_holder_that_lost_the_run_cannot_fail_it(
    folders: Path, researcher: Any, queued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    client = Client()
    client.force_login(researcher)
    run = queued_run(client, folders, "lost", django_capture_on_commit_callbacks)
    claim = new_study_runs.new_study_run_claim(run_id=run.pk)
    assert claim and new_study_runs.new_study_run_claim(run_id=run.pk) is None  # held: not claimed twice
    assert not new_study_runs.new_study_run_fail(run.pk, "stale", claim="someone-else")
    assert NewStudyRun.objects.get(pk=run.pk).status == "running" and default_storage.exists(run.archive)
    assert new_study_runs.new_study_run_fail(run.pk, "the reference\nfolder is missing", claim=claim)
    archive = run.archive
    run.refresh_from_db()
    assert run.status == "failed" and run.error == "the reference folder is missing" and run.lease_until is None
    assert not default_storage.exists(archive) and run.archive == ""


def test_the_sweep_queues_runs_whose_worker_died_and_fails_those_out_of_attempts(
    folders: Path, researcher: Any, queued: list[int], django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from annotation import tasks

    client = Client()
    client.force_login(researcher)
    runs = {slug: queued_run(client, folders, slug, django_capture_on_commit_callbacks) for slug in (
        "expired", "live", "exhausted", "done", "waiting", "fresh")}
    queued.clear()
    now = timezone.now()
    past, future = now - timedelta(seconds=1), now + timedelta(seconds=60)

    def set_run(slug: str, **fields: Any) -> None:
        NewStudyRun.objects.filter(pk=runs[slug].pk).update(**fields)

    set_run("expired", status="running", attempts=1, lease_until=past)
    set_run("live", status="running", attempts=1, lease_until=future)
    set_run("exhausted", status="running", attempts=new_study_runs.MAX_ATTEMPTS, lease_until=past)
    set_run("done", status="done", attempts=1, lease_until=None)
    set_run("waiting", created_at=now - timedelta(hours=1))  # queued; its message may be lost
    # A queued run waits in the broker's queue: re-queued only when the queue is empty.
    assert new_study_runs.new_study_runs_sweep(queue_empty=False) == [runs["expired"].pk]
    exhausted = NewStudyRun.objects.get(pk=runs["exhausted"].pk)
    assert exhausted.status == "failed" and f"{new_study_runs.MAX_ATTEMPTS} times" in exhausted.error
    assert exhausted.archive == "" and not default_storage.exists(runs["exhausted"].archive)
    monkeypatch.setattr(tasks, "broker_queue_empty", lambda queue=None: True)
    assert tasks.sweep_new_study_runs() == 2
    assert queued == [runs["expired"].pk, runs["waiting"].pk]
    assert NewStudyRun.objects.get(pk=runs["live"].pk).status == "running"  # its worker is alive


@pytest.mark.django_db(transaction=True)
def test_the_holder_renews_its_lease_while_it_works(folders: Path, settings: Any) -> None:
    """The lease thread renews every third of the lease (here 0.3 s of 0.9 s) until the work ends."""
    settings.ARBITER_NEW_STUDY_LEASE_SECONDS = 0.9
    run = NewStudyRun.objects.create(archive="new-study/x.zip", archive_name="x.zip")
    claim = new_study_runs.new_study_run_claim(run_id=run.pk)
    assert claim
    first = NewStudyRun.objects.get(pk=run.pk).lease_until
    with new_study_runs._Lease(run.pk, claim) as lease:
        assert lease.thread.is_alive()
        renewed = first
        for _ in range(100):  # bounded: up to 10 s
            renewed = NewStudyRun.objects.get(pk=run.pk).lease_until
            if renewed != first:
                break
            lease.stopped.wait(0.1)
        assert renewed is not None and first is not None and renewed > first
    assert not lease.thread.is_alive()


def test_the_api_makes_a_finished_dry_run_into_the_study_once(
    folders: Path, researcher: Any, other_researcher: Any, queued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    from rest_framework.test import APIClient

    images_only(folders)
    api = APIClient()
    api.force_authenticate(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        dry = api.post(
            "/api/studies/new/",
            {"kind": "pairwise_reference", "reference": "refs", "slug": "api-dry", "file": zipped(folders), "dry_run": "true"},
            format="multipart",
        )
    assert dry.status_code == 202 and dry.json()["dry_run"] is True
    url = dry.json()["url"]
    assert api.post(url).status_code == 409  # not finished yet
    assert new_study_run_task(queued[-1]) == "done"
    stranger = APIClient()
    stranger.force_authenticate(other_researcher)
    assert stranger.post(url).status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        made = api.post(url)
    assert made.status_code == 202 and made.json()["dry_run"] is False and made.json()["status"] == "queued"
    assert new_study_run_task(queued[-1]) == "done"
    done = api.get(made.json()["url"]).json()
    assert done["status"] == "done" and done["slug"] == "api-dry" and done["progress"]["counts"]["candidates"] == 4
    assert api.post(url).status_code == 409  # its upload was taken: not made twice
    assert Study.objects.filter(slug="api-dry").count() == 1
