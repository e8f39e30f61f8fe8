"""Checks computed from the render (docs/protocol.md "Checks computed from the render"): the DOM
export of fixture pages whose visible text and overflow are known by construction, and the
answers the checks give from it. Real Chromium (Debian's)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from annotation.render.page_checks import check_answer
from annotation.render.renderer import PageRender
from tests.annotation.render.conftest import TEST_SETTINGS, render_in_thread

# 800 × 600 viewport. Visible: the heading and "Hello world" split over two elements; hidden by
# display:none, visibility:hidden, opacity 0, a clipping box (overflow hidden, 100 px wide, the
# text pushed 300 px right inside it) and a position off the canvas (left: -500px).
TEXT_PAGE = """<body style="margin:0;font:16px sans-serif">
<h1 style="margin:10px">Quarterly report</h1>
<p style="margin:10px">Hel<b>lo</b>
   world</p>
<p style="display:none">gone one</p>
<p style="visibility:hidden">gone two</p>
<div style="opacity:0">gone three</div>
<div style="width:100px;height:40px;overflow:hidden"><span style="position:relative;left:300px">gone four</span></div>
<div style="position:absolute;left:-500px;top:300px;width:200px">gone five</div>
<script>document.write('<p style="margin:10px">written by script</p>')</script>
</body>"""
# Everything inside the 800 × 600 canvas.
INSIDE_PAGE = """<body style="margin:0"><div style="position:absolute;left:100px;top:100px;width:600px;height:400px;
background:#369">a box</div></body>"""
# A 900 px wide box (beyond the 800 px canvas) and, clipped by an overflow:hidden parent inside the
# canvas, a 2000 px wide child: only the first is outside.
OUTSIDE_PAGE = """<body style="margin:0"><div id="wide" style="position:absolute;left:0;top:0;width:900px;height:50px;
background:#c00"></div><div style="position:absolute;left:0;top:100px;width:300px;height:100px;overflow:hidden">
<div style="width:2000px;height:100px;background:#0c0"></div></div></body>"""


def render(site, name: str, html: str, **settings) -> PageRender:  # type: ignore[no-untyped-def]
    result = render_in_thread(replace(TEST_SETTINGS, **settings), site(name, html))
    assert isinstance(result, PageRender) and result.status == "ok", result.reason
    return result


def record(result: PageRender) -> dict:
    return {"status": result.status, "dom": result.dom}


@pytest.mark.browser
def test_visible_text_leaves_out_what_is_not_on_the_image(site) -> None:  # type: ignore[no-untyped-def]
    result = render(site, "text.html", TEXT_PAGE)
    assert result.dom is not None and result.dom["truncated"] is False
    assert result.dom["visible_text"] == "Quarterly report Hel lo world written by script"
    answers = {
        wanted: check_answer(record(result), "text_visible", text=wanted)
        for wanted in (
            "quarterly REPORT",
            "Hello world",
            "written by script",
            "gone one",
            "gone two",
            "gone three",
            "gone four",
            "gone five",
        )
    }
    assert answers == {
        "quarterly REPORT": "YES",
        "Hello world": "YES",
        "written by script": "YES",
        "gone one": "NO",
        "gone two": "NO",
        "gone three": "NO",
        "gone four": "NO",
        "gone five": "NO",
    }
    # The text placed off the canvas (left: -500px) is also content outside it; the clipped one is not.
    assert check_answer(record(result), "inside_canvas") == "NO"
    assert [item["tag"] for item in result.dom["outside_canvas"]] == ["div", "#text"]
    assert result.dom["n_outside_canvas"] == 2
    assert result.dom["outside_canvas"][0]["box"][:3] == [-500, 300, -300]  # its height is the line's


@pytest.mark.browser
def test_content_inside_and_outside_the_canvas(site) -> None:  # type: ignore[no-untyped-def]
    inside = render(site, "inside.html", INSIDE_PAGE, mode="canvas")
    assert (
        inside.dom is not None and inside.dom["n_outside_canvas"] == 0 and inside.dom["canvas"] == [800, 600]
    )
    assert check_answer(record(inside), "inside_canvas") == "YES"
    assert check_answer(record(inside), "rendered") == "YES"
    outside = render(site, "outside.html", OUTSIDE_PAGE, mode="canvas")
    assert outside.dom is not None
    assert (
        outside.dom["outside_canvas"] == [{"tag": "div", "box": [0, 0, 900, 50]}]
        and outside.dom["n_outside_canvas"] == 1
    )
    assert check_answer(record(outside), "inside_canvas") == "NO"


def test_a_failed_render_answers_no_and_a_render_without_its_dom_export_unclear() -> None:
    failed = {"status": "failed", "dom": None}
    assert {
        check: check_answer(failed, check, text="x")
        for check in ("rendered", "text_visible", "inside_canvas")
    } == {"rendered": "NO", "text_visible": "NO", "inside_canvas": "NO"}
    old = {"status": "ok"}  # rendered before the DOM export existed
    assert check_answer(old, "rendered") == "YES"
    assert check_answer(old, "text_visible", text="x") == check_answer(old, "inside_canvas") == "UNCLEAR"
    cut_short = {"status": "ok", "dom": {"visible_text": "a b", "n_outside_canvas": 0, "truncated": True}}
    assert check_answer(cut_short, "text_visible", text="b") == "YES"
    assert check_answer(cut_short, "text_visible", text="c") == "UNCLEAR"
    assert check_answer(cut_short, "inside_canvas") == "UNCLEAR"
    with pytest.raises(ValueError, match="unknown check 'pretty'"):
        check_answer(old, "pretty")


@pytest.mark.browser
def test_a_page_that_breaks_the_export_still_renders_and_its_checks_are_unclear(site) -> None:  # type: ignore[no-untyped-def]
    page = "<body><h1>Title</h1><script>document.createTreeWalker = () => { throw new Error('no'); };</script></body>"
    result = render(site, "broken.html", page)
    assert result.dom is None
    assert check_answer(record(result), "text_visible", text="Title") == "UNCLEAR"
    assert check_answer(record(result), "rendered") == "YES"
