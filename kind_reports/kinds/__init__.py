"""The kind reports' registry: ``report_of(study)`` is the one place a report's kind is looked up.

One ``KindReportSpec`` per study kind with a docs/study-kinds.md "The kind report" report, keyed by
``annotation.kinds.design_of(study).name``; the reference kind has its own reports
(docs/protocol.md "Human reference and agreement", "Judges and calibration" in ``calibration``).
"""

from __future__ import annotations

from annotation.errors import ValidationFailed
from annotation.kinds import design_of
from annotation.models import Study
from kind_reports.kinds import checklist, pairwise, rating
from kind_reports.kinds.base import KindReportSpec

REPORTS: dict[str, KindReportSpec] = {
    module.REPORT.kind: module.REPORT for module in (pairwise, checklist, rating)
}


def registered(study: Study) -> KindReportSpec | None:
    """The report of the study's kind, or None when its kind has no docs/study-kinds.md "The kind report"
    report."""
    try:
        return REPORTS.get(design_of(study).name)
    except KeyError:
        return None


def report_of(study: Study) -> KindReportSpec:
    """The report of the study's kind; a one-line ``ValidationFailed`` for any other kind."""
    report = registered(study)
    if report is not None:
        return report
    try:
        design = design_of(study)
    except KeyError:
        design = None
    if design is not None and design.has_reference:
        raise ValidationFailed(
            f"study '{study.slug}' is of kind '{design.name}': use agreement_report (docs/protocol.md \"Human reference and agreement\") for it"
        )
    raise ValidationFailed(f"study '{study.slug}' is of kind {study.kind!r}, not one of {', '.join(REPORTS)}")


__all__ = ["REPORTS", "KindReportSpec", "registered", "report_of"]
