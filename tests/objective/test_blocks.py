"""objective.blocks: the ground-truth format, render JSON and the errors naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from objective.blocks import Block, PageBlocks, TruthError, from_render, load_page, parse_truth

TABLE = "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"


def truth(**overrides: object) -> dict[str, object]:
    block = {"type": "text", "text": "Hello", "bbox": [10, 20, 110, 40]}
    block.update(overrides)
    return {"page": {"width": 1000, "height": 1400}, "blocks": [block]}


def test_a_well_formed_page_is_read_with_every_field() -> None:
    data = {
        "page": {"width": 1000, "height": 1400},
        "blocks": [
            {"type": "title", "text": "T", "bbox": [0, 0, 1000, 50]},
            {"type": "table", "text": "a b 1 2", "html": TABLE, "bbox": [0, 60, 500, 300]},
            {"type": "formula", "text": "x^2", "latex": "x^2", "bbox": [0, 310, 100, 330]},
        ],
    }
    page = parse_truth(data)
    assert page == PageBlocks(
        1000.0,
        1400.0,
        (
            Block("title", "T", (0.0, 0.0, 1000.0, 50.0)),
            Block("table", "a b 1 2", (0.0, 60.0, 500.0, 300.0), html=TABLE),
            Block("formula", "x^2", (0.0, 310.0, 100.0, 330.0), latex="x^2"),
        ),
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected an object {page, blocks}, got a list"),
        ({"blocks": []}, "page: expected an object {width, height}, got null"),
        (
            {"page": {"width": "1000", "height": 10}, "blocks": []},
            "page.width: expected a number, got a string",
        ),
        ({"page": {"width": 10, "height": 0}, "blocks": []}, "page.height: expected a number above 0"),
        ({"page": {"width": 10, "height": 10}}, "blocks: expected a list, got null"),
        (
            truth(type="paragraph"),
            "blocks[0].type: expected one of text, title, list, table, formula, figure, got 'paragraph'",
        ),
        (
            truth(type=3),
            "blocks[0].type: expected one of text, title, list, table, formula, figure, got a number",
        ),
        (truth(text=None), "blocks[0].text: expected a string, got null"),
        (truth(html=5), "blocks[0].html: expected a string or null, got a number"),
        (truth(latex=[]), "blocks[0].latex: expected a string or null, got a list"),
        (truth(bbox=[1, 2, 3]), "blocks[0].bbox: expected [x0, y0, x1, y1], got a list"),
        (truth(bbox=[1, 2, 3, True]), "blocks[0].bbox[3]: expected a number, got a boolean"),
        (truth(bbox=[10, 20, 10, 40]), "blocks[0].bbox: expected x0 < x1 and y0 < y1, got an empty box"),
        (truth(bbox=[10, 20, 110, 1500]), "blocks[0].bbox: outside the page 0..1000 x 0..1400"),
        (truth(bbox=[-50, 20, 110, 40]), "blocks[0].bbox: outside the page 0..1000 x 0..1400"),
        (truth(type="table"), "blocks[0].html: a table block needs its HTML"),
        (truth(type="table", html="just words"), "blocks[0].html: the table HTML does not parse into cells"),
        (truth(type="table", html="   "), "blocks[0].html: the table HTML does not parse into cells"),
    ],
)
def test_bad_truth_names_the_field(data: object, message: str) -> None:
    with pytest.raises(TruthError) as caught:
        parse_truth(data)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_an_error_never_echoes_a_long_or_private_value() -> None:
    secret = "PRIVATE-" + "x" * 200
    with pytest.raises(TruthError) as caught:
        parse_truth(truth(type=secret))
    assert "PRIVATE-xxxxxxxxxxxx" in str(caught.value)  # the first 20 characters name it
    assert "x" * 30 not in str(caught.value)
    with pytest.raises(TruthError) as caught:
        parse_truth(truth(text=[secret]))
    assert "PRIVATE" not in str(caught.value)


def test_a_box_a_rounding_off_the_page_is_cut_to_it() -> None:
    page = parse_truth(truth(bbox=[-0.5, 20, 1000.8, 40]))
    assert page.blocks[0].bbox == (0.0, 20.0, 1000.0, 40.0)


RENDER = {
    "status": "ok",
    "width": 800,
    "height": 1200,
    "dom": {
        "canvas": [800, 1200],
        "blocks": [
            {
                "type": "text",
                "text": "Para",
                "html": None,
                "latex": None,
                "box": [10, 10, 200, 30],
                "bbox_1000": [12.5, 8.33, 250, 25],
            },
            {
                "type": "table",
                "text": "a b",
                "html": TABLE,
                "latex": None,
                "box": [10, 40, 900, 90],
                "bbox_1000": [12.5, 33.33, 1000, 75],
            },
            {"type": "figure", "text": "", "html": None, "latex": None, "bbox_1000": [0, 500, 500, 1000]},
            {"type": "marquee", "text": "x", "box": [0, 0, 1, 1]},
            {"type": "text", "text": "gone", "box": [900, 10, 950, 30]},
        ],
    },
}


def test_a_render_gives_its_blocks_in_css_pixels_cut_to_the_image() -> None:
    page = from_render(RENDER)
    assert (page.width, page.height) == (800.0, 1200.0)
    assert page.blocks == (
        Block("text", "Para", (10.0, 10.0, 200.0, 30.0)),
        Block("table", "a b", (10.0, 40.0, 800.0, 90.0), html=TABLE),
        Block("figure", "", (0.0, 600.0, 400.0, 1200.0)),
    )


def test_a_failed_or_old_render_has_no_blocks() -> None:
    with pytest.raises(TruthError, match=r"^status: the render failed"):
        from_render({"status": "failed", "dom": None})
    with pytest.raises(TruthError, match=r"^dom.blocks: missing"):
        from_render({"status": "ok", "width": 10, "height": 10, "dom": {"canvas": [10, 10]}})


def test_load_page_tells_the_formats_apart_and_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(json.dumps(truth()))
    (tmp_path / "r.json").write_text(json.dumps(RENDER))
    (tmp_path / "bad.json").write_text('{"page": ')
    (tmp_path / "box.json").write_text(json.dumps(truth(bbox=[0, 0, 2000, 10])))
    assert load_page(tmp_path / "t.json").blocks[0].text == "Hello"
    assert len(load_page(tmp_path / "r.json").blocks) == 3
    with pytest.raises(TruthError, match=r"^bad.json: not JSON \(line 1, column 10\)$"):
        load_page(tmp_path / "bad.json")
    with pytest.raises(TruthError, match=r"^box.json: blocks\[0\].bbox: outside the page"):
        load_page(tmp_path / "box.json")


def test_a_prediction_in_the_truth_format_is_read_leniently() -> None:
    data = {
        "page": {"width": 1000, "height": 1400},
        "blocks": [
            {"type": "text", "text": "kept, cut to the page", "bbox": [-40, 20, 1100, 40]},
            {"type": "paragraph", "text": "unknown type: skipped", "bbox": [0, 0, 10, 10]},
            {"type": "table", "text": "cells as words", "html": "no cells", "bbox": [0, 100, 500, 300]},
            {"type": "text", "text": "entirely off the page: skipped", "bbox": [0, 2000, 10, 2100]},
        ],
    }
    page = parse_truth(data, lenient=True)
    assert page.blocks == (
        Block("text", "kept, cut to the page", (0.0, 20.0, 1000.0, 40.0)),
        Block("table", "cells as words", (0.0, 100.0, 500.0, 300.0), html="no cells"),
    )
    with pytest.raises(TruthError, match=r"^page.width"):
        parse_truth({"page": {"height": 10}, "blocks": []}, lenient=True)
