"""Without a broker (the embedded default of ``make run``) an upload is made into a study in the web
process's background queue, never inside the request (issue 45 Deliver 7, issue 50 Deliver 2): the
form answers with the run queued and its page, which shows the stage, pages rendered of all, per
system rendered and failed with reasons, and a cancel button; the real run started from the dry
run's result renders nothing again; a researcher's runs render one at a time; every error names
the files as uploaded.

On SQLite the queue's thread is recorded and run by the test after the request (an in-memory test
database is locked per connection; ``tests/task_threads.py``).
``tests/annotation/test_new_study_live.py`` runs a real server with its real threads.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files.storage import default_storage
from django.test import Client
from django.utils import timezone

from annotation.models import Candidate, NewStudyRun, Study
from annotation.render import pages as render_pages
from annotation.services import new_study_runs
from annotation.tasks import new_study_run_task
from tests.annotation.render.conftest import browser_available
from tests.annotation.test_new_study import png, zipped
from tests.task_threads import RecordedThread, record_task_threads

pytestmark = pytest.mark.django_db

RENDER = {"render": {"viewport": "400x300", "mode": "canvas", "settle_ms": 50}}
AXES = {"axes": [{"id": "TABLES", "title": "Tables and their cells", "scope": "fixed"}, {"id": "GLOBAL_LAYOUT", "scope": "fixed"}]}


@pytest.fixture
def recorded_threads(settings: Any, monkeypatch: Any) -> list[RecordedThread]:
    return record_task_threads(settings, monkeypatch)


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """refs/p0, p1 (PNG); gpt and claude with an HTML page each for p0 and p1 (claude's p1 blank,
    a failed render), and a photo and a font beside the pages (assets, not study files)."""
    root = tmp_path / "in"
    for i in range(2):
        png(root / "refs" / f"p{i}.png", size=(400, 300), shade=10 * i)
    for system in ("gpt", "claude"):
        for i in range(2):
            blank = system == "claude" and i == 1
            body = "" if blank else f"<h1>{system} {i}</h1><img src='photo.jpg' width=40>"
            (root / "out" / system).mkdir(parents=True, exist_ok=True)
            (root / "out" / system / f"p{i}.html").write_text(f"<body style='margin:0'>{body}</body>")
        png(root / "out" / system / "photo.jpg", size=(40, 30))
        (root / "out" / system / "font.woff2").write_bytes(b"wOF2 not really a font")
    return root


def form(**more: str) -> dict[str, str]:
    # The references are PNGs without media regions: every pane shows its media as it is.
    return {"kind": "pairwise_reference", "reference": "refs", "slug": "bg", "options": json.dumps(RENDER),
            "neutralize": "no", **more}


def run_page(client: Client, run: NewStudyRun) -> str:
    return client.get(f"/studies/new/runs/{run.token}/", HTTP_HX_REQUEST="true").content.decode()


def test_the_upload_answers_queued_its_thread_renders_and_the_real_run_renders_nothing_again(
    folders: Path, researcher: Any, recorded_threads: list[RecordedThread], django_capture_on_commit_callbacks: Any
) -> None:
    browser_available()
    client = Client()
    client.force_login(researcher)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post("/studies/new/", {
            **form(dry_run="1", options=json.dumps({**RENDER, **AXES})), "archive": zipped(folders)})
    run = NewStudyRun.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/studies/new/runs/{run.token}/"
    # Nothing was rendered in the request: the run waits in the background queue, and its page says so.
    assert run.status == "queued" and run.progress == {} and not Path(settings.ARBITER_NEW_STUDY_RENDERS).exists()
    [thread] = recorded_threads
    assert thread.started and thread.args == (new_study_run_task, (run.pk,))
    page = run_page(client, run)
    assert "Queued: waiting for the background queue" in page and 'hx-trigger="every 1s"' in page
    assert 'id="new-study-cancel"' in page

    thread.run()
    run.refresh_from_db()
    assert run.status == "done" and run.study is None
    assert run.progress["groups"] == {"gpt": {"rendered": 2, "failed": 0}, "claude": {"rendered": 1, "failed": 1}}
    assert run.progress["rendered"] == 4 and run.progress["kept"] == 0 and run.progress["total"] == 4
    [(label, reason)] = run.progress["failures"]
    assert label == "folders.zip/claude/p1.html" and reason
    page = run_page(client, run)
    assert 'id="new-study-create"' in page and "hx-get" not in page and "folders.zip/claude/p1.html" in page
    assert "4 pages rendered by this run" in page
    # The photo and the font beside the pages are their assets, not stray files.
    assert "stray files: 0" in run.report, run.report
    # The dry run kept its upload and renders for the real run.
    archive, renders = run.archive, Path(settings.ARBITER_NEW_STUDY_RENDERS) / run.renders
    assert default_storage.exists(archive) and sorted(p.suffix for p in renders.rglob("*.json"))

    with django_capture_on_commit_callbacks(execute=True):
        made = client.post(f"/studies/new/runs/{run.token}/create/")
    real = NewStudyRun.objects.exclude(pk=run.pk).get()
    assert made.status_code == 302 and made["Location"] == f"/studies/new/runs/{real.token}/"
    assert real.archive == archive and real.parameters["dry_run"] is False and real.status == "queued"
    recorded_threads[-1].run()
    real.refresh_from_db()
    assert real.status == "done" and real.study is not None and real.study.slug == "bg", real.error
    # The same bytes and settings: every page kept from the dry run, none rendered again.
    assert real.progress["rendered"] == 0 and real.progress["kept"] == 4
    assert Candidate.objects.filter(page__study=real.study, rendered=True).count() == 3
    assert Candidate.objects.filter(page__study=real.study, rendered=False).count() == 1
    # The real run's end removes the upload and the renders.
    assert not default_storage.exists(archive) and not renders.exists()
    run.refresh_from_db()
    assert run.archive == "" and "Dry run finished" in run_page(client, run)

    # The study page and the bundle keep why claude's p1 failed, and the failure rule can be changed.
    study = real.study
    page = client.get(f"/studies/{study.slug}/").content.decode()
    candidate = Candidate.objects.get(page__study=study, rendered=False)
    assert candidate.render_reason == reason
    assert f'data-system="claude" data-page="p1"><code>claude</code> on page <code>p1</code>: {reason}' in page
    # The axis table names each axis by its title (its id beside it when it has one).
    assert '<tr data-axis="TABLES"><td>Tables and their cells <span class="muted"><code>TABLES</code>' in page
    assert '<tr data-axis="GLOBAL_LAYOUT"><td>Global layout</td>' in page
    assert 'id="failure-rule-form"' in page and 'id="render-failure-rule">AmbiHTMLBench<' in page
    assert client.post(f"/studies/{study.slug}/failure-rule/", {"failure_rule": "aescode"}).status_code == 302
    study.refresh_from_db()
    assert study.options["render"]["failure_rule"] == "aescode"
    assert 'id="render-failure-rule">AesCode<' in client.get(f"/studies/{study.slug}/").content.decode()
    assert client.post(f"/studies/{study.slug}/failure-rule/", {"failure_rule": "strict"}).status_code == 302
    study.refresh_from_db()
    assert study.options["render"]["failure_rule"] == "aescode"  # a rule it does not know changes nothing
    bundle = zipfile.ZipFile(io.BytesIO(b"".join(client.get(f"/studies/{study.slug}/export/").streaming_content)))
    document = json.loads(bundle.read("study.json"))
    [failed] = [c for c in document["candidates"] if not c["rendered"]]
    assert failed["system"] == "claude" and failed["page"] == "p1" and failed["render_reason"] == reason
    assert document["render"]["failure_rule"] == "aescode"


def test_a_cancelled_run_stops_and_removes_its_files(
    folders: Path, researcher: Any, recorded_threads: list[RecordedThread], django_capture_on_commit_callbacks: Any,
    monkeypatch: Any,
) -> None:
    browser_available()
    client = Client()
    client.force_login(researcher)
    # A queued run: cancelled at once, its upload removed, and its thread then does nothing.
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/studies/new/", {**form(dry_run="1"), "archive": zipped(folders)})
    queued = NewStudyRun.objects.get()
    archive = queued.archive
    assert client.post(f"/studies/new/runs/{queued.token}/cancel/").status_code == 302
    queued.refresh_from_db()
    assert queued.status == "cancelled" and not default_storage.exists(archive)
    assert "Cancelled: nothing was written." in run_page(client, queued)
    recorded_threads[-1].run()
    assert NewStudyRun.objects.get(pk=queued.pk).status == "cancelled"

    # A running run: cancelled as its first folder starts rendering, it stops at its next progress
    # write, renders no further page (at most the one a browser had taken), and removes its files.
    rendered: list[str] = []
    original_render = render_pages.PageRenderer.render
    original_folder = render_pages.render_folder

    def render(self: Any, path: Path) -> Any:
        rendered.append(path.name)  # in the browser's thread: no database here
        return original_render(self, path)

    def render_folder(**kwargs: Any) -> Any:
        new_study_runs.new_study_run_cancel(run=NewStudyRun.objects.get(status="running"))
        return original_folder(**kwargs)

    monkeypatch.setattr(render_pages.PageRenderer, "render", render)
    monkeypatch.setattr(render_pages, "render_folder", render_folder)
    monkeypatch.setattr(new_study_runs, "PROGRESS_EVERY_S", 0.0)
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/studies/new/", {**form(dry_run="1", slug="bg2"), "archive": zipped(folders)})
    run = NewStudyRun.objects.get(status="queued")
    recorded_threads[-1].run()
    run.refresh_from_db()
    assert run.status == "cancelled" and run.archive == "" and run.renders == ""
    assert rendered in ([], ["p0.html"])  # the other pages were never rendered
    assert not any(Path(settings.ARBITER_NEW_STUDY_RENDERS).rglob("*.png"))


def test_a_researchers_runs_render_one_at_a_time_and_others_are_not_held(
    folders: Path, researcher: Any, other_researcher: Any, settings: Any, django_capture_on_commit_callbacks: Any,
    monkeypatch: Any,
) -> None:
    sent: list[int] = []
    monkeypatch.setattr(new_study_run_task, "delay", lambda run_id: sent.append(run_id))
    settings.CELERY_TASK_ALWAYS_EAGER = False
    runs = []
    for user, slug in ((researcher, "a1"), (researcher, "a2"), (other_researcher, "b1")):
        client = Client()
        client.force_login(user)
        with django_capture_on_commit_callbacks(execute=True):
            client.post("/studies/new/", {**form(dry_run="1", slug=slug), "archive": zipped(folders)})
        runs.append(NewStudyRun.objects.get(parameters__options__slug=slug))
    first, second, other = runs
    assert new_study_runs.new_study_run_claim(run_id=first.pk)  # rendering, its lease live
    assert new_study_runs.new_study_run_execute(run_id=second.pk) == new_study_runs.WAITING
    assert NewStudyRun.objects.get(pk=second.pk).status == "queued"
    assert not new_study_runs.share_used(other.pk)  # another researcher's run is not held by it
    settings.ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER = 2
    assert not new_study_runs.share_used(second.pk)
    settings.ARBITER_NEW_STUDY_RUNS_PER_RESEARCHER = 1
    # A holder whose lease ran out (its worker died) no longer uses the share.
    NewStudyRun.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert not new_study_runs.share_used(second.pk)


def test_errors_name_the_files_as_uploaded_never_the_servers_folders(
    tmp_path: Path, researcher: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Issue 50 item 6: the same-stem error showed the server's temporary work folder."""
    browser_available()
    root = tmp_path / "in"
    png(root / "refs" / "p0.png", size=(400, 300))
    (root / "out" / "gpt").mkdir(parents=True)
    (root / "out" / "gpt" / "p0.html").write_text("<h1>a</h1>")
    (root / "out" / "gpt" / "p0.htm").write_text("<h1>b</h1>")
    client = Client()
    client.force_login(researcher)
    answer = client.post("/studies/new/", {**form(dry_run="1"), "archive": zipped(root, names=("refs", "out/gpt"))})
    run = NewStudyRun.objects.get()
    shown = answer.content.decode() + run_page(client, run)
    assert run.status == "failed" and "folders.zip/gpt/p0.htm" in run.error and "found twice" in run.error
    for server_path in ("arbiter-new-study-", "arbiter-render-", str(tmp_path), "/tmp/", str(settings.MEDIA_ROOT)):
        assert server_path not in shown and server_path not in run.error


def test_the_references_field_and_the_render_time_limit_are_named_in_their_errors(
    folders: Path, researcher: Any
) -> None:
    client = Client()
    client.force_login(researcher)
    page = client.get("/studies/new/").content.decode()
    assert 'placeholder="refs"' not in page and 'id="id_reference_help"' in page
    empty = client.post("/studies/new/", {**form(reference=""), "archive": zipped(folders)})
    [error] = re.findall(r'id="new-study-error">([^<]*)<', empty.content.decode())
    assert empty.status_code == 400 and "--reference" not in error
    assert error.startswith("reference: a pairwise_reference study needs its references: name their folder")
    slow = client.post("/studies/new/", {**form(options=json.dumps({"render": {"timeout_s": 600}})), "archive": zipped(folders)})
    # Checked before the upload is stored: nothing queued.
    assert slow.status_code == 400 and not NewStudyRun.objects.exists() and not Study.objects.exists()
    assert re.findall(r'id="new-study-error">([^<]*)<', slow.content.decode()) == [
        "option render.timeout_s: expected 0.5 to 60 seconds, got 600"
    ]
