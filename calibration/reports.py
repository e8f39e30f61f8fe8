"""The agreement report's HTML rendering (docs/protocol.md "Human reference and agreement", "Files" (Reports:
... a self-contained HTML page)).

The standalone page (``calibration/agreement_report.html``) carries its own CSS and its figures
as ``data:`` URIs: no script, no external asset, so it opens offline and can be archived with a
paper. The researcher page (``calibration/agreement_page.html``) shows the same body inside the site.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.template.loader import render_to_string

if TYPE_CHECKING:
    from stats.agreement import AgreementResult

#: The agreement report's figures, in page order.
AGREEMENT_FIGURES = ("agreement", "h_histogram", "rater_quality", "human_ranking")


def agreement_figure(name: str, report: Mapping[str, Any], loro_scores: Mapping[str, list[float]]) -> str:
    """One figure of the report (``AGREEMENT_FIGURES``) as an SVG data URI.

    ``loro_scores`` is ``AgreementResult.leave_one_rater_out_scores()`` of the computation the
    report was serialized from (the per-system leave-one-rater-out fits,
    docs/protocol.md "Human reference and agreement").
    """
    from calibration import agreement_plots  # matplotlib: only when a figure is drawn

    if name == "agreement":
        return agreement_plots.agreement_intervals_plot(report)
    if name == "h_histogram":
        return agreement_plots.human_reference_histogram([r["h"] for r in report.get("human_reference", [])])
    if name == "rater_quality":
        return agreement_plots.rater_quality_plot(report.get("rater_quality") or [])
    if name == "human_ranking":
        return agreement_plots.human_ranking_plot(report.get("human_ranking") or [], loro_scores)
    raise KeyError(name)


def agreement_figures(report: Mapping[str, Any], result: AgreementResult) -> dict[str, str]:
    """The report's figures as SVG data URIs, keyed by name.

    ``report`` is the JSON object; ``result`` the computation it was serialized from, which keeps
    the leave-one-rater-out fits per system (docs/protocol.md "Human reference and agreement") for the
    human-ranking spread.
    """
    loro = result.leave_one_rater_out_scores()
    return {name: agreement_figure(name, report, loro) for name in AGREEMENT_FIGURES}


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
