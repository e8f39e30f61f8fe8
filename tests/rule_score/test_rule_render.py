"""The rule verifiers on real renders (docs/protocol.md "AesCode's rule score"): a live ECharts chart
loaded from a CDN URL (answered with the npm copy, nothing fetched), a static picture of the same
chart, content outside the canvas and a missing required string. One Chromium (Debian's) renders
every page once for the module."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from annotation.render.pages import page_record
from annotation.render.renderer import PageRender, PageRenderer
from rule_score.requirements import parse_requirements
from rule_score.verifiers import rule_result
from tests.annotation.render.conftest import (
    TEST_SETTINGS,
    browser_available,
    png_bytes,
    with_renderer_in_thread,
)

GREEN = (0, 160, 0)
CDN = "https://cdn.jsdelivr.net/npm/echarts@5.4.3/dist/echarts.min.js"
OTHER_HOST = "https://cdn.example.org/echarts/5.4.3/echarts.min.js"  # not a known CDN: refused
CHART = f"""<!doctype html><html><head><meta charset="utf-8">
<script src="{CDN}"></script><script src="{OTHER_HOST}"></script>
<style>body {{ margin: 0; font: 16px sans-serif; }} h1 {{ margin: 0; height: 40px; font-size: 24px; }}</style>
</head><body><h1>Weekly sales</h1>
<div id="chart" style="width: 600px; height: 400px"></div>
<table><tr><th>Day</th><th>Sales</th></tr><tr><td>Mon</td><td>1,200</td></tr><tr><td>Tue</td><td>200</td></tr></table>
<script>
echarts.init(document.getElementById('chart')).setOption({{
  xAxis: {{type: 'category', data: ['Mon', 'Tue', 'Wed']}}, yAxis: {{type: 'value'}},
  series: [{{name: 'Sales', type: 'bar', data: [1200, 200, 150], itemStyle: {{color: 'rgb(0, 160, 0)'}}}}]
}});
</script></body></html>"""
STATIC = """<!doctype html><html><head><style>body { margin: 0; font: 16px sans-serif; }
h1 { margin: 0; height: 40px; font-size: 24px; }</style></head><body><h1>Weekly sales</h1>
<img src="chart.png" width="800" height="600"></body></html>"""
# Three images, no text: boxes known by construction. 100x100 at (0, 0), inside; 200x50 at
# (700, 100), 100x50 of it right of the 800 px canvas; 100x40 at (10, 580), 100x20 of it below 600.
OUTSIDE = """<!doctype html><html><head><style>body { margin: 0; } img { position: absolute; display: block; }</style>
</head><body><img src="a.png" style="left:0;top:0;width:100px;height:100px">
<img src="a.png" style="left:700px;top:100px;width:200px;height:50px">
<img src="a.png" style="left:10px;top:580px;width:100px;height:40px"></body></html>"""
MISSING = """<!doctype html><html><body style="margin:0"><h1>Weekly   SALES</h1><p>Revenue by day</p></body></html>"""

CHART_REQUIREMENTS = parse_requirements(
    {
        "text": ["Weekly sales"],
        "charts": [{"rows": [["Mon", 1200], ["Tue", "200"], ["Wed", 150]]}],
        "tables": [{"rows": [["Mon", 1200], ["Tue", 200]]}],
    }
)


def _record(result: PageRender) -> dict[str, Any]:
    return page_record(result, settings=TEST_SETTINGS, manifest={}, source_sha256="", image=None)


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PageRender]:
    """Every page rendered once, in one browser; the static page shows the live page's own capture."""
    browser_available()
    folder = tmp_path_factory.mktemp("rule-site")

    def write(name: str, html: str) -> Path:
        (folder / name).write_text(html, encoding="utf-8")
        return folder / name

    def work(r: PageRenderer) -> dict[str, PageRender]:
        results = {"chart": r.render(write("chart.html", CHART))}
        (folder / "chart.png").write_bytes(results["chart"].png or b"")  # the same chart, as a picture
        (folder / "a.png").write_bytes(png_bytes((40, 40, 200)))
        results["static"] = r.render(write("static.html", STATIC))
        results["outside"] = r.render(write("outside.html", OUTSIDE))
        results["missing"] = r.render(write("missing.html", MISSING))
        return results

    return with_renderer_in_thread(TEST_SETTINGS, work)


@pytest.mark.browser
def test_the_cdn_echarts_is_the_npm_copy_and_the_chart_draws(renders: dict[str, PageRender]) -> None:
    chart = renders["chart"]
    assert chart.status == "ok", chart.reason
    # The CDN URL was answered locally; the unknown host was refused; the page ran without errors.
    assert chart.refused_requests == [OTHER_HOST]
    assert chart.console_errors == [] or all("ERR_BLOCKED_BY_CLIENT" in e for e in chart.console_errors)
    # The bars are drawn, whole (no animation): the Mon bar (1200 of a 1200 axis) is the tallest.
    pixels = np.asarray(Image.open(io.BytesIO(chart.png or b"")).convert("RGB"))
    green = np.all(pixels == GREEN, axis=-1)
    assert green.sum() > 20_000
    columns = np.flatnonzero(green.any(axis=0))
    heights = [green[:, c].sum() for c in (columns[0] + 5, columns[-1] - 5)]
    assert heights[0] > 5 * heights[1]  # Mon (1200) against Wed (150): 8 to 1 on a linear axis
    # The live series, read back.
    assert chart.dom is not None
    (live,) = chart.dom["charts"]
    assert live["shown"] is True and live["box"] == [0, 40, 600, 440]
    assert live["x_axes"][0] == {"type": "category", "data": ["Mon", "Tue", "Wed"]}
    assert [d["value"] for d in live["series"][0]["data"]] == [1200, 200, 150]


@pytest.mark.browser
def test_a_live_chart_passes_and_a_picture_of_it_scores_zero(renders: dict[str, PageRender]) -> None:
    live = rule_result(_record(renders["chart"]), CHART_REQUIREMENTS)
    assert live.channels["chart"].score == 1.0 and live.channels["table"].score == 1.0
    assert live.channels["text"].score == 1.0 and live.rule == 1.0
    static = rule_result(_record(renders["static"]), CHART_REQUIREMENTS)
    assert renders["static"].status == "ok" and renders["static"].dom is not None
    assert renders["static"].dom["charts"] == []  # a picture: no instance, no series
    assert static.channels["chart"].score == 0.0
    assert static.channels["chart"].detail["missing_rows"] == [[0, 0], [0, 1], [0, 2]]
    assert static.channels["table"].score == 0.0 and static.channels["text"].score == 1.0
    # The mask: boundary not asked for (no canvas), so Rule is the mean of the other three.
    assert static.applicable == {"text": True, "boundary": False, "table": True, "chart": True}
    assert static.rule == pytest.approx(1 / 3)


@pytest.mark.browser
def test_content_outside_the_canvas_is_the_share_worked_out_by_hand(renders: dict[str, PageRender]) -> None:
    result = rule_result(
        _record(renders["outside"]), parse_requirements({"canvas": {"width": 800, "height": 600}})
    )
    # Areas 10,000 + 10,000 + 4,000; outside 100x50 (right) + 100x20 (below) = 7,000.
    boundary = result.channels["boundary"]
    assert boundary.detail["share_outside"] == pytest.approx(7_000 / 24_000)
    assert boundary.score == pytest.approx(1 - 7_000 / 24_000)
    assert boundary.detail["boxes_outside"] == 2
    assert result.applicable == {"text": False, "boundary": True, "table": False, "chart": False}
    assert result.rule == boundary.score
    # The same page against a canvas that holds it all.
    wide = rule_result(
        _record(renders["outside"]), parse_requirements({"canvas": {"width": 900, "height": 620}})
    )
    assert wide.channels["boundary"].score == 1.0


@pytest.mark.browser
def test_a_missing_required_string_fails_text(renders: dict[str, PageRender]) -> None:
    requirements = parse_requirements({"text": ["weekly sales", "Q3 2026", "Revenue by day"]})
    result = rule_result(_record(renders["missing"]), requirements)
    text = result.channels["text"]
    # "Weekly   SALES" holds "weekly sales" (case and whitespace folded); "Q3 2026" is not there.
    assert text.detail["missing"] == ["Q3 2026"]
    assert text.score == pytest.approx(2 / 3) and result.rule == pytest.approx(2 / 3)
    # A failed render of the same brief: an explicit failure, 0 on each asked channel.
    failed = rule_result(
        _record(replace(renders["missing"], status="failed", reason="timed out after 6 s")), requirements
    )
    assert failed.channels["text"].score == 0.0 and failed.rule == 0.0
