"""Figures and HTML of the calibration report (docs/protocol.md "Judges and calibration", "Files" (a
self-contained HTML page with plots)).

Each figure function takes the JSON report of ``calibration.services.calibration`` and returns a
``data:image/svg+xml;base64,...`` URI, embedded with ``<img src=...>``: no script, no external
asset, nothing the site's Content-Security-Policy (``img-src 'self' data:``) blocks. Figures use
matplotlib's object API on the Agg canvas (no pyplot state); SVG metadata carries no date.

- reliability diagram: out-of-fold ``p̂`` (leave-one-block-out) binned on [0, 1] against the
  mean human reference ``h`` of each bin;
- per-block out-of-fold Brier and MAE;
- coefficients ``β_j`` with ±1.96 standard errors (statsmodels OLS, no intercept);
- judge diagnostics: order consistency, repeat consistency and agreement with the human
  majority, beside the human noise ceiling.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from django.template.loader import render_to_string
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from calibration.drawing import drawing

_STYLE: Any = {
    "svg.hashsalt": "arbiter-calibration",
    "svg.fonttype": "path",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_BLUE = "#2f5bd3"
_ORANGE = "#d97706"
_GREEN = "#15803d"
_MUTED = "#98a2b3"
_RED = "#b42318"


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _data_uri(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    with drawing(_STYLE):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _figure(width: float, height: float) -> Figure:
    with drawing(_STYLE):
        return Figure(figsize=(width, height), layout="constrained")


def _empty(fig: Figure, message: str) -> str:
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", color=_MUTED)
    return _data_uri(fig)


def reliability_plot(report: Mapping[str, Any]) -> str:
    """Binned out-of-fold p̂ against mean h (marker area ∝ comparisons in the bin)."""
    bins = [b for b in report.get("reliability") or [] if b.get("n") and _finite(b.get("mean_predicted"))]
    with drawing(_STYLE):
        fig = _figure(4.6, 4.2)
        if not bins:
            return _empty(fig, "No out-of-fold prediction (needs at least two blocks).")
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1], color=_MUTED, linewidth=1, linestyle="--", label="perfect calibration")
        total = sum(b["n"] for b in bins)
        xs = [b["mean_predicted"] for b in bins]
        ys = [b["mean_human"] for b in bins]
        sizes = [20 + 400 * b["n"] / total for b in bins]
        ax.plot(xs, ys, color=_BLUE, linewidth=1)
        ax.scatter(xs, ys, s=sizes, color=_BLUE, alpha=0.8, label="bin (area ∝ comparisons)")
        for b in bins:
            ax.annotate(
                str(b["n"]),
                (b["mean_predicted"], b["mean_human"]),
                xytext=(5, -10),
                textcoords="offset points",
                fontsize=7,
                color="#475467",
            )
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_aspect("equal")
        ax.set_xlabel("out-of-fold p̂(A) (leave-one-block-out), bin mean")
        ax.set_ylabel("human reference h, bin mean")
        ax.legend(loc="upper left", fontsize=7, frameon=False)
        return _data_uri(fig)


def per_block_plot(report: Mapping[str, Any]) -> str:
    """Out-of-fold Brier and MAE of each held-out block."""
    rows = [r for r in report.get("per_block") or [] if _finite(r.get("brier"))]
    with drawing(_STYLE):
        fig = _figure(7.0, 2.8)
        if not rows:
            return _empty(fig, "No per-block errors (needs at least two blocks).")
        ax = fig.add_subplot()
        n = len(rows)
        xs = list(range(n))
        width = 0.38
        ax.bar([x - width / 2 for x in xs], [r["brier"] for r in rows], width, color=_BLUE, label="Brier")
        ax.bar([x + width / 2 for x in xs], [r["mae"] for r in rows], width, color=_ORANGE, label="MAE")
        cv = report.get("cv") or {}
        for key, color in (("brier", _BLUE), ("mae", _ORANGE)):
            value = (cv.get(key) or {}).get("value")
            if _finite(value):
                ax.axhline(value, color=color, linewidth=0.8, linestyle="--")
        ax.set_xticks(xs, [f"{r['block']}\n(n={r['n']})" for r in rows], fontsize=7)
        ax.set_ylabel("error on the held-out block")
        ax.legend(fontsize=7, frameon=False)
        return _data_uri(fig)


def coefficient_plot(report: Mapping[str, Any]) -> str:
    """β_j with ±1.96 standard errors."""
    judges = list(report.get("judges") or [])
    coefs = report.get("coefficients") or {}
    ses = report.get("standard_errors") or {}
    with drawing(_STYLE):
        fig = _figure(7.0, 0.42 * len(judges) + 1.0)
        if not judges:
            return _empty(fig, "No coefficients.")
        ax = fig.add_subplot()
        n = len(judges)
        for i, judge in enumerate(judges):
            y = n - 1 - i
            beta, se = coefs.get(judge), ses.get(judge)
            if _finite(beta) and _finite(se):
                ax.plot([beta - 1.96 * se, beta + 1.96 * se], [y, y], color=_BLUE, linewidth=2)
            if _finite(beta):
                ax.plot([beta], [y], "o", color=_BLUE)
        ax.axvline(0, color=_MUTED, linewidth=0.8)
        ax.set_yticks(range(n), list(reversed(judges)))
        ax.set_ylim(-0.7, n - 0.3)
        ax.set_xlabel("β (OLS of h on x̄, no intercept) ± 1.96 SE")
        return _data_uri(fig)


DIAGNOSTICS = (
    ("order_consistency", "order consistency", _BLUE),
    ("repeat_consistency", "repeat consistency", _ORANGE),
    ("human_majority_agreement", "agreement with human majority", _GREEN),
)


def diagnostics_plot(report: Mapping[str, Any]) -> str:
    """Per judge: order and repeat consistency, agreement with the human majority; noise ceiling."""
    diag = report.get("diagnostics") or {}
    per_judge = diag.get("judges") or {}
    judges = [j for j in report.get("judges") or [] if j in per_judge]
    with drawing(_STYLE):
        fig = _figure(7.0, 0.6 * len(judges) + 1.3)
        if not judges:
            return _empty(fig, "No judge diagnostics.")
        ax = fig.add_subplot()
        n = len(judges)
        height = 0.26
        for k, (key, label, color) in enumerate(DIAGNOSTICS):
            ys: list[float] = []
            vals: list[float] = []
            for i, judge in enumerate(judges):
                value = ((per_judge[judge] or {}).get(key) or {}).get("value")
                if _finite(value):
                    ys.append(n - 1 - i + (1 - k) * height)
                    vals.append(value)
            ax.barh(ys, vals, height, color=color, label=label)
        ceiling = (diag.get("human_noise_ceiling") or {}).get("value")
        if _finite(ceiling):
            ax.axvline(
                ceiling, color=_RED, linewidth=1, linestyle="--", label=f"human noise ceiling {ceiling:.3f}"
            )
        ax.set_yticks(range(n), list(reversed(judges)))
        ax.set_xlim(0, 1.0)
        ax.set_xlabel("share of agreeing pairs / outputs")
        ax.legend(fontsize=7, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncols=2)
        return _data_uri(fig)


def _share(entry: Any) -> dict[str, Any]:
    entry = entry or {}
    return {"agree": entry.get("agree"), "n": entry.get("n"), "value": entry.get("value")}


#: The calibration report's figures by name, each drawn from the JSON report alone.
CALIBRATION_FIGURES = {
    "coefficients": coefficient_plot,
    "reliability": reliability_plot,
    "per_block": per_block_plot,
    "diagnostics": diagnostics_plot,
}


def calibration_context(report: Mapping[str, Any], *, figures: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Template context of the report body (tables + figures), shared by the page and the export.

    ``figures`` maps each name of ``CALIBRATION_FIGURES`` to an image source (the page gives URLs
    that draw each figure on its own request); without it every figure is drawn here as a data URI.
    """
    judges = list(report.get("judges") or [])
    coefs = report.get("coefficients") or {}
    ses = report.get("standard_errors") or {}
    excluded = report.get("excluded_by_judge") or {}
    diag = report.get("diagnostics") or {}
    per_judge = diag.get("judges") or {}
    coefficient_rows = []
    for judge in judges:
        beta, se = coefs.get(judge), ses.get(judge)
        ci = [beta - 1.96 * se, beta + 1.96 * se] if _finite(beta) and _finite(se) else None
        coefficient_rows.append(
            {"judge": judge, "beta": beta, "se": se, "ci": ci, "excluded": excluded.get(judge)}
        )
    diagnostic_rows = [
        {
            "judge": judge,
            "order": _share((per_judge.get(judge) or {}).get("order_consistency")),
            "repeat": _share((per_judge.get(judge) or {}).get("repeat_consistency")),
            "majority": _share((per_judge.get(judge) or {}).get("human_majority_agreement")),
        }
        for judge in judges
    ]
    return {
        "report": report,
        "coefficient_rows": coefficient_rows,
        "diagnostic_rows": diagnostic_rows,
        "ceiling": _share(diag.get("human_noise_ceiling")) if diag.get("human_noise_ceiling") else None,
        "audit": report.get("committee_audit"),
        "figures": dict(figures)
        if figures is not None
        else {name: draw(report) for name, draw in CALIBRATION_FIGURES.items()},
    }


def calibration_html(report: Mapping[str, Any], *, title: str) -> str:
    """The self-contained HTML page of a calibration report (inline CSS, figures as data: URIs)."""
    return render_to_string(
        "calibration/calibration_report.html", {**calibration_context(report), "title": title}
    )
