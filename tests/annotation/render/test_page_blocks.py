"""The page's blocks from the rendered DOM (docs/protocol.md "Blocks from the DOM"): a fixture page
whose blocks, their types, texts and boxes are known by construction (absolute positions in an
800 × 600 viewport), and what is left out. Real Chromium (Debian's)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.annotation.render.conftest import TEST_SETTINGS, render_in_thread

# Absolutely placed blocks, so every box is known: a heading, a paragraph split over inline
# elements, a list, a table (one block, its cells not blocks of their own), a KaTeX-like formula
# with its TeX annotation, a figure with a caption, an svg chart and an icon-size svg (not a
# block). Left out: a placeholder (and its text), display:none, visibility:hidden, opacity 0,
# transparent text, 2 px text, text clipped away, and a block below the canvas (canvas mode).
PAGE = """<!doctype html><html><head><style>
body { margin: 0; font: 16px/20px sans-serif; }
.at { position: absolute; margin: 0; padding: 0; }
</style></head><body>
<h2 class="at" style="left:10px;top:10px;width:300px;height:30px;font-size:24px;line-height:30px">Results</h2>
<p class="at" style="left:10px;top:50px;width:400px">Hel<b>lo</b> <a href="#">world</a></p>
<ul class="at" style="left:10px;top:80px;width:300px;padding-left:20px"><li>one</li><li>two</li></ul>
<table class="at" style="left:10px;top:140px;border-collapse:collapse"><tr><td>a1</td><td>b1</td></tr>
<tr><td>a2</td><td>b2</td></tr></table>
<span class="at katex" style="left:400px;top:10px"><span>x²</span><span style="display:none"><math><semantics><annotation encoding="application/x-tex">x^2</annotation></semantics></math></span></span>
<figure class="at" style="left:400px;top:60px;width:200px"><div style="width:200px;height:100px;background:#48c"></div><figcaption>Figure 1</figcaption></figure>
<svg class="at" style="left:620px;top:60px" width="150" height="100"><rect width="150" height="100" fill="#c84"/></svg>
<svg class="at" style="left:620px;top:200px" width="12" height="12"><rect width="12" height="12"/></svg>
<div class="at image-placeholder" style="left:10px;top:300px;width:200px;height:50px">A photo of a cat <img alt="cat" width="50" height="20"></div>
<p class="at" style="left:10px;top:360px;display:none">gone one</p>
<p class="at" style="left:10px;top:380px;visibility:hidden">gone two</p>
<p class="at" style="left:10px;top:400px;opacity:0">gone three</p>
<p class="at" style="left:10px;top:420px;color:transparent">gone four</p>
<p class="at" style="left:10px;top:440px;font-size:2px">gone five</p>
<div class="at" style="left:10px;top:460px;width:50px;height:20px;overflow:hidden"><span style="position:relative;left:200px">gone six</span></div>
<p class="at" style="left:10px;top:700px">below the canvas</p>
</body></html>"""


@pytest.mark.browser
def test_blocks_are_the_visible_semantic_blocks_with_their_boxes(site) -> None:  # type: ignore[no-untyped-def]
    result = render_in_thread(replace(TEST_SETTINGS, mode="canvas"), site("blocks.html", PAGE))
    assert result.status == "ok", result.reason
    dom = result.dom
    assert dom is not None and dom["blocks_truncated"] is False
    blocks = dom["blocks"]
    assert [(b["type"], b["text"]) for b in blocks] == [
        ("title", "Results"),
        ("text", "Hel lo world"),
        ("list", "one two"),
        ("table", "a1 b1 a2 b2"),
        ("formula", "x²"),
        ("figure", "Figure 1"),
        ("figure", ""),
    ]
    by_type = {b["type"]: b for b in blocks}
    # The heading's box is its text's (24 px font on a 30 px line), inside its element.
    x0, y0, x1, y1 = by_type["title"]["box"]
    assert 10 <= x0 < 12 and 10 <= y0 < 16 and 60 < x1 < 150 and 34 < y1 <= 40, by_type["title"]["box"]
    # A table is one block with its raw HTML; the formula keeps its TeX source.
    assert by_type["table"]["html"].startswith("<table") and "<td>b2</td>" in by_type["table"]["html"]
    assert by_type["formula"]["latex"] == "x^2"
    assert all(b["html"] is None for b in blocks if b["type"] != "table")
    # The figure and the chart: their element boxes.
    assert blocks[5]["box"] == [400, 60, 600, blocks[5]["box"][3]] and blocks[5]["box"][3] > 160
    assert blocks[6]["box"] == [620, 60, 770, 160]
    # bbox_1000 is the box over the canvas (800 × 600), × 1000.
    for b in blocks:
        bx = b["box"]
        expected = [1000 * bx[0] / 800, 1000 * bx[1] / 600, 1000 * bx[2] / 800, 1000 * bx[3] / 600]
        assert all(abs(v - e) <= 0.01 for v, e in zip(b["bbox_1000"], expected, strict=True)), b
    text = " ".join(b["text"] for b in blocks)
    for gone in ("cat", "gone", "below the canvas"):
        assert gone not in text


@pytest.mark.browser
def test_full_mode_blocks_are_normalized_to_the_page_height(site) -> None:  # type: ignore[no-untyped-def]
    html = """<body style="margin:0;font:16px sans-serif"><h1 style="margin:0;height:40px">Top</h1>
    <div style="height:1900px"></div><p style="margin:0">End</p></body>"""
    result = render_in_thread(replace(TEST_SETTINGS, mode="full"), site("tall.html", html))
    assert result.status == "ok", result.reason
    blocks = result.dom["blocks"]
    assert [b["type"] for b in blocks] == ["title", "text"]
    height = result.height
    assert height >= 1940
    end = blocks[1]
    assert end["box"][1] >= 1940 - 1
    assert abs(end["bbox_1000"][1] - 1000 * end["box"][1] / height) <= 0.01
