"""The disagreement lens's figure (docs/protocol.md "The disagreement lens"): agreement with the human
majority against the gap between the two systems' human win rates (Zheng et al., Figure 2).

Plain report data in, an SVG data URI out (as ``calibration.agreement_plots``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibration.agreement_plots import _MUTED, _POINT, _REFERENCE, _empty, _new_figure, figure_data_uri


def agreement_by_gap_figure(section: Mapping[str, Any]) -> str:
    """One point per gap bin with verdicts: with ties (filled) and without ties (open); n beside."""
    bins = [b for b in section.get("bins", []) if b["with_ties"]["n"]]
    fig = _new_figure(6.0, 2.8)
    if not bins:
        return _empty(fig, "no verdict on a comparison with a human majority yet")
    ax = fig.add_subplot()
    mids = [(b["low"] + b["high"]) / 2 for b in bins]
    kept = [b["with_ties"]["value"] for b in bins]
    ax.plot(mids, kept, marker="o", color=_POINT, label="ties kept")
    dropped = [
        (m, b["without_ties"]["value"]) for m, b in zip(mids, bins, strict=True) if b["without_ties"]["n"]
    ]
    if dropped:
        ax.plot(
            [m for m, _ in dropped],
            [v for _, v in dropped],
            marker="o",
            mfc="white",
            color=_REFERENCE,
            label="ties dropped",
        )
    for m, b in zip(mids, bins, strict=True):
        ax.annotate(
            f"n={b['with_ties']['n']}",
            (m, b["with_ties"]["value"]),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=7,
            color=_MUTED,
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.08)
    ax.set_xlabel("gap between the two systems' human win rates")
    ax.set_ylabel("agreement with the majority")
    ax.legend(loc="lower right", frameon=False)
    return figure_data_uri(fig)
