"""Media regions from the rendered DOM (docs/protocol.md "Media regions from the DOM").

:data:`COLLECT_JS` runs in the page after it settled, scrolled to the top, and returns the boxes
of its media elements in CSS pixels of the captured image (whose top left is the page's top left,
in both modes), each clipped by the ancestors that clip it. :func:`media_regions` turns them into
the protocol's ``[{kind, bbox_1000}]`` for an image of ``width`` × ``height`` CSS pixels: clipped
to the image, empty boxes dropped, coordinates 0–1000 rounded outwards to 0.01.

The rule (the protocol's words, implemented here and in the script):

- **chart**: a ``canvas``; an ``svg`` larger than an icon (either side above twice its font size);
  a chart container: an element whose ``id`` or ``class`` names a chart, plot or graph, or the
  root of a known chart library (Highcharts, Plotly, ECharts, Vega, ApexCharts, Recharts,
  Chart.js, Google Charts).
- **photo**: ``img`` (and so ``picture``), ``video``, ``iframe``, ``object``, ``embed``, and an
  element whose computed ``background-image`` is an image (``url(...)``, not a gradient alone).
- The outermost wins: an element inside another media region is part of it, not a region of its
  own (a chart library's canvas inside its container, an ``img`` in a hero with a background).
- Hidden elements (``display: none``, ``visibility: hidden``, opacity 0 on it or an ancestor) are
  not regions; a box is the element's border box as rendered (``getBoundingClientRect``: after
  transforms, the smallest upright rectangle around it), cut to every ancestor that clips its
  overflow, then to the captured image.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

MEDIA_KINDS = ("photo", "chart")

COLLECT_JS = r"""
() => {
  const CHART_WORD = /(^|[^a-z])(chart|charts|plot|plots|graph|graphs|sparkline)([^a-z]|$)/i;
  const CHART_LIBRARY = '.highcharts-container, .js-plotly-plot, .plotly, [_echarts_instance_], .vega-embed, '
    + '.apexcharts-canvas, .recharts-wrapper, .chartjs-render-monitor, .google-visualization-chart, .c3, .nvd3-svg';
  const PHOTO_TAGS = new Set(['IMG', 'VIDEO', 'IFRAME', 'OBJECT', 'EMBED']);
  const out = [];
  const hidden = (el) => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || parseFloat(s.opacity) === 0) return true;
      if (e === el && s.visibility !== 'visible') return true;
    }
    return false;
  };
  const classText = (el) => {
    const c = el.getAttribute('class') || '';
    return (el.id || '') + ' ' + c;
  };
  const kindOf = (el) => {
    const tag = el.tagName.toUpperCase();
    if (tag === 'CANVAS') return 'chart';
    if (tag === 'SVG') {
      const r = el.getBoundingClientRect();
      const font = parseFloat(getComputedStyle(el).fontSize) || 16;
      return (r.width > 2 * font || r.height > 2 * font) ? 'chart' : null;
    }
    if (el.matches(CHART_LIBRARY) || CHART_WORD.test(classText(el))) return 'chart';
    if (PHOTO_TAGS.has(tag)) return 'photo';
    const bg = getComputedStyle(el).backgroundImage;
    if (bg && bg !== 'none' && /url\(/i.test(bg)) return 'photo';
    return null;
  };
  const clipped = (el, rect) => {
    let [x0, y0, x1, y1] = [rect.left, rect.top, rect.right, rect.bottom];
    for (let e = el.parentElement; e && e !== document.documentElement && e !== document.body; e = e.parentElement) {
      const s = getComputedStyle(e);
      const clipX = s.overflowX !== 'visible', clipY = s.overflowY !== 'visible';
      const clipPath = s.clipPath && s.clipPath !== 'none';
      if (!clipX && !clipY && !clipPath) continue;
      const r = e.getBoundingClientRect();
      if (clipX || clipPath) { x0 = Math.max(x0, r.left); x1 = Math.min(x1, r.right); }
      if (clipY || clipPath) { y0 = Math.max(y0, r.top); y1 = Math.min(y1, r.bottom); }
    }
    return [x0, y0, x1, y1];
  };
  const walk = (el) => {
    for (const child of el.children) {
      const kind = kindOf(child);
      if (kind) {
        if (!hidden(child)) {
          const r = child.getBoundingClientRect();
          if (r.width > 0 && r.height > 0) out.push({kind, box: clipped(child, r)});
        }
        continue;  // the outermost wins: what is inside is part of this region
      }
      if (child.tagName.toUpperCase() !== 'SVG') walk(child);
    }
  };
  if (document.body) walk(document.body);
  return out;
}
"""


def _round_down(value: float) -> float:
    return math.floor(value * 100) / 100


def _round_up(value: float) -> float:
    return math.ceil(value * 100) / 100


def media_regions(boxes: Iterable[dict[str, Any]], *, width: float, height: float) -> list[dict[str, Any]]:
    """``[{kind, box: [x0, y0, x1, y1] in CSS px}]`` → the protocol's media regions of an image of
    ``width`` × ``height`` CSS pixels (docs/protocol.md "Media regions from the DOM")."""
    regions: list[dict[str, Any]] = []
    for item in boxes:
        kind = item.get("kind")
        box = item.get("box")
        if kind not in MEDIA_KINDS or not isinstance(box, list | tuple) or len(box) != 4:
            continue
        try:
            x0, y0, x1, y1 = (float(v) for v in box)
        except (TypeError, ValueError):
            continue
        if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
            continue
        x0, x1 = max(x0, 0.0), min(x1, width)
        y0, y1 = max(y0, 0.0), min(y1, height)
        if x1 - x0 < 1 or y1 - y0 < 1:  # empty, or off the captured image
            continue
        bbox = [
            _round_down(1000 * x0 / width), _round_down(1000 * y0 / height),
            _round_up(1000 * x1 / width), _round_up(1000 * y1 / height),
        ]
        bbox = [min(max(v, 0.0), 1000.0) for v in bbox]
        regions.append({"kind": kind, "bbox_1000": bbox})
    return regions
