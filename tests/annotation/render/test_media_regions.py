"""Media regions from the rendered DOM against boxes computed by hand (docs/protocol.md "Media
regions from the DOM"). The fixture page is 800 CSS pixels wide (the viewport) and 1,000 tall,
so a box's bbox_1000 is (x / 800, y / 1000) × 1000, rounded outwards to 0.01."""

from __future__ import annotations

import dataclasses
import math

import pytest

from annotation.render.media_regions import media_regions
from tests.annotation.render.conftest import TEST_SETTINGS, png_bytes, render_in_thread

PAGE = """<!doctype html><html><head><style>
  body { margin: 0; height: 1000px; position: relative; }
  .at { position: absolute; display: block; }
</style></head><body>
<img class="at" src="a.png" style="left:100px; top:50px; width:200px; height:100px">
<div class="at" style="left:400px; top:50px; width:300px; height:200px; background-image:url(a.png)">
  <img src="a.png" style="width:50px; height:50px"><canvas width=20 height=20></canvas>
</div>
<canvas class="at" style="left:100px; top:300px; width:100px; height:100px; transform:rotate(45deg)"></canvas>
<div class="at" style="left:400px; top:300px; width:100px; height:100px; overflow:hidden">
  <img src="a.png" style="display:block; width:300px; height:300px; margin-left:-50px">
</div>
<div class="at" id="scroller" style="left:100px; top:500px; width:200px; height:100px; overflow:auto">
  <div style="height:300px"></div><video style="display:block; width:100px; height:100px"></video>
</div>
<img class="at" src="a.png" style="left:10px; top:10px; width:0; height:0">
<img class="at" src="a.png" style="left:10px; top:10px; width:50px; height:50px; visibility:hidden">
<img class="at" src="a.png" style="left:10px; top:10px; width:50px; height:50px; opacity:0">
<div style="display:none"><img src="a.png" style="width:50px; height:50px"></div>
<div class="at" style="left:600px; top:300px; opacity:0"><img src="a.png" style="width:50px; height:50px"></div>
<img class="at" src="a.png" style="left:-500px; top:10px; width:100px; height:100px">
<img class="at" src="a.png" style="left:10px; top:-300px; width:100px; height:100px">
<canvas class="at" style="left:750px; top:700px; width:100px; height:100px"></canvas>
<p class="at" style="left:600px; top:600px; font-size:16px">an icon <svg width="16" height="16"><rect width="16" height="16"/></svg></p>
<svg class="at" style="left:500px; top:800px" width="200" height="100"><rect width="200" height="100" fill="#888"/></svg>
<div class="at chart-box" style="left:100px; top:800px; width:200px; height:150px"><canvas style="width:100%; height:100%"></canvas></div>
<iframe class="at" srcdoc="<p>inner</p>" style="left:300px; top:650px; width:100px; height:100px; border:0"></iframe>
<script>
  document.getElementById('scroller').scrollTop = 250;
  window.scrollTo(0, 300);
</script>
</body></html>"""

HALF_DIAGONAL = 50 * math.sqrt(2)
EXPECTED_PX = [
    ("photo", (100, 50, 300, 150)),  # plain
    ("photo", (400, 50, 700, 250)),  # nested: the background's box holds the img and canvas inside it
    ("chart", (150 - HALF_DIAGONAL, 350 - HALF_DIAGONAL, 150 + HALF_DIAGONAL, 350 + HALF_DIAGONAL)),  # rotated
    ("photo", (400, 300, 500, 400)),  # clipped by its overflow: hidden parent (the img spans 350…650)
    ("photo", (100, 550, 200, 600)),  # scrolled inside its container (top 500 + 300 − 250), cut at its bottom
    ("chart", (750, 700, 800, 800)),  # half off the page's right edge
    ("chart", (500, 800, 700, 900)),  # an svg graphic (the 16 px svg in the text is an icon)
    ("chart", (100, 800, 300, 950)),  # a chart container (its canvas is part of it)
    ("photo", (300, 650, 400, 750)),  # an iframe
]


def to_1000(box: tuple[float, float, float, float]) -> list[float]:
    x0, y0, x1, y1 = box
    return [1000 * x0 / 800, 1000 * y0 / 1000, 1000 * x1 / 800, 1000 * y1 / 1000]


@pytest.mark.browser
def test_boxes_computed_by_hand(renderer, site) -> None:
    result = renderer.render(site("media.html", PAGE, **{"a.png": png_bytes((200, 100, 50))}))
    assert result.status == "ok", result.reason
    assert (result.width, result.height) == (800, 1000)
    got = sorted((r["kind"], r["bbox_1000"]) for r in result.media)
    expected = sorted((kind, to_1000(box)) for kind, box in EXPECTED_PX)
    assert [k for k, _ in got] == [k for k, _ in expected]
    for (_, box), (_, want) in zip(got, expected, strict=True):
        assert box == pytest.approx(want, abs=0.02), (box, want)


@pytest.mark.browser
def test_canvas_mode_clips_to_the_viewport(site) -> None:
    settings = dataclasses.replace(TEST_SETTINGS, mode="canvas")
    result = render_in_thread(settings, site("media.html", PAGE, **{"a.png": png_bytes((200, 100, 50))}))
    assert result.status == "ok", result.reason
    assert (result.width, result.height) == (800, 600)
    got = sorted((r["kind"], r["bbox_1000"]) for r in result.media)
    x = 1000 / 800
    y = 1000 / 600
    expected = sorted([
        ("photo", [100 * x, 50 * y, 300 * x, 150 * y]),
        ("photo", [400 * x, 50 * y, 700 * x, 250 * y]),
        ("chart", [(150 - HALF_DIAGONAL) * x, (350 - HALF_DIAGONAL) * y, (150 + HALF_DIAGONAL) * x, (350 + HALF_DIAGONAL) * y]),
        ("photo", [400 * x, 300 * y, 500 * x, 400 * y]),
        ("photo", [100 * x, 550 * y, 200 * x, 600 * y]),  # the viewport's bottom edge
    ])
    assert [k for k, _ in got] == [k for k, _ in expected]
    for (_, box), (_, want) in zip(got, expected, strict=True):
        assert box == pytest.approx(want, abs=0.02), (box, want)


def test_the_normalization() -> None:
    boxes = [
        {"kind": "photo", "box": [0, 0, 400, 300]},
        {"kind": "chart", "box": [-50, -50, 10.5, 10.5]},
        {"kind": "photo", "box": [10, 10, 10.5, 200]},  # under a pixel wide: dropped
        {"kind": "photo", "box": [900, 10, 950, 20]},  # off the image
        {"kind": "video", "box": [0, 0, 10, 10]},  # not a media kind
        {"kind": "photo", "box": [0, 0, float("nan"), 10]},
        {"kind": "photo", "box": [1 / 3, 0, 799.999, 600]},
    ]
    assert media_regions(boxes, width=800, height=600) == [
        {"kind": "photo", "bbox_1000": [0.0, 0.0, 500.0, 500.0]},
        {"kind": "chart", "bbox_1000": [0.0, 0.0, 13.13, 17.5]},
        {"kind": "photo", "bbox_1000": [0.41, 0.0, 1000.0, 1000.0]},
    ]
