"""HTML of ``kind_report`` (docs/protocol.md "Files" (a self-contained HTML page with plots)): context and
standalone page.

The kind's report (``kind_reports.kinds``) gives its figure, its analysis key and its template; the
shared body (``kind_reports/kind_body.html``) adds the agreement and the hygiene sections.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.template.loader import render_to_string

from kind_reports.kinds import REPORTS

#: The report's figures: the kind's own plot, and what the exclusion rules removed.
KIND_FIGURES = ("analysis", "hygiene")


def kind_figure(name: str, report: Mapping[str, Any]) -> str:
    """One figure of the report (``KIND_FIGURES``) as an SVG data URI."""
    from kind_reports.figures import hygiene_plot

    if name == "analysis":
        spec = REPORTS[report["kind"]]
        return spec.figure(report[spec.analysis_key])
    if name == "hygiene":
        return hygiene_plot(report["hygiene"])
    raise KeyError(name)


def kind_figures(report: Mapping[str, Any]) -> dict[str, str]:
    """The report's figures as SVG data URIs: ``analysis`` (the kind's plot) and ``hygiene``."""
    return {name: kind_figure(name, report) for name in KIND_FIGURES}


def kind_context(
    *, study: Any, report: Mapping[str, Any], figures: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Template context shared by the standalone export and the researcher page."""
    from kind_reports.figures import RULE_LABELS

    spec = REPORTS[report["kind"]]
    hygiene = report["hygiene"]
    removed = [{**r, "label": RULE_LABELS.get(r["rule"], r["rule"])} for r in hygiene.get("removed") or []]
    return {
        "study": study,
        "report": report,
        "figures": figures if figures is not None else kind_figures(report),
        "hygiene": hygiene,
        "removed": removed,
        "analysis": report.get(spec.analysis_key),
        "analysis_template": spec.template,
        "agreement_by_dimension": spec.agreement_by_dimension,
    }


def render_kind_report_html(*, study: Any, report: Mapping[str, Any]) -> str:
    """The self-contained HTML ``kind_report``: inline CSS, figures as data URIs, no script."""
    return render_to_string("kind_reports/kind_report.html", kind_context(study=study, report=report))
