"""ECharts in a rendered page: the npm copy for a CDN URL, and the live series read back
(docs/rendering.md "ECharts from the npm copy", docs/protocol.md "AesCode's rule score").

- :func:`echarts_local_file`: a request for ECharts from a public CDN (jsDelivr, unpkg, cdnjs and
  the other hosts of :data:`CDN_HOSTS`, a path ending in ``echarts.js``, ``echarts.min.js`` or the
  ``common``/``simple`` builds) is answered with the same build from ``node_modules/echarts/dist``,
  the copy ``npm ci`` installs from ``package-lock.json`` (as htmx is). Whatever version the URL
  names, the page gets the locked one, its charts drawn without animation (:data:`STILL_JS`);
  nothing is fetched.
- :data:`CHARTS_JS` runs in the page after it settled, in the same round trip as the DOM export
  (``dom.charts`` in the render's JSON): for every element with ECharts' ``_echarts_instance_``
  attribute, the instance ``echarts.getInstanceByDom`` gives back, its ``getOption()`` series
  (type, name, axis indexes, data), category axes and dataset sources, and its element's box.
  What is drawn is read from the live instance, so a picture of a chart has no series.

At most :data:`MAX_CHARTS` charts, :data:`MAX_SERIES` series a chart, :data:`MAX_POINTS` data
points a series (and category labels an axis, rows a dataset), each value a finite number, a string
cut to :data:`MAX_CELL` characters, null, or a list of at most :data:`MAX_TUPLE` of those;
``charts_truncated`` says when anything was cut.

No Django here (the renderer's threads use it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ECHARTS_DIST = Path(__file__).resolve().parents[2] / "node_modules" / "echarts" / "dist"
# Public CDNs that serve npm packages by path. A URL of another host is refused as any request is.
CDN_HOSTS = frozenset(
    {
        "cdn.jsdelivr.net",
        "fastly.jsdelivr.net",
        "gcore.jsdelivr.net",
        "testingcf.jsdelivr.net",
        "unpkg.com",
        "cdnjs.cloudflare.com",
        "cdn.bootcdn.net",
        "cdn.bootcss.com",
        "cdn.staticfile.org",
        "cdn.staticfile.net",
        "lib.baomitu.com",
        "registry.npmmirror.com",
        "npm.elemecdn.com",
        "esm.sh",
    }
)
# The path names ECharts (its package or a folder of that name) and ends in one of its UMD builds.
_ECHARTS_PATH = re.compile(
    r"(?i)/(?:[^/]*/)*?[^/]*echarts[^/]*/(?:.*/)?(echarts(?:\.common|\.simple)?(?:\.min)?\.js)$"
)
MAX_CHARTS = 50
MAX_SERIES = 50
MAX_POINTS = 5_000
MAX_CELL = 200
MAX_TUPLE = 8


def echarts_local_file(url: str) -> Path | None:
    """The npm copy's file for a CDN URL of an ECharts build, or None (not such a URL, or no copy
    installed: the request is then refused like any other)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or (parts.hostname or "").lower() not in CDN_HOSTS:
        return None
    match = _ECHARTS_PATH.search(parts.path)
    if not match:
        return None
    path = ECHARTS_DIST / match[1].lower()
    return path if path.is_file() else None


# After the library: every chart it makes is drawn without animation (the renderer's pages have
# none, docs/rendering.md "Determinism"), so the capture shows the chart whole, not part-grown at
# the instant the page's clock stopped. Only the top-level ``animation`` switch of an option
# object is set; the option's data is the page's own.
STILL_JS = r"""
;(function () {
  var lib = typeof window !== 'undefined' && window.echarts;
  if (!lib || typeof lib.init !== 'function') return;
  var init = lib.init;
  lib.init = function () {
    var chart = init.apply(this, arguments);
    var setOption = chart.setOption;
    chart.setOption = function (option) {
      var args = Array.prototype.slice.call(arguments);
      if (option && typeof option === 'object' && !Array.isArray(option)) args[0] = Object.assign({}, option, {animation: false});
      return setOption.apply(this, args);
    };
    return chart;
  };
})();
"""


@cache
def echarts_bytes(path: Path) -> bytes:
    """The build's bytes and :data:`STILL_JS`, read once per worker (the file only changes with
    ``npm ci``)."""
    return path.read_bytes() + STILL_JS.encode()


CHARTS_JS = (
    r"""
() => {
  const MAX_CHARTS = __MAX_CHARTS__, MAX_SERIES = __MAX_SERIES__, MAX_POINTS = __MAX_POINTS__;
  const MAX_CELL = __MAX_CELL__, MAX_TUPLE = __MAX_TUPLE__;
  const lib = window.echarts;
  const elements = document.querySelectorAll('[_echarts_instance_]');
  let truncated = false;
  if (!lib || typeof lib.getInstanceByDom !== 'function') return {charts: [], truncated: false, found: elements.length};
  const scalar = (v) => {
    if (typeof v === 'number') return Number.isFinite(v) ? v : null;
    if (typeof v === 'string') { if (v.length > MAX_CELL) truncated = true; return v.slice(0, MAX_CELL); }
    if (typeof v === 'boolean') return String(v);
    if (v instanceof Date) return isNaN(v.getTime()) ? null : v.toISOString();
    return null;
  };
  const cell = (v) => {
    if (Array.isArray(v)) {
      if (v.length > MAX_TUPLE) truncated = true;
      return v.slice(0, MAX_TUPLE).map((x) => (x && typeof x === 'object' && !(x instanceof Date) ? scalar(x.value) : scalar(x)));
    }
    return scalar(v);
  };
  // One datum: {name, value} (a pie's slice, an object datum) or a bare value.
  const datum = (d) => {
    if (d && typeof d === 'object' && !Array.isArray(d) && !(d instanceof Date)) {
      return {name: d.name === undefined || d.name === null ? null : scalar(String(d.name)), value: cell(d.value)};
    }
    return {name: null, value: cell(d)};
  };
  const list = (values, f) => {
    if (!Array.isArray(values)) return [];
    if (values.length > MAX_POINTS) truncated = true;
    return values.slice(0, MAX_POINTS).map(f);
  };
  const axes = (option, key) => (Array.isArray(option[key]) ? option[key] : option[key] ? [option[key]] : []).map((a) => ({
    type: typeof a.type === 'string' ? a.type : null,
    data: list(a.data, (d) => (d && typeof d === 'object' && !Array.isArray(d) ? scalar(d.value) : scalar(d))),
  }));
  const charts = [];
  for (const el of elements) {
    if (charts.length >= MAX_CHARTS) { truncated = true; break; }
    let instance, option;
    try {
      instance = lib.getInstanceByDom(el);
      if (!instance || (instance.isDisposed && instance.isDisposed())) continue;
      option = instance.getOption();
    } catch (e) { continue; }
    if (!option) continue;
    const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    const series = Array.isArray(option.series) ? option.series : [];
    if (series.length > MAX_SERIES) truncated = true;
    const datasets = Array.isArray(option.dataset) ? option.dataset : option.dataset ? [option.dataset] : [];
    charts.push({
      box: [r.left + window.scrollX, r.top + window.scrollY, r.right + window.scrollX, r.bottom + window.scrollY]
        .map((v) => Math.round(v * 100) / 100),
      shown: s.display !== 'none' && s.visibility === 'visible' && r.width >= 1 && r.height >= 1,
      series: series.slice(0, MAX_SERIES).map((x) => ({
        type: typeof x.type === 'string' ? x.type : null,
        name: x.name === undefined || x.name === null ? null : scalar(String(x.name)),
        x_axis: Number.isInteger(x.xAxisIndex) ? x.xAxisIndex : 0,
        y_axis: Number.isInteger(x.yAxisIndex) ? x.yAxisIndex : 0,
        dataset: Number.isInteger(x.datasetIndex) ? x.datasetIndex : null,
        data: list(x.data, datum),
      })),
      x_axes: axes(option, 'xAxis'),
      y_axes: axes(option, 'yAxis'),
      datasets: datasets.slice(0, MAX_SERIES).map((d) => ({source: list(d && d.source, (row) =>
        cell(row && typeof row === 'object' && !Array.isArray(row) ? Object.values(row) : row))})),
    });
  }
  return {charts, truncated, found: elements.length};
}
""".replace("__MAX_CHARTS__", str(MAX_CHARTS))
    .replace("__MAX_SERIES__", str(MAX_SERIES))
    .replace("__MAX_POINTS__", str(MAX_POINTS))
    .replace("__MAX_CELL__", str(MAX_CELL))
    .replace("__MAX_TUPLE__", str(MAX_TUPLE))
)


def chart_summaries(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The shown charts of a render's ``dom.charts``, in the short form a study keeps with a
    rendering's text (docs/protocol.md "The built-in local judge"): ``{box, types, names,
    categories}``: the element's box in CSS px, its series' types and names, and the category
    labels of its axes (at most :data:`MAX_SUMMARY_LABELS` of each list). None for a failed render."""
    dom = record.get("dom") if record.get("status") == "ok" else None
    found = dom.get("charts") if isinstance(dom, Mapping) else None
    out: list[dict[str, Any]] = []
    for chart in found if isinstance(found, list) else []:
        if not isinstance(chart, Mapping) or chart.get("shown") is not True:
            continue
        box = chart.get("box")
        if not (isinstance(box, list) and len(box) == 4 and all(_finite(v) for v in box)):
            continue
        series = [s for s in chart.get("series") or [] if isinstance(s, Mapping)]
        labels = [
            d for axis in [*(chart.get("x_axes") or []), *(chart.get("y_axes") or [])] if isinstance(axis, Mapping)
            for d in axis.get("data") or [] if isinstance(d, str)
        ]
        out.append({
            "box": [round(float(v), 2) for v in box],
            "types": _unique(s.get("type") for s in series),
            "names": _unique(s.get("name") for s in series),
            "categories": _unique(labels),
        })
        if len(out) == MAX_CHARTS:
            break
    return out


MAX_SUMMARY_LABELS = 50


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _unique(values: Iterable[object]) -> list[str]:
    """The distinct strings of ``values`` in order, each cut to :data:`MAX_CELL`, at most
    :data:`MAX_SUMMARY_LABELS`."""
    out: list[str] = []
    for value in values:
        if isinstance(value, str) and value.strip() and value[:MAX_CELL] not in out:
            out.append(value[:MAX_CELL])
            if len(out) == MAX_SUMMARY_LABELS:
                break
    return out
