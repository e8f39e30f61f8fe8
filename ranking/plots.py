"""Server-side SVG for the leaderboard (docs/protocol.md "Deployment leaderboard" score intervals).

Plain SVG markup with presentation attributes only (no ``style`` attribute, no script), so it can
be inlined in pages served under the project's Content-Security-Policy and in the
self-contained HTML report. Every text is XML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

WIDTH = 760
ROW_HEIGHT = 28
LABEL_WIDTH = 230
RIGHT_PAD = 30
TOP_PAD = 16
AXIS_HEIGHT = 40


def _nice_ticks(low: float, high: float, target: int = 6) -> list[float]:
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return [low]
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + 1e-9 * step:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    return f"{value:g}"


def leaderboard_intervals_svg(systems: Sequence[Mapping[str, Any]]) -> str:
    """Score (dot) and 95% page-block bootstrap interval (whisker) of each system, by rank."""
    rows = [row for row in systems if math.isfinite(float(row.get("score", math.nan)))]
    if not rows:
        return ""
    lows = [float(r["ci95"][0]) for r in rows if r.get("ci95") and math.isfinite(float(r["ci95"][0]))]
    highs = [float(r["ci95"][1]) for r in rows if r.get("ci95") and math.isfinite(float(r["ci95"][1]))]
    scores = [float(r["score"]) for r in rows]
    low = min(scores + lows)
    high = max(scores + highs)
    pad = max((high - low) * 0.05, 1.0)
    low, high = low - pad, high + pad
    plot_left, plot_right = LABEL_WIDTH, WIDTH - RIGHT_PAD
    height = TOP_PAD + ROW_HEIGHT * len(rows) + AXIS_HEIGHT

    def x_of(value: float) -> float:
        return plot_left + (value - low) / (high - low) * (plot_right - plot_left)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="lb-plot" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" '
        'aria-label="Bradley–Terry scores with 95% page-block bootstrap intervals">',
        "<title>Scores (Elo points) with 95% page-block bootstrap intervals</title>",
    ]
    axis_y = TOP_PAD + ROW_HEIGHT * len(rows)
    for tick in _nice_ticks(low, high):
        x = x_of(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP_PAD - 6}" x2="{x:.1f}" y2="{axis_y}" stroke="#e4e7ee" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{axis_y + 16}" font-size="11" text-anchor="middle" fill="#667085">{_fmt(tick)}</text>'
        )
    if low < 0 < high:
        x0 = x_of(0.0)
        parts.append(
            f'<line x1="{x0:.1f}" y1="{TOP_PAD - 6}" x2="{x0:.1f}" y2="{axis_y}" stroke="#98a2b3" '
            'stroke-width="1" stroke-dasharray="3 3"/>'
        )
    parts.append(
        f'<line x1="{plot_left}" y1="{axis_y}" x2="{plot_right}" y2="{axis_y}" stroke="#667085" stroke-width="1"/>'
    )
    parts.append(
        f'<text x="{(plot_left + plot_right) / 2:.1f}" y="{axis_y + 34}" font-size="12" text-anchor="middle" '
        'fill="#1d2330">score (400 θ / ln 10), 95% interval</text>'
    )
    for k, row in enumerate(rows):
        y = TOP_PAD + ROW_HEIGHT * k + ROW_HEIGHT / 2
        label = f"{row.get('rank', k + 1)}. {row.get('system', '')}"
        parts.append(
            f'<text x="{plot_left - 10}" y="{y + 4:.1f}" font-size="12" text-anchor="end" fill="#1d2330">'
            f"{escape(label)}</text>"
        )
        ci = row.get("ci95") or [math.nan, math.nan]
        ci_low, ci_high = float(ci[0]), float(ci[1])
        title = (
            f"{row.get('system', '')}: score {float(row['score']):.1f}, 95% interval "
            f"[{ci_low:.1f}, {ci_high:.1f}], rank interval {row.get('rank_ci95')}"
        )
        parts.append(f"<g><title>{escape(title)}</title>")
        if math.isfinite(ci_low) and math.isfinite(ci_high):
            x1, x2 = x_of(ci_low), x_of(ci_high)
            parts.append(
                f'<line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" stroke="#2f5bd3" stroke-width="2"/>'
            )
            for xe in (x1, x2):
                parts.append(
                    f'<line x1="{xe:.1f}" y1="{y - 6:.1f}" x2="{xe:.1f}" y2="{y + 6:.1f}" stroke="#2f5bd3" stroke-width="2"/>'
                )
        parts.append(
            f'<circle cx="{x_of(float(row["score"])):.1f}" cy="{y:.1f}" r="5" fill="#151a26" '
            f"data-system={quoteattr(str(row.get('system', '')))}/>"
        )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
