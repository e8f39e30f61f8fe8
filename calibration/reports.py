"""The agreement report's HTML rendering (SPEC §5, §8 "Reports: ... a self-contained HTML page").

The standalone page (``calibration/agreement_report.html``) carries its own CSS and its figures
as ``data:`` URIs: no script, no external asset, so it opens offline and can be archived with a
paper. The researcher page (``calibration/agreement_page.html``) shows the same body inside the site.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from django.template.loader import render_to_string

from calibration import agreement_plots
from stats.agreement import human_ranking, validate_votes
from stats.preference import ORDINAL_LABELS, label_counts, preference_of_counts


def leave_one_rater_out_scores(votes: pd.DataFrame) -> dict[str, list[float]]:
    """Each system's human Bradley–Terry score with each rater left out in turn (SPEC §5).

    The same recomputation ``stats.agreement.leave_one_rater_out`` summarizes by Spearman
    and rank movement, kept per system here for the spread plot.
    """
    table = validate_votes(votes)
    main = table.main
    valid = main[main["label"].isin(ORDINAL_LABELS)]
    if valid.empty:
        return {}
    info = valid.groupby("comparison", sort=True)[["system_a", "system_b"]].first()
    comps = info.index.tolist()
    systems = sorted(set(info["system_a"]) | set(info["system_b"]))
    total = label_counts(valid["label"].to_numpy(), valid["comparison"].to_numpy(), comps)
    out: dict[str, list[float]] = {s: [] for s in systems}
    sys_a = info["system_a"].to_numpy(dtype=object)
    sys_b = info["system_b"].to_numpy(dtype=object)
    for _, group in valid.groupby("rater", sort=True):
        counts = total - label_counts(group["label"].to_numpy(), group["comparison"].to_numpy(), comps)
        ranking = human_ranking(sys_a, sys_b, preference_of_counts(counts), systems)
        for system, score in zip(ranking.systems, ranking.scores, strict=True):
            out[system].append(float(score))
    return out


def agreement_figures(report: Mapping[str, Any], votes: pd.DataFrame) -> dict[str, str]:
    """The report's figures as SVG data URIs, keyed by name."""
    return {
        "agreement": agreement_plots.agreement_intervals_plot(report),
        "h_histogram": agreement_plots.human_reference_histogram(
            [r["h"] for r in report.get("human_reference", [])]
        ),
        "rater_quality": agreement_plots.rater_quality_plot(report.get("rater_quality") or []),
        "human_ranking": agreement_plots.human_ranking_plot(
            report.get("human_ranking") or [], leave_one_rater_out_scores(votes)
        ),
    }


def agreement_context(*, study: Any, report: Mapping[str, Any], figures: Mapping[str, str]) -> dict[str, Any]:
    """Template context shared by the standalone export and the researcher page."""
    loro = {p["rater"]: p for p in report.get("leave_one_rater_out", {}).get("per_rater", [])}
    bias = {p["rater"]: p for p in (report.get("position_bias") or {}).get("per_rater", [])}
    raters = [
        {**q, "loro": loro.get(q["rater"], {}), "bias": bias.get(q["rater"], {})}
        for q in report.get("rater_quality") or []
    ]
    return {
        "study": study,
        "report": report,
        "figures": figures,
        "raters": raters,
        "overall_bias": (report.get("position_bias") or {}).get("overall", {}),
    }


def render_agreement_html(*, study: Any, report: Mapping[str, Any], figures: Mapping[str, str]) -> str:
    """The self-contained HTML agreement report: inline CSS, figures as data URIs, no script."""
    return render_to_string(
        "calibration/agreement_report.html", agreement_context(study=study, report=report, figures=figures)
    )
