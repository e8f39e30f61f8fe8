"""Figure and HTML of the judge-subset ablation report (issue 16 part 1).

The figure: out-of-fold Brier of every judge subset (with its 95 % page-block interval) against
its cost per comparison, the Pareto front (no other subset is both cheaper and better) marked and
joined, so a researcher sees what a cheaper committee loses. Same conventions as
``calibration.calibration_plots`` (SVG data: URI, no script).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.template.loader import render_to_string

from calibration.calibration_plots import _BLUE, _MUTED, _RED, _data_uri, _empty, _figure, _finite


def cost_brier_plot(report: Mapping[str, Any]) -> str:
    fig = _figure(6.4, 4.0)
    rows = [
        s
        for s in report.get("subsets") or []
        if _finite(s.get("cost_per_comparison")) and _finite((s.get("brier") or {}).get("value"))
    ]
    if not rows:
        return _empty(fig, "no cost per comparison: nothing to plot")
    ax = fig.add_subplot()
    for s in rows:
        x, y = s["cost_per_comparison"], s["brier"]["value"]
        lo, hi = s["brier"]["ci95"] if s["brier"].get("ci95") else (None, None)
        color = _RED if s["pareto"] else _BLUE
        if _finite(lo) and _finite(hi):
            ax.plot([x, x], [lo, hi], color=_MUTED, linewidth=0.8, zorder=1)
        ax.plot([x], [y], "o", color=color, markersize=5 if s["pareto"] else 4, zorder=2)
        if s["pareto"]:  # only the front is labelled (every subset is in the table below the figure)
            ax.annotate("+".join(s["judges"]), (x, y), xytext=(4, 3), textcoords="offset points", fontsize=6)
    front = sorted((s["cost_per_comparison"], s["brier"]["value"]) for s in rows if s["pareto"])
    if front:
        ax.plot(
            [p[0] for p in front], [p[1] for p in front], "-", color=_RED, linewidth=1, label="Pareto front"
        )
        ax.legend(loc="upper right", fontsize=8, frameon=False)
    ax.set_xlabel(str(report.get("cost_unit") or "cost per comparison"))
    ax.set_ylabel("out-of-fold Brier (vote-weighted)")
    return _data_uri(fig)


def ablation_context(report: Mapping[str, Any]) -> dict[str, Any]:
    differences = [d for d in report.get("paired_differences") or [] if d["minuend"] != d["subtrahend"]]
    return {"report": report, "differences": differences, "figures": {"cost_brier": cost_brier_plot(report)}}


def ablation_html(report: Mapping[str, Any], *, title: str) -> str:
    """The self-contained HTML page of an ablation report (inline CSS, figure as data: URI)."""
    return render_to_string(
        "calibration/judge_ablation_report.html", {**ablation_context(report), "title": title}
    )
