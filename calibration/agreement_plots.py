"""Figures for the agreement report (docs/protocol.md "Human reference and agreement", "Files" (self-contained
HTML page with plots)).

Each function takes plain report data and returns a ``data:image/svg+xml;base64,...`` URI, so a
page embeds it with ``<img src=...>``: no external asset, no inline script, nothing the site's
Content-Security-Policy (``img-src 'self' data:``) blocks. Figures are drawn with matplotlib's
object API on the Agg canvas (no pyplot state, safe in threads) and are byte-for-byte
reproducible: no date in the metadata, fixed SVG id salt.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from calibration.drawing import drawing

_STYLE: Any = {  # Any: matplotlib types rc keys as a Literal union
    "svg.hashsalt": "arbiter-agreement",
    "svg.fonttype": "none",  # text stays text: much smaller files, fonts from the reader's system
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_POINT = "#2f5bd3"
_MUTED = "#98a2b3"
_REFERENCE = "#b42318"


def figure_data_uri(fig: Figure) -> str:
    """Serialize a figure as an SVG data URI (deterministic)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    with drawing(_STYLE):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _interval(ci: Sequence[Any] | None) -> tuple[float, float] | None:
    if not ci or len(ci) != 2 or not all(_finite(v) for v in ci):
        return None
    return float(ci[0]), float(ci[1])


def _empty(fig: Figure, message: str) -> str:
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", color=_MUTED)
    return figure_data_uri(fig)


def _new_figure(width: float, height: float) -> Figure:
    with drawing(_STYLE):
        return Figure(figsize=(width, height), layout="constrained")


def _point_rows(
    ax: Any,
    labels: Sequence[str],
    values: Sequence[Any],
    cis: Sequence[Sequence[Any] | None],
    *,
    annotate: bool = False,
) -> None:
    """Horizontal point + 95% interval rows, first row on top."""
    n = len(labels)
    for i, (value, ci) in enumerate(zip(values, cis, strict=True)):
        y = n - 1 - i
        interval = _interval(ci)
        if interval is not None:
            ax.plot(interval, [y, y], color=_POINT, linewidth=2, solid_capstyle="butt")
        if _finite(value):
            ax.plot([value], [y], "o", color=_POINT, markersize=6)
            if annotate:
                ax.annotate(
                    f"{value:.3f}",
                    (value, y),
                    xytext=(0, 6),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
    ax.set_yticks(range(n), list(reversed(labels)))
    ax.set_ylim(-0.7, n - 0.3)


def agreement_intervals_plot(report: Mapping[str, Any]) -> str:
    """Exact agreement, Fleiss κ, ordinal α (and per-axis α) with their bootstrap 95% intervals."""
    rows: list[tuple[str, Any, Any]] = [
        ("Exact agreement", report["exact_agreement"]["value"], report["exact_agreement"]["ci95"]),
        ("Fleiss κ", report["fleiss_kappa"]["value"], report["fleiss_kappa"]["ci95"]),
        (
            "Krippendorff α (ordinal)",
            report["krippendorff_alpha_ordinal"]["value"],
            report["krippendorff_alpha_ordinal"]["ci95"],
        ),
    ]
    for axis in report.get("per_axis_alpha") or []:
        rows.append((f"α {axis['axis']}", axis.get("value"), axis.get("ci95")))
    with drawing(_STYLE):
        fig = _new_figure(7.0, 0.45 * len(rows) + 1.0)
        if not any(_finite(v) for _, v, _ in rows):
            return _empty(fig, "No agreement statistic is defined yet (too few votes).")
        ax = fig.add_subplot()
        _point_rows(ax, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], annotate=True)
        lows = [x for _, v, ci in rows for x in (v, *(_interval(ci) or ())) if _finite(x)]
        ax.set_xlim(min(-0.05, min(lows) - 0.05), 1.02)
        ax.axvline(0, color=_MUTED, linewidth=0.8)
        ax.set_xlabel(
            f"value with 95% page-block bootstrap interval ({report['bootstrap']['resamples']} resamples, "
            f"seed {report['bootstrap']['seed']})"
        )
        return figure_data_uri(fig)


def human_reference_histogram(h_values: Sequence[float]) -> str:
    """Distribution of the human reference ``h_i`` over comparisons
    (docs/protocol.md "Human reference and agreement")."""
    values = [float(v) for v in h_values if _finite(v)]
    with drawing(_STYLE):
        fig = _new_figure(7.0, 2.8)
        if not values:
            return _empty(fig, "No comparison has a valid vote yet.")
        ax = fig.add_subplot()
        edges = [(-0.05 + 0.1 * k) for k in range(12)]  # bins centred on 0, 0.1, …, 1
        ax.hist(values, bins=edges, color=_POINT, edgecolor="white")
        ax.set_xlim(-0.07, 1.07)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.set_xlabel("h = (n_A + 0.5 n_TIE) / (n_A + n_TIE + n_B)   (0: B preferred, 1: A preferred)")
        ax.set_ylabel("comparisons")
        return figure_data_uri(fig)


def rater_quality_plot(rater_quality: Sequence[Mapping[str, Any]]) -> str:
    """Per rater: hidden-repeat agreement and left-position share (decisive votes), Wilson 95%."""
    raters = [str(r["rater"]) for r in rater_quality]
    with drawing(_STYLE):
        fig = _new_figure(7.0, min(0.28 * len(raters), 40.0) + 1.2)
        if not raters:
            return _empty(fig, "No rater has voted yet.")
        left, right = fig.subplots(1, 2, sharey=True)
        repeat = [r.get("hidden_repeat_agreement") or {} for r in rater_quality]
        _point_rows(left, raters, [x.get("value") for x in repeat], [x.get("ci95") for x in repeat])
        left.set_xlim(-0.02, 1.02)
        left.set_xlabel("hidden-repeat agreement")
        _point_rows(
            right,
            raters,
            [r.get("left_share") for r in rater_quality],
            [r.get("left_share_ci95") for r in rater_quality],
        )
        right.axvline(0.5, color=_REFERENCE, linewidth=0.8, linestyle="--")
        right.set_xlim(-0.02, 1.02)
        right.set_xlabel("share of decisive votes for the left side")
        right.tick_params(labelleft=False)
        return figure_data_uri(fig)


def human_ranking_plot(
    ranking: Sequence[Mapping[str, Any]], leave_one_out_scores: Mapping[str, Sequence[float]]
) -> str:
    """Human Bradley–Terry scores
    (docs/protocol.md "Human reference and agreement", "Deployment leaderboard"), best on top, with the
    leave-one-rater-out spread.

    ``leave_one_out_scores[system]``: the system's score with each rater left out in turn; shown
    as small dots with their range.
    """
    systems = [str(r["system"]) for r in ranking]
    with drawing(_STYLE):
        fig = _new_figure(7.0, 0.4 * len(systems) + 1.0)
        if not systems:
            return _empty(fig, "No human ranking yet.")
        ax = fig.add_subplot()
        n = len(systems)
        for i, row in enumerate(ranking):
            y = n - 1 - i
            spread = [float(s) for s in leave_one_out_scores.get(str(row["system"]), ()) if _finite(s)]
            if spread:
                ax.plot(
                    [min(spread), max(spread)],
                    [y, y],
                    color=_MUTED,
                    linewidth=4,
                    alpha=0.6,
                    solid_capstyle="round",
                )
                ax.plot(spread, [y] * len(spread), "|", color=_MUTED, markersize=8)
            if _finite(row.get("score")):
                ax.plot([row["score"]], [y], "o", color=_POINT, markersize=6)
        ax.set_yticks(range(n), [f"{r['rank']}. {r['system']}" for r in reversed(list(ranking))])
        ax.set_ylim(-0.7, n - 0.3)
        ax.axvline(0, color=_MUTED, linewidth=0.8)
        ax.set_xlabel("Bradley–Terry score (400 θ / ln 10); grey: range with one rater left out")
        return figure_data_uri(fig)
