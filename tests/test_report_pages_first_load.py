"""Every researcher report page of `make run`'s demo, first load (issue 40, "Work you can see").

The demo is built as `make demo` builds it (``make_demo_study`` for the image study, calibrated and
frozen as demo-v1, and one study per questionnaire kind), at the size the demo's own tests use. Each
page's first response must carry either its finished result or a progress indicator that fetches
it, and must not run the heavy part inside the request: no figure is drawn (each has its own
request), a plan or a leaderboard started from its form is left queued for its thread with the page
polling, and the judge ablation answers with an indicator whose own request computes it. These are
checked by structure; the times are benchmarks/bench_report_pages.py's.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from matplotlib.figure import Figure

from annotation.models import Study
from calibration.views import ablation
from ranking import tasks
from ranking.models import Leaderboard, StudyPlanRun
from tests.task_threads import RecordedThread, record_task_threads

pytestmark = pytest.mark.django_db

DEMO_PAGES = "16"  # tests/demo/test_demo_study.py's size (the demo itself has 40)
KIND_SIZES = {
    "pairwise": ["--pages", "4", "--systems", "4"],
    "checklist": ["--pages", "4"],
    "rating": ["--pages", "8"],
}
POLL = 'hx-trigger="every 2s"'

#: Report pages and what shows their finished result; the figures each page points at.
REPORT_PAGES = [
    ("/studies/demo/agreement/", ['id="agreement"', 'id="human-reference"'], 4),
    ("/studies/demo/calibration/", ["Leave-one-block-out validation"], 4),
    ("/research/studies/demo-pairwise/kind-report/", ['id="agreement"'], 2),
    ("/research/studies/demo-checklist/kind-report/", ['id="agreement"'], 2),
    ("/research/studies/demo-rating/kind-report/", ['id="agreement"'], 2),
    ("/research/studies/demo/raters/quality/", ['<table class="data"'], 0),
]


@pytest.fixture(scope="module")
def demo_built(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """The demo, built once for the module (issue 46 item 8) inside a transaction that is rolled
    back after the module's last test; each test's own transaction nests in it and is rolled back
    as usual, so every test starts from the same demo. Returns its media folder."""
    from django.conf import settings as django_settings
    from django.db import transaction
    from django.test.utils import override_settings

    media = tmp_path_factory.mktemp("demo-media")
    with django_db_blocker.unblock(), override_settings(MEDIA_ROOT=media), transaction.atomic():
        quiet = io.StringIO()
        call_command("make_demo_study", "--slug", "demo", "--seed", "1", "--pages", DEMO_PAGES, stdout=quiet)
        call_command(
            "calibrate", "demo", "--json", str(media / "calibration.json"), "--bootstrap", "50",
            "--freeze", "demo-v1", stdout=quiet,
        )  # fmt: skip
        for kind, sizes in KIND_SIZES.items():
            call_command("make_demo_study", "--kind", kind, "--seed", "1", *sizes, stdout=quiet)
        assert media == django_settings.MEDIA_ROOT
        yield media
        transaction.set_rollback(True)


@pytest.fixture
def demo(demo_built: Path, researcher, settings) -> Client:  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = demo_built  # the demo's files, written when it was built
    for study in Study.objects.all():
        study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    return client


@pytest.fixture
def figures_drawn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each figure matplotlib writes (a report's drawing is most of its time)."""
    drawn: list[str] = []
    savefig = Figure.savefig

    def recorded(self: Figure, *args: Any, **kwargs: Any) -> Any:
        drawn.append(str(kwargs.get("format")))
        return savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recorded)
    return drawn


@pytest.fixture
def recorded_threads(settings, monkeypatch) -> list[RecordedThread]:  # type: ignore[no-untyped-def]
    return record_task_threads(settings, monkeypatch)


@pytest.fixture
def computations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The heavy computations run (a plan, a leaderboard, a judge ablation), by name."""
    ran: list[str] = []

    def spy(module: Any, name: str) -> None:
        function = getattr(module, name)

        def wrapped(**kwargs: Any) -> Any:
            ran.append(name)
            return function(**kwargs)

        monkeypatch.setattr(module, name, wrapped)

    spy(tasks, "study_plan_run_execute")
    spy(tasks, "leaderboard_run")
    spy(ablation, "judge_ablation_report")
    return ran


def test_each_report_page_shows_its_numbers_at_once_and_draws_no_figure_in_its_request(
    demo, figures_drawn
) -> None:  # type: ignore[no-untyped-def]
    """One walk over the pages (the demo is built once for all of them)."""
    for path, result, n_figures in REPORT_PAGES:
        figures_drawn.clear()
        response = demo.get(path)
        body = response.content.decode()
        assert response.status_code == 200, (path, body[:500])
        later = re.search(r'hx-get="([^"]+)" hx-trigger="load"', body)
        if later:  # a page whose numbers come on its own htmx request (the agreement page)
            assert not any(marker in body for marker in result), path  # not computed in the page's request
            assert 'role="status"' in body  # its progress indicator instead
            assert figures_drawn == [], path
            body = demo.get(unescape(later.group(1)), HTTP_HX_REQUEST="true").content.decode()
        assert all(marker in body for marker in result), (path, [m for m in result if m not in body])
        assert figures_drawn == [], path  # no figure is drawn in the page's request
        # Each figure is an <img> on a URL of its own, under a "Drawing the figure…" placeholder (CSS).
        sources = [unescape(s) for s in re.findall(r'<figure class="plot"><img src="(/[^"]+)"', body)]
        assert len(sources) == n_figures and all(src.startswith(path) for src in sources), (path, sources)
        for src in sources:
            assert demo.get(src)["Content-Type"] == "image/svg+xml", src
        assert len(figures_drawn) == n_figures, path  # drawn on their own requests


def test_the_plan_form_answers_with_its_run_queued_and_the_page_polls(
    demo, recorded_threads, computations, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    form = demo.get("/studies/demo/plan/").content.decode()
    assert '<option value="demo" selected>pilot study demo</option>' in form
    with django_capture_on_commit_callbacks(execute=True):
        response = demo.post(
            "/studies/demo/plan/", {"pilot": "demo", "target": "top_k", "k": "2", "studies": "10"}
        )
    run = StudyPlanRun.objects.get()
    assert response.status_code == 302 and run.status == StudyPlanRun.Status.QUEUED and computations == []
    page = demo.get(response["Location"]).content.decode()
    assert f'hx-get="/plan/{run.pk}/status/"' in page and POLL in page and "<progress" in page
    [thread] = recorded_threads
    thread.run()
    assert computations == ["study_plan_run_execute"]
    assert POLL not in demo.get(f"/plan/{run.pk}/status/").content.decode()


def test_the_leaderboard_form_answers_with_its_run_queued_and_the_row_polls(
    demo, recorded_threads, computations, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    with django_capture_on_commit_callbacks(execute=True):
        response = demo.post(
            "/studies/demo/leaderboards/",
            {"coefficients": "demo-v1", "bootstrap": "50", "seed": "1", "model": "davidson"},
        )
    leaderboard = Leaderboard.objects.get()
    assert (
        response.status_code == 302 and leaderboard.status == Leaderboard.Status.QUEUED and computations == []
    )
    listing = demo.get("/studies/demo/leaderboards/").content.decode()
    row = f"/studies/demo/leaderboards/{leaderboard.pk}/row/"
    assert f'hx-get="{row}"' in listing and POLL in listing and "<progress" in listing
    [thread] = recorded_threads
    thread.run()
    leaderboard.refresh_from_db()
    assert computations == ["leaderboard_run"] and leaderboard.status == Leaderboard.Status.DONE
    assert POLL not in demo.get(row).content.decode()
    detail = demo.get(f"/studies/demo/leaderboards/{leaderboard.pk}/").content.decode()
    assert "<table" in detail and POLL not in detail


def test_the_judge_ablation_answers_with_an_indicator_and_computes_on_its_own_request(
    demo, computations
) -> None:  # type: ignore[no-untyped-def]
    page = "/studies/demo/judge-ablation/"
    assert "Compute the nested ablation" in demo.get(page).content.decode() and computations == []
    pending = demo.post(page, {"bootstrap": "20", "seed": "3"}).content.decode()
    assert computations == [] and "Computing the ablation" in pending and "<progress" in pending
    result_url = unescape(re.findall(r'hx-get="(\?[^"]+)" hx-trigger="load"', pending)[0])
    fragment = demo.get(page + result_url, headers={"HX-Request": "true"}).content.decode()
    assert computations == ["judge_ablation_report"] and "By number of judges" in fragment
