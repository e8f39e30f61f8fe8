"""The rule verifiers and the requirements format without a browser (docs/protocol.md "AesCode's
rule score"): render records built by hand, expected scores worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from annotation.render.page_charts import echarts_local_file
from annotation.render.page_checks import fold_text
from rule_score.requirements import RequirementsError, parse_requirements
from rule_score.summary import OutputResult, summarize
from rule_score.verifiers import chart_rows, fold, rule_result, table_rows


def record(**dom: Any) -> dict[str, Any]:
    base = {"visible_text": "", "content_boxes": [], "blocks": [], "charts": [], "truncated": False}
    return {"status": "ok", "dom": {**base, **dom}}


def test_text_is_folded_as_the_render_checks_fold_it() -> None:
    sample = "Ｑ３\u00a0Report\n  ÉTÉ"
    assert fold(sample) == fold_text(sample) == "q3reportété"
    req = parse_requirements({"text": ["q3 report", "été", "absent"]})
    result = rule_result(record(visible_text="ＱＱ Q3   REPORT ÉTÉ"), req)
    assert result.channels["text"].score == pytest.approx(2 / 3)
    assert result.channels["text"].detail["missing"] == ["absent"]


def test_table_rows_match_in_order_with_numbers_read_as_numbers() -> None:
    html = (
        "<table><thead><tr><th>Rank</th><th>Region</th><th>Sales</th></tr></thead>"
        "<tbody><tr><td>1</td><td> North </td><td>1,200</td></tr><tr><td>2</td><td>South</td><td>95.50</td></tr></tbody></table>"
    )
    assert table_rows(html) == [["Rank", "Region", "Sales"], ["1", "North", "1,200"], ["2", "South", "95.50"]]
    blocks = [{"type": "table", "html": html}, {"type": "text", "html": None}]
    # Two of three rows found; ["South", 95.5] matches "95.50"; ["Sales", "North"] is out of order.
    req = parse_requirements({"tables": [{"rows": [["North", 1200], ["South", 95.5], ["Sales", "North"]]}]})
    result = rule_result(record(blocks=blocks), req)
    assert result.channels["table"].score == pytest.approx(2 / 3)
    assert result.channels["table"].detail["missing_rows"] == [[0, 2]]
    # ARIA grids are tables too.
    aria = (
        '<div role="table"><div role="row"><span role="cell">a</span><span role="cell">b</span></div></div>'
    )
    assert table_rows(aria) == [["a", "b"]]


def test_chart_rows_from_categories_names_tuples_and_datasets() -> None:
    chart = {
        "shown": True,
        "x_axes": [{"type": "value", "data": []}],
        "y_axes": [{"type": "category", "data": ["A", "B"]}],  # a horizontal bar chart
        "series": [
            {
                "name": "Cost",
                "x_axis": 0,
                "y_axis": 0,
                "data": [{"name": None, "value": 3}, {"name": None, "value": 4}],
            },
            {"name": None, "data": [{"name": "Slice", "value": 7}]},  # a pie
            {"name": "xy", "data": [{"name": None, "value": [1, 2]}]},  # a scatter
        ],
        "datasets": [{"source": [["k", "v"], ["p", 9]]}],
    }
    assert chart_rows(chart) == [
        ["k", "v"],
        ["p", 9],
        ["Cost", "A", 3],
        ["Cost", "B", 4],
        ["Slice", 7],
        ["xy", 1, 2],
    ]
    req = parse_requirements(
        {"charts": [{"rows": [["A", 3], ["Cost", "B", 4], ["Slice", 7], ["p", 9], ["B", 5]]}]}
    )
    result = rule_result(record(charts=[chart]), req)
    assert result.channels["chart"].score == pytest.approx(4 / 5)
    # A chart that is not shown (display: none) has no credit.
    hidden = rule_result(record(charts=[{**chart, "shown": False}]), req)
    assert hidden.channels["chart"].score == 0.0


def test_each_required_chart_takes_its_best_instance_and_the_channel_their_mean() -> None:
    one = {
        "shown": True,
        "series": [{"name": None, "data": [{"name": "a", "value": 1}, {"name": "b", "value": 2}]}],
    }
    two = {"shown": True, "series": [{"name": None, "data": [{"name": "c", "value": 3}]}]}
    req = parse_requirements({"charts": [{"rows": [["a", 1], ["b", 2]]}, {"rows": [["c", 3], ["d", 4]]}]})
    result = rule_result(record(charts=[one, two]), req)
    assert result.channels["chart"].score == pytest.approx((1 + 0.5) / 2)


def test_the_mask_excludes_what_was_not_asked_and_what_the_render_cannot_tell() -> None:
    req = parse_requirements(
        {"text": ["x"], "canvas": {"width": 100, "height": 100}, "charts": [{"rows": [["a", 1]]}]}
    )
    old = {
        "status": "ok",
        "dom": {"visible_text": "x", "truncated": False},
    }  # rendered before boxes and charts
    result = rule_result(old, req)
    assert result.applicable == {"text": True, "boundary": True, "table": False, "chart": True}
    assert {n: c.status for n, c in result.channels.items()} == {
        "text": "scored",
        "boundary": "error",
        "table": "not_applicable",
        "chart": "error",
    }
    assert result.rule == 1.0  # only text was scored
    assert rule_result({"status": "ok", "dom": None}, parse_requirements({"text": ["x"]})).rule is None
    assert rule_result(record(), parse_requirements({})).rule is None  # nothing asked
    failed = rule_result({"status": "failed", "dom": None}, req)
    assert failed.rule == 0.0 and failed.channels["table"].status == "not_applicable"
    assert failed.to_json()["channels"]["chart"] == {"status": "scored", "score": 0.0, "failed_render": True}


def test_boundary_share_by_hand() -> None:
    boxes = [[0, 0, 50, 50], [90, 0, 110, 10], [-10, 95, 10, 105], [0, 0, 0, 30]]  # the last has no area
    result = rule_result(
        record(content_boxes=boxes), parse_requirements({"canvas": {"width": 100, "height": 100}})
    )
    # Areas 2500 + 200 + 200; outside 100 (10x10 right) + 200 - 50 (the 10x5 corner left inside) = 250.
    assert result.channels["boundary"].detail["share_outside"] == pytest.approx(250 / 2900)
    assert result.channels["boundary"].score == pytest.approx(1 - 250 / 2900)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "expected an object with text, tables, charts or canvas, got a list"),
        ({"txt": []}, ".txt: unknown key (expected text, tables, charts, canvas)"),
        ({"text": "Hello"}, ".text: expected a list of strings, got a string"),
        ({"text": ["ok", 3]}, ".text[1]: expected a string, got int"),
        ({"text": ["  "]}, ".text[0]: an empty cell cannot be looked for"),
        (
            {"tables": [{"rows": [["a", True]]}]},
            ".tables[0].rows[0][1]: expected a string or a number, got true",
        ),
        ({"charts": [{"data": []}]}, ".charts[0].data: unknown key (expected rows)"),
        (
            {"charts": [{"rows": []}]},
            ".charts[0].rows: expected at least one of rows, got an empty list (leave the key out instead)",
        ),
        (
            {"canvas": {"width": 1280}},
            ".canvas.height: expected a whole number of CSS pixels from 1 to 100,000, got null",
        ),
        (
            {"canvas": {"width": 0, "height": 5}},
            ".canvas.width: expected a whole number of CSS pixels from 1 to 100,000, got 0",
        ),
    ],
)
def test_bad_requirements_are_one_line_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(RequirementsError) as error:
        parse_requirements(value)
    assert str(error.value) == message


def test_requirements_round_trip() -> None:
    raw = {
        "text": ["a"],
        "tables": [{"rows": [["x", 1.5]]}],
        "charts": [{"rows": [["m", 2]]}],
        "canvas": {"width": 10, "height": 20},
    }
    assert parse_requirements(raw).to_json() == raw
    assert parse_requirements({}).empty


def test_summary_means_and_brief_bootstrap_intervals() -> None:
    def out(brief: str, system: str, rule: float | None, text: float | None) -> OutputResult:
        channels = {
            "text": {"status": "scored", "score": text}
            if text is not None
            else {"status": "not_applicable", "score": None}
        }
        return OutputResult(brief, system, {"rule": rule, "channels": channels})

    outputs = [
        out("b1", "alpha", 1.0, 1.0),
        out("b2", "alpha", 0.5, None),
        out("b3", "alpha", 0.0, 0.0),
        out("b1", "beta", 0.25, 0.5),
        out("b2", "beta", None, None),
    ]
    first = summarize(outputs, resamples=500, seed=3)
    again = summarize(list(reversed(outputs)), resamples=500, seed=3)
    assert [s.to_json() for s in first] == [s.to_json() for s in again]  # deterministic, order-free
    alpha, beta = first
    assert alpha.system == "alpha" and alpha.outputs == 3
    assert alpha.measures["rule"].mean == pytest.approx(0.5) and alpha.measures["rule"].n == 3
    assert alpha.measures["text"].mean == pytest.approx(0.5) and alpha.measures["text"].n == 2
    assert 0.0 <= alpha.measures["rule"].low <= 0.5 <= alpha.measures["rule"].high <= 1.0  # type: ignore[operator]
    assert beta.measures["rule"].mean == 0.25 and beta.measures["rule"].n == 1
    assert beta.measures["chart"].mean is None and beta.measures["chart"].n == 0


def test_only_known_cdn_urls_of_echarts_builds_are_served_locally() -> None:
    served = [
        "https://cdn.jsdelivr.net/npm/echarts@5.4.3/dist/echarts.min.js",
        "https://unpkg.com/echarts@5/dist/echarts.js",
        "https://cdnjs.cloudflare.com/ajax/libs/echarts/5.4.3/echarts.min.js",
        "https://cdn.jsdelivr.net/npm/echarts/dist/echarts.common.min.js?v=1",
    ]
    for url in served:
        path = echarts_local_file(url)
        assert path is not None and path.parent.name == "dist" and path.parent.parent.name == "echarts", url
    assert echarts_local_file(served[0]).name == "echarts.min.js"  # type: ignore[union-attr]
    refused = [
        "https://example.com/echarts/5/echarts.min.js",  # not a CDN
        "https://cdn.jsdelivr.net/npm/echarts-gl/dist/echarts-gl.min.js",  # another package's build
        "https://cdn.jsdelivr.net/npm/chart.js/dist/chart.min.js",
        "file:///usr/share/echarts/echarts.min.js",
        "https://cdn.jsdelivr.net/npm/echarts@5/dist/echarts.esm.min.js",  # a module build: not one of the UMD files
    ]
    for url in refused:
        assert echarts_local_file(url) is None, url
