"""Ground truth and a render's blocks in the one format a study keeps them in (docs/protocol.md
"Ground truth"): ``{page: {width, height}, blocks: [{type, text, html?, latex?, bbox}]}``.

The format is read and checked by :func:`objective.blocks.parse_truth` (a pure module: any app may
use it); this module turns its :class:`~objective.blocks.PageBlocks` back into that JSON, so what
a study stores, exports and scores is the checked, normalized page (boxes cut to the page by the
format's tolerance), whether it came as JSON, as an HTML page rendered with the study's settings,
or from a candidate's render.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from objective.blocks import PageBlocks, TruthError, from_render, parse_truth


def page_blocks_json(page: PageBlocks) -> dict[str, Any]:
    """A page's blocks as the documented JSON (``html`` and ``latex`` only where known)."""
    blocks = []
    for block in page.blocks:
        entry: dict[str, Any] = {
            "type": block.type,
            "text": block.text,
            "bbox": [round(v, 2) for v in block.bbox],
        }
        if block.html is not None:
            entry["html"] = block.html
        if block.latex is not None:
            entry["latex"] = block.latex
        blocks.append(entry)
    return {"page": {"width": page.width, "height": page.height}, "blocks": blocks}


def truth_checked(data: Any) -> dict[str, Any]:
    """Decoded ground-truth JSON, checked and normalized; :class:`TruthError` names the bad field."""
    return page_blocks_json(parse_truth(data))


def blocks_checked(data: Any) -> dict[str, Any]:
    """A candidate's blocks in the format, read as a prediction (``parse_truth(lenient=True)``): a
    block that does not follow the format is dropped and a table without cells is kept, to be
    scored by its text; only a bad ``page`` or ``blocks`` raises :class:`TruthError`."""
    return page_blocks_json(parse_truth(data, lenient=True))


def truth_of_render(record: Mapping[str, Any]) -> dict[str, Any]:
    """A render's ``dom.blocks`` as ground truth (an HTML ground-truth page), checked as a JSON one
    would be: a table whose HTML has no cells is refused. :class:`TruthError` names the field."""
    return truth_checked(page_blocks_json(from_render(record)))


def blocks_of_render(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """A candidate's render's blocks in the format, or None when its JSON has none (a failed render,
    or one made before blocks existed). Nothing of a candidate's is refused: a table whose HTML
    does not parse is kept and scored as the protocol scores it."""
    try:
        return page_blocks_json(from_render(record))
    except TruthError:
        return None


def page_text_of_render(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a study keeps of a rendering's page for the local judge (docs/protocol.md "The built-in
    local judge"): its blocks in the format (:func:`blocks_of_render`) and, when the page drew live
    ECharts charts, their summaries under ``charts``
    (:func:`annotation.render.page_charts.chart_summaries`). None when the render has no blocks."""
    from annotation.render.page_charts import chart_summaries

    page = blocks_of_render(record)
    if page is None:
        return None
    charts = chart_summaries(record)
    return {**page, "charts": charts} if charts else page


def page_text_checked(data: Any) -> dict[str, Any]:
    """A rendering's kept page (:func:`page_text_of_render`) from a bundle: its blocks read as a
    prediction (:func:`blocks_checked`), its ``charts`` checked field by field. :class:`TruthError`
    names the bad field."""
    from annotation.render.page_charts import MAX_CELL, MAX_CHARTS, MAX_SUMMARY_LABELS

    page = blocks_checked(data)
    charts = data.get("charts", [])
    if not isinstance(charts, list) or len(charts) > MAX_CHARTS:
        raise TruthError(f"charts: expected a list of at most {MAX_CHARTS} charts")
    kept = []
    for i, chart in enumerate(charts):
        if not isinstance(chart, Mapping) or set(chart) != {"box", "types", "names", "categories"}:
            raise TruthError(f"charts[{i}]: expected an object {{box, types, names, categories}}")
        box = chart["box"]
        if not (
            isinstance(box, list) and len(box) == 4
            and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in box)
        ):
            raise TruthError(f"charts[{i}].box: expected four finite numbers")
        entry: dict[str, Any] = {"box": [float(v) for v in box]}
        for key in ("types", "names", "categories"):
            values = chart[key]
            if not (
                isinstance(values, list) and len(values) <= MAX_SUMMARY_LABELS
                and all(isinstance(v, str) and len(v) <= MAX_CELL for v in values)
            ):
                raise TruthError(
                    f"charts[{i}].{key}: expected at most {MAX_SUMMARY_LABELS} strings of at most {MAX_CELL} characters"
                )
            entry[key] = list(values)
        kept.append(entry)
    return {**page, "charts": kept} if kept else page


def page_score_json(truth: dict[str, Any], blocks: dict[str, Any] | None) -> dict[str, Any]:
    """The objective protocol's score of a candidate's blocks (None: a failed render, scored as an
    empty page of the truth's size) against its page's truth, as JSON keeps it. Django-free, so a
    process pool's workers can run it (``objective_scores_refresh``)."""
    from objective.score import score_page

    truth_page = parse_truth(truth)
    if blocks is None:
        predicted = PageBlocks(width=truth_page.width, height=truth_page.height, blocks=())
    else:
        predicted = parse_truth(blocks, lenient=True)  # a prediction: a malformed block is dropped
    return _jsonable(score_page(truth_page, predicted).as_dict())


def _jsonable(value: Any) -> Any:
    """A score dict as JSON keeps it (tuples as lists, NaN as null)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:
        return None
    return value


def blocks_digest(truth: Any, blocks: Any) -> str:
    """The SHA-256 of a truth and a candidate's blocks (canonical JSON): the cache key of a score."""
    text = json.dumps([truth, blocks], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = [
    "TruthError",
    "blocks_digest",
    "blocks_of_render",
    "page_blocks_json",
    "page_score_json",
    "page_text_checked",
    "page_text_of_render",
    "truth_checked",
    "truth_of_render",
]
