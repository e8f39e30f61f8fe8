"""Ground truth as HTML and candidates as HTML (issue 48 item 2; docs/protocol.md "Ground truth"):
the truth page rendered with the study's settings and read from its ``dom.blocks`` as the
candidates are; a table without cells refused for its page only; each candidate's render blocks
kept and scored; an earlier render without blocks rendered again. Real Chromium (Debian's)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.models import Candidate, CandidateBlocks, ObjectiveScore, PageTruth, Study
from annotation.render.pages import render_folder
from annotation.render.settings import RenderSettings
from tests.annotation.render.conftest import browser_available

RENDER = json.dumps(
    {"viewport": "400x300", "mode": "canvas", "timeout_s": 6, "max_height": 1000, "settle_ms": 100}
)
PAGE = (
    "<body style='margin:0;font:16px sans-serif'><h1>Quarterly results</h1>"
    "<p>Revenue grew in every region this quarter.</p>"
    "<table><tr><td>north</td><td>12</td></tr><tr><td>south</td><td>9</td></tr></table>"
    "<p>The outlook for next year is cautious.</p></body>"
)
DROPPED = PAGE.replace("<p>The outlook for next year is cautious.</p>", "")
NO_CELLS = "<body><h1>Title</h1><div role='table'>a grid without cells</div></body>"


@pytest.fixture
def html_truth(tmp_path: Path) -> Path:
    """refs/p0, p1 and truth/p0 (the page), truth/p1 (a table without cells); systems: same (a copy),
    dropped (the last paragraph gone)."""
    root = tmp_path / "in"
    for folder, pages in {
        "refs": {"p0": PAGE, "p1": PAGE},
        "truth": {"p0": PAGE, "p1": NO_CELLS},
        "same": {"p0": PAGE, "p1": PAGE},
        "dropped": {"p0": DROPPED, "p1": DROPPED},
    }.items():
        (root / folder).mkdir(parents=True)
        for name, html in pages.items():
            (root / folder / f"{name}.html").write_text(html)
    return root


@pytest.mark.browser
@pytest.mark.django_db
def test_html_truth_and_html_candidates_are_scored_from_their_renders(html_truth: Path) -> None:
    browser_available()
    err = io.StringIO()
    call_command(
        "new_study",
        "pairwise_reference",
        "--reference",
        str(html_truth / "refs"),
        "--system",
        f"same={html_truth / 'same'}",
        "--system",
        f"dropped={html_truth / 'dropped'}",
        "--truth",
        str(html_truth / "truth"),
        "--option",
        f"render={RENDER}",
        "--no-neutralize",
        "--slug",
        "html-truth",
        stdout=io.StringIO(),
        stderr=err,
    )
    study = Study.objects.get(slug="html-truth")
    truth = PageTruth.objects.get(page__study=study)  # p1's truth refused, p0's kept
    assert truth.page.external_id == "p0"
    assert [b["type"] for b in truth.blocks["blocks"]] == ["title", "text", "table", "text"]
    assert truth.blocks["page"]["width"] == 400
    assert "<td>north</td>" in truth.blocks["blocks"][2]["html"]
    assert "ground truth refused for 1 page, left without it" in err.getvalue()
    # Every candidate's render blocks are kept (both pages: a page without truth may get it later
    # through the bundle); the candidates of p0 are scored.
    assert CandidateBlocks.objects.filter(candidate__page__study=study).count() == 4
    scores = {
        s.candidate.system.external_id: s.score
        for s in ObjectiveScore.objects.filter(candidate__page__study=study).select_related(
            "candidate__system"
        )
    }
    assert set(scores) == {"same", "dropped"}
    assert (scores["same"]["teds"], scores["same"]["d_text"], scores["same"]["s_layout"]) == (1.0, 0.0, 1.0)
    assert scores["dropped"]["teds"] == 1.0 and scores["dropped"]["d_text"] > 0.0
    assert Candidate.objects.filter(page__study=study).count() == 4


@pytest.mark.browser
def test_a_kept_render_without_blocks_is_rendered_again_when_blocks_are_needed(tmp_path: Path) -> None:
    browser_available()
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "p0.html").write_text(PAGE)
    settings = RenderSettings(
        viewport_width=400, viewport_height=300, timeout_s=6.0, max_height=1000, settle_ms=100
    )
    first = render_folder(src=src, out=out, settings=settings)
    assert first.rendered == 1
    record = json.loads((out / "p0.json").read_text())
    assert isinstance(record["dom"]["blocks"], list)
    del record["dom"]["blocks"]  # as a render made before blocks existed
    (out / "p0.json").write_text(json.dumps(record))
    assert render_folder(src=src, out=out, settings=settings).kept == 1  # blocks not asked for: kept
    again = render_folder(src=src, out=out, settings=settings, need_blocks=True)
    assert again.kept == 0 and again.rendered == 1
    assert isinstance(json.loads((out / "p0.json").read_text())["dom"]["blocks"], list)
