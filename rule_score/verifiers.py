"""AesCode's deterministic verifiers and its Rule score, from a render's JSON
(docs/protocol.md "AesCode's rule score").

:func:`rule_result` scores one rendered output against its brief's
:class:`~rule_score.requirements.Requirements`, channel by channel:

- **Text**: the share of the required strings found in the page's visible text (``dom.visible_text``),
  both compared after :func:`fold` (NFKC, case folding, every whitespace removed: the comparison of
  docs/protocol.md "Checks computed from the render").
- **Boundary**: ``1 − s``, ``s`` the share of the content area outside the brief's canvas
  ``[0, 0, width, height]``: over the content boxes of the render (``dom.content_boxes``: text runs
  and media elements, cut to what clips them), the sum of their areas outside the canvas over the
  sum of their areas (each box counted once, overlaps as often as they occur).
- **Table**: for each required table, the share of its rows found in one table of the render (the
  best one): a row is found when its cells appear, in order, among the cells of one ``tr`` (or
  ``role=row``) of a table block's HTML (``dom.blocks``); the channel is the mean over required tables.
- **Chart**: the same against the rows of one live ECharts instance (``dom.charts``): a datum of a
  series gives the row ``[series name, category, value…]`` (its own ``name`` instead of the category
  when it has one, as a pie's slice), a dataset source row gives itself. A picture of a chart has
  no instance and scores 0.

Cells match when both read as numbers that are equal (``1,200`` reads as 1200), or else when their
folded texts are equal. A channel the brief does not ask for is ``not_applicable`` and left out of
Rule; a failed render scores 0 on every applicable channel (an explicit failure, kept in the mean); a
render without the export a channel reads (made before it existed) is an ``error`` for that channel,
left out and reported. Rule is the mean of the scored channels (AesCode Table D1's applicability
mask is ``status != "not_applicable"``). No Django here.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rule_score.requirements import Cell, RequiredData, Requirements

CHANNELS = ("text", "boundary", "table", "chart")
SCORED, NOT_APPLICABLE, ERROR = "scored", "not_applicable", "error"
MAX_LISTED = 20  # missing strings and rows listed per channel
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_GROUPED = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$")


def fold(text: str) -> str:
    """NFKC, case-folded, every whitespace removed (docs/protocol.md "Checks computed from the
    render": ``Hel<b>lo</b> world`` holds "hello world")."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass(frozen=True)
class ChannelResult:
    status: str  # scored, not_applicable or error
    score: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "score": self.score, **self.detail}


@dataclass(frozen=True)
class RuleResult:
    """One output's channels, its applicability mask and its Rule (None: nothing scored)."""

    channels: dict[str, ChannelResult]
    rule: float | None

    @property
    def applicable(self) -> dict[str, bool]:
        return {name: c.status != NOT_APPLICABLE for name, c in self.channels.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "applicable": self.applicable,
            "channels": {name: c.to_json() for name, c in self.channels.items()},
        }


def _key(value: object) -> tuple[str, float | str] | None:
    """What a cell compares as: ``("n", number)`` or ``("s", folded text)``; None for an empty cell."""
    if isinstance(value, bool) or value is None:
        return None if value is None else ("s", fold(str(value).lower()))
    if isinstance(value, int | float):
        return ("n", float(value)) if math.isfinite(value) else None
    text = fold(str(value))
    if not text:
        return None
    bare = text.replace(",", "") if _GROUPED.match(text) else text
    if _NUMBER.match(bare):
        return ("n", float(bare))
    return ("s", text)


def _same(a: tuple[str, float | str], b: tuple[str, float | str]) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "n":
        x, y = float(a[1]), float(b[1])
        return abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y))
    return a[1] == b[1]


def _holds(row: Sequence[tuple[str, float | str] | None], wanted: Sequence[tuple[str, float | str]]) -> bool:
    """Whether ``wanted``'s cells appear in ``row`` in order (other cells may come between)."""
    i = 0
    for cell in row:
        if i < len(wanted) and cell is not None and _same(cell, wanted[i]):
            i += 1
    return i == len(wanted)


def _data_score(
    required: Sequence[RequiredData], sources: Sequence[list[list[tuple[str, float | str] | None]]]
) -> ChannelResult:
    """Each required table or chart against its best source (the one holding most of its rows)."""
    scores, missing = [], []
    for n, data in enumerate(required):
        wanted = [[k for k in (_key(c) for c in row) if k is not None] for row in data.rows]
        best, best_found = -1, [False] * len(wanted)
        for s, rows in enumerate(sources):
            found = [any(_holds(r, w) for r in rows) for w in wanted]
            if sum(found) > sum(best_found) or best < 0:
                best, best_found = s, found
        scores.append(sum(best_found) / len(wanted))
        missing += [[n, i] for i, ok in enumerate(best_found) if not ok]
    detail = {"required": len(required), "sources": len(sources), "missing_rows": missing[:MAX_LISTED]}
    return ChannelResult(SCORED, sum(scores) / len(scores), detail)


def table_rows(html: str) -> list[list[str]]:
    """The rows of one table block's HTML, each its cells' text (``tr`` / ``td``, ``th``; or the
    ARIA ``row`` / ``cell``, ``gridcell``, ``columnheader``, ``rowheader``). A nested table's rows
    are rows too (each is a row of the page's data)."""
    import lxml.html

    try:
        root = lxml.html.fragment_fromstring(html, create_parent="div")
    except (ValueError, TypeError, lxml.etree.ParserError):
        return []
    rows: list[list[str]] = []
    for tr in root.iter("tr"):
        rows.append([" ".join(c.text_content().split()) for c in tr if c.tag in ("td", "th")])
    cell_roles = {"cell", "gridcell", "columnheader", "rowheader"}
    for row in root.xpath(".//*[@role='row']"):
        if row.tag != "tr":
            rows.append(
                [" ".join(c.text_content().split()) for c in row.iter() if c.get("role") in cell_roles]
            )
    return rows


def chart_rows(chart: Mapping[str, Any]) -> list[list[Cell | None]]:
    """The rows of one live ECharts instance (``dom.charts[i]``), see the module's docstring."""
    rows: list[list[Cell | None]] = []
    x_axes, y_axes = chart.get("x_axes") or [], chart.get("y_axes") or []
    datasets = chart.get("datasets") or []

    def categories(axes: Sequence[Any], index: object) -> list[Any] | None:
        if isinstance(index, int) and 0 <= index < len(axes) and isinstance(axes[index], Mapping):
            axis = axes[index]
            if axis.get("type") == "category" or (axis.get("type") is None and axis.get("data")):
                return list(axis.get("data") or [])
        return None

    for source in datasets:
        for row in source.get("source") or [] if isinstance(source, Mapping) else []:
            rows.append(list(row) if isinstance(row, list) else [row])
    for series in chart.get("series") or []:
        if not isinstance(series, Mapping):
            continue
        name = series.get("name")
        cats = categories(x_axes, series.get("x_axis", 0)) or categories(y_axes, series.get("y_axis", 0))
        for i, datum in enumerate(series.get("data") or []):
            if not isinstance(datum, Mapping):
                continue
            value = datum.get("value")
            values = list(value) if isinstance(value, list) else [value]
            label = datum.get("name")
            if label is None and cats is not None and not isinstance(value, list) and i < len(cats):
                label = cats[i]
            row = ([label] if label is not None else []) + values
            rows.append(([name] if name is not None else []) + row)
    return rows


def _keys(rows: Iterable[Sequence[object]]) -> list[list[tuple[str, float | str] | None]]:
    return [[_key(c) for c in row] for row in rows]


def _area(box: Sequence[float]) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def boundary_share(boxes: Iterable[Sequence[float]], width: float, height: float) -> tuple[float, float, int]:
    """(content area, the part of it outside ``[0, 0, width, height]``, boxes reaching outside)."""
    total = outside = 0.0
    n_outside = 0
    for b in boxes:
        area = _area(b)
        if area <= 0:
            continue
        inside = _area((max(b[0], 0.0), max(b[1], 0.0), min(b[2], width), min(b[3], height)))
        total += area
        if area - inside > 0:
            outside += area - inside
            n_outside += 1
    return total, outside, n_outside


def _boxes(dom: Mapping[str, Any]) -> list[tuple[float, float, float, float]]:
    out = []
    for b in dom.get("content_boxes") or []:
        numbers = (
            isinstance(b, list)
            and len(b) == 4
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in b)
        )
        if numbers and all(math.isfinite(v) for v in b):
            out.append((float(b[0]), float(b[1]), float(b[2]), float(b[3])))
    return out


def rule_result(record: Mapping[str, Any], requirements: Requirements) -> RuleResult:
    """Score one render's JSON record (docs/rendering.md "The JSON of a render") against a brief's
    requirements. Deterministic: the same record and requirements give the same result."""
    asked = {
        "text": bool(requirements.text),
        "boundary": requirements.canvas is not None,
        "table": bool(requirements.tables),
        "chart": bool(requirements.charts),
    }
    channels: dict[str, ChannelResult] = {}
    rendered = record.get("status") == "ok"
    dom = record.get("dom") if rendered else None
    for name in CHANNELS:
        if not asked[name]:
            channels[name] = ChannelResult(NOT_APPLICABLE)
        elif not rendered:
            channels[name] = ChannelResult(SCORED, 0.0, {"failed_render": True})
        elif not isinstance(dom, Mapping):
            channels[name] = ChannelResult(ERROR, None, {"error": "the render has no DOM export"})
        else:
            channels[name] = _CHANNEL[name](dom, requirements)
    scored = [c.score for c in channels.values() if c.status == SCORED and c.score is not None]
    return RuleResult(channels=channels, rule=sum(scored) / len(scored) if scored else None)


def _text(dom: Mapping[str, Any], req: Requirements) -> ChannelResult:
    visible = fold(str(dom.get("visible_text") or ""))
    missing = [s for s in req.text if fold(s) not in visible]
    detail: dict[str, Any] = {"required": len(req.text), "missing": missing[:MAX_LISTED]}
    if dom.get("truncated"):
        detail["truncated"] = True
    return ChannelResult(SCORED, (len(req.text) - len(missing)) / len(req.text), detail)


def _boundary(dom: Mapping[str, Any], req: Requirements) -> ChannelResult:
    if "content_boxes" not in dom:
        return ChannelResult(
            ERROR, None, {"error": "the render has no content boxes (rendered before they existed)"}
        )
    assert req.canvas is not None
    total, outside, n_outside = boundary_share(_boxes(dom), *req.canvas)
    share = outside / total if total > 0 else 0.0
    detail: dict[str, Any] = {"canvas": list(req.canvas), "share_outside": share, "boxes_outside": n_outside}
    if dom.get("content_truncated"):
        detail["truncated"] = True
    return ChannelResult(SCORED, 1.0 - share, detail)


def _table(dom: Mapping[str, Any], req: Requirements) -> ChannelResult:
    blocks = dom.get("blocks")
    if not isinstance(blocks, list):
        return ChannelResult(
            ERROR, None, {"error": "the render has no blocks (rendered before they existed)"}
        )
    sources = [
        _keys(table_rows(b["html"]))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "table" and isinstance(b.get("html"), str)
    ]
    return _data_score(req.tables, sources)


def _chart(dom: Mapping[str, Any], req: Requirements) -> ChannelResult:
    charts = dom.get("charts")
    if not isinstance(charts, list):
        return ChannelResult(
            ERROR, None, {"error": "the render has no chart export (rendered before it existed)"}
        )
    sources = [_keys(chart_rows(c)) for c in charts if isinstance(c, Mapping) and c.get("shown")]
    return _data_score(req.charts, sources)


_CHANNEL = {"text": _text, "boundary": _boundary, "table": _table, "chart": _chart}


def rule_result_from_json(value: object) -> RuleResult:
    """A stored result (:meth:`RuleResult.to_json`, as a bundle carries it) checked back into a
    :class:`RuleResult`; :class:`~rule_score.requirements.RequirementsError` names the bad field.
    ``applicable`` and ``rule`` are checked against the channels (the mask and the mean they give)."""
    from rule_score.requirements import RequirementsError

    if not isinstance(value, Mapping):
        raise RequirementsError("", "expected an object {rule, applicable, channels}")
    unknown = sorted(set(value) - {"rule", "applicable", "channels"})
    if unknown:
        raise RequirementsError(f".{unknown[0]}", "unknown key (expected rule, applicable, channels)")
    raw = value.get("channels")
    if not isinstance(raw, Mapping) or sorted(raw) != sorted(CHANNELS):
        raise RequirementsError(".channels", f"expected an object with exactly {', '.join(CHANNELS)}")
    channels: dict[str, ChannelResult] = {}
    for name in CHANNELS:
        entry = raw[name]
        if not isinstance(entry, Mapping) or entry.get("status") not in (SCORED, NOT_APPLICABLE, ERROR):
            raise RequirementsError(
                f".channels.{name}.status", f"expected {SCORED}, {NOT_APPLICABLE} or {ERROR}"
            )
        score = entry.get("score")
        if entry["status"] == SCORED:
            if not isinstance(score, int | float) or isinstance(score, bool) or not 0 <= score <= 1:
                raise RequirementsError(f".channels.{name}.score", "a scored channel has a score from 0 to 1")
        elif score is not None:
            raise RequirementsError(
                f".channels.{name}.score", f"a channel {entry['status']} has no score (null)"
            )
        detail = {k: v for k, v in entry.items() if k not in ("status", "score")}
        channels[name] = ChannelResult(entry["status"], None if score is None else float(score), detail)
    scored = [c.score for c in channels.values() if c.score is not None]
    result = RuleResult(channels=channels, rule=sum(scored) / len(scored) if scored else None)
    if "applicable" in value and value["applicable"] != result.applicable:
        raise RequirementsError(
            ".applicable", "does not match the channels (applicable: every channel not not_applicable)"
        )
    given = value.get("rule")
    if (given is None) != (result.rule is None) or (
        result.rule is not None
        and (not isinstance(given, int | float) or abs(float(given) - result.rule) > 1e-9)
    ):
        raise RequirementsError(
            ".rule", "expected the mean of the scored channels' scores (null when none is scored)"
        )
    return result
