"""Figures of ``kind_report`` (other study kinds (docs/study-kinds.md "The kind report");
docs/protocol.md "Files" (a self-contained HTML page with plots)).

Every figure reads only the JSON report of ``kind_reports.services`` and returns a
``data:image/svg+xml;base64,...`` URI drawn with the agreement report's helpers
(``calibration.agreement_plots``: matplotlib object API on the Agg canvas, no date in the SVG, fixed id
salt), so the same report always gives the same bytes and the page needs no script or asset:

- ``pairwise``: agreement of human choices with each metric, overall and by relative score gap,
  with the brief-bootstrap 95 % intervals (0.5 = the level of a TIE);
- ``checklist``: agreement of each automatic source with the human majority, overall and by
  question type, brief-bootstrap (thick) and Wilson (thin) 95 % intervals;
- ``rating``: the equivalence plot, mean paired difference per dimension with its t (thick) and
  bootstrap (thin) 95 % intervals and the ±margin band;
- every kind: what each exclusion rule removed (participants and answers, first in rule order;
  the outline shows what the rule alone would remove).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.ticker import MaxNLocator

from calibration.agreement_plots import (
    _MUTED,
    _POINT,
    _REFERENCE,
    _STYLE,
    _empty,
    _finite,
    _interval,
    _new_figure,
    figure_data_uri,
)
from calibration.drawing import drawing

_PALETTE = ("#2f5bd3", "#d97706", "#15803d", "#9333ea", "#b42318", "#0e7490")
_BAND = "#dcfce7"
RULE_LABELS = {
    "comprehension": "Comprehension check failed",
    "attention": "Attention checks failed",
    "too_fast_median": "Median response too fast",
    "straight_lining_share": "Straight-lining (one answer share)",
    "straight_lining_run": "Straight-lining (run)",
    "too_fast_answer": "Single answer too fast",
}


def _ci_line(ax: Any, x: Sequence[float], y: Sequence[float], *, color: str, width: float) -> None:
    ax.plot(x, y, color=color, linewidth=width, solid_capstyle="butt")


def score_preference_plot(analysis: Mapping[str, Any]) -> str:
    """Agreement by gap bin per metric (docs/study-kinds.md "The kind report" pairwise), with brief-bootstrap
    95 % error bars."""
    metrics = list(analysis.get("metrics") or [])
    bins = ["all", *analysis.get("gap_bins", [])]
    with drawing(_STYLE):
        fig = _new_figure(7.0, 3.2)
        entries = [[m["overall"], *m["by_gap"]] for m in metrics]
        if not any(_finite(e.get("value")) for row in entries for e in row):
            return _empty(
                fig, "No scored pair has a valid vote yet (no metric scores, or only equal-score pairs)."
            )
        ax = fig.add_subplot()
        width = 0.6 / max(len(metrics), 1)
        for k, (metric, row) in enumerate(zip(metrics, entries, strict=True)):
            color = _PALETTE[k % len(_PALETTE)]
            offset = (k - (len(metrics) - 1) / 2) * width
            for j, entry in enumerate(row):
                x = j + offset
                interval = _interval(entry.get("ci95"))
                if interval is not None:  # error bar: the interval with caps
                    ax.plot([x, x], interval, color=color, linewidth=1.5)
                    ax.plot([x, x], interval, "_", color=color, markersize=7)
                if _finite(entry.get("value")):
                    ax.plot(
                        [x],
                        [entry["value"]],
                        "o",
                        color=color,
                        markersize=5,
                        label=metric["metric"] if j == 0 else None,
                    )
        ax.axhline(0.5, color=_MUTED, linewidth=0.8, linestyle="--")
        ax.set_xticks(range(len(bins)), [b if b == "all" else f"gap {b} %" for b in bins])
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("agreement with the metric")
        ax.set_xlabel(
            f"relative score gap |Δ| / range × 100; 95% brief-bootstrap intervals "
            f"({analysis['bootstrap']['resamples']} resamples); dashed: 0.5"
        )
        ax.legend(loc="lower right", frameon=False, fontsize=8)
        return figure_data_uri(fig)


def checklist_plot(analysis: Mapping[str, Any]) -> str:
    """Agreement with the human majority per automatic source and question type
    (docs/study-kinds.md "The kind report" checklist)."""
    rows: list[tuple[str, Mapping[str, Any]]] = []
    for source in analysis.get("sources") or []:
        rows.append((f"{source['source']} · all", source["overall"]))
        for t in source.get("by_type") or []:
            rows.append((f"{source['source']} · {t['question_type'] or 'untagged'}", t))
    with drawing(_STYLE):
        fig = _new_figure(7.0, 0.45 * len(rows) + 1.1)
        if not any(_finite(e.get("value")) for _, e in rows):
            return _empty(fig, "No predicate has both a human majority and an automatic answer yet.")
        ax = fig.add_subplot()
        n = len(rows)
        for i, (_, entry) in enumerate(rows):
            y = n - 1 - i
            boot = _interval(entry["ci95"].get("bootstrap"))
            wilson = _interval(entry["ci95"].get("wilson"))
            if boot is not None:
                _ci_line(ax, boot, [y, y], color=_POINT, width=2.5)
            if wilson is not None:
                _ci_line(ax, wilson, [y - 0.2, y - 0.2], color=_MUTED, width=1)
            if _finite(entry.get("value")):
                ax.plot([entry["value"]], [y], "o", color=_POINT, markersize=6)
                ax.annotate(
                    f"{entry['value']:.2f} ({entry['n_agree']}/{entry['n_predicates']})",
                    (entry["value"], y),
                    xytext=(0, 6),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
        ax.set_yticks(range(n), [label for label, _ in reversed(rows)])
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlim(-0.02, 1.02)
        ax.set_xlabel("agreement with the human majority (thick: brief-bootstrap 95%, thin: Wilson 95%)")
        return figure_data_uri(fig)


def rating_equivalence_plot(analysis: Mapping[str, Any]) -> str:
    """Mean paired difference per dimension, t and bootstrap 95 % intervals, ±margin band
    (docs/study-kinds.md "The kind report")."""
    dims = list(analysis.get("dimensions") or [])
    margin = float(analysis.get("margin") or 0.5)
    with drawing(_STYLE):
        fig = _new_figure(7.0, 0.6 * len(dims) + 1.3)
        if not dims or not any(_finite(d.get("mean_difference")) for d in dims):
            return _empty(fig, "No dimension has a brief rated for both systems yet.")
        ax = fig.add_subplot()
        n = len(dims)
        ax.axvspan(-margin, margin, color=_BAND, zorder=0)
        ax.axvline(0, color=_MUTED, linewidth=0.8)
        extent = margin
        for i, d in enumerate(dims):
            y = n - 1 - i
            t_ci = _interval(d["ci95"].get("t"))
            b_ci = _interval(d["ci95"].get("bootstrap"))
            if t_ci is not None:
                _ci_line(ax, t_ci, [y, y], color=_POINT, width=2.5)
                extent = max(extent, *map(abs, t_ci))
            if b_ci is not None:
                _ci_line(ax, b_ci, [y - 0.2, y - 0.2], color=_MUTED, width=1.2)
                extent = max(extent, *map(abs, b_ci))
            if _finite(d.get("mean_difference")):
                ax.plot([d["mean_difference"]], [y], "o", color=_POINT, markersize=6)
                extent = max(extent, abs(d["mean_difference"]))
            verdict = d["equivalence"]["equivalent"]
            text = d["equivalence"].get("verdict") or "not estimable"
            ax.annotate(
                text,
                (1.0, y),
                xycoords=("axes fraction", "data"),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color=_POINT if verdict else _REFERENCE,
            )
        ax.set_yticks(range(n), [str(d["dimension"]) for d in reversed(dims)])
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlim(-extent * 1.15, extent * 1.15)
        ax.set_xlabel(
            f"mean paired difference {analysis['system_a']} − {analysis['system_b']} per brief "
            f"(thick: t 95%, thin: bootstrap 95%; band: ±{margin:g} margin)"
        )
        return figure_data_uri(fig)


def hygiene_plot(hygiene: Mapping[str, Any]) -> str:
    """Participants and answers each exclusion rule removed (first in rule order; outline: alone)."""
    removed = list(hygiene.get("removed") or [])
    labels = [RULE_LABELS.get(r["rule"], r["rule"]) + ("" if r["enabled"] else " (off)") for r in removed]
    with drawing(_STYLE):
        fig = _new_figure(7.0, 0.35 * len(removed) + 1.3)
        if not removed:
            return _empty(fig, "No exclusion rule.")
        left, right = fig.subplots(1, 2, sharey=True)
        n = len(removed)
        ys = [n - 1 - i for i in range(n)]
        for ax, first_key, alone_key, title in (
            (left, "participants_first", "participants_alone", "participants removed"),
            (right, "answers_first", "answers_alone", "data answers removed"),
        ):
            ax.barh(ys, [r[alone_key] for r in removed], color="none", edgecolor=_MUTED, height=0.6)
            ax.barh(ys, [r[first_key] for r in removed], color=_POINT, height=0.6)
            for y, r in zip(ys, removed, strict=True):
                ax.annotate(
                    str(r[first_key]),
                    (r[first_key], y),
                    xytext=(3, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=8,
                )
            ax.set_xlabel(title)
            top = max([r[alone_key] for r in removed] + [1])
            ax.set_xlim(0, top * 1.2)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        left.set_yticks(ys, labels)
        right.tick_params(labelleft=False)
        return figure_data_uri(fig)
