"""Reads of frozen coefficient sets and stored calibration reports
(docs/protocol.md "The study model", "Judges and calibration")."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from annotation.errors import NotFound
from annotation.models import Study
from calibration.models import CalibrationReport, CoefficientSet


def coefficient_sets_for_study(*, study: Study) -> QuerySet[CoefficientSet]:
    """The study's frozen sets, newest first."""
    return (
        CoefficientSet.objects.filter(study=study).select_related("frozen_by").order_by("-created_at", "-id")
    )


def coefficient_set_get(*, study: Study, name: str) -> CoefficientSet:
    """The set ``name`` of ``study``; a one-line NotFound naming the known sets otherwise."""
    found = CoefficientSet.objects.filter(study=study, name=name).select_related("frozen_by").first()
    if found is None:
        known = list(
            CoefficientSet.objects.filter(study=study).order_by("name").values_list("name", flat=True)
        )
        raise NotFound(
            f"study {study.slug} has no coefficient set {name!r} (frozen sets: {', '.join(known) or 'none'})"
        )
    return found


def calibration_report_latest(*, study: Study) -> CalibrationReport | None:
    """The most recent stored calibration report of ``study``, if any."""
    return CalibrationReport.objects.filter(study=study).order_by("-created_at", "-id").first()


def calibration_report_get(*, study: Study, report_id: int) -> CalibrationReport:
    found = CalibrationReport.objects.filter(study=study, pk=report_id).first()
    if found is None:
        raise NotFound(f"study {study.slug} has no calibration report {report_id}")
    return found


@dataclass(frozen=True)
class ReportStaleness:
    """What changed since a stored calibration report was computed: the votes and the judge outputs
    stored (or finished) after it, which the report does not include."""

    newer_votes: int
    newer_outputs: int

    @property
    def stale(self) -> bool:
        return bool(self.newer_votes or self.newer_outputs)


def calibration_report_staleness(*, study: Study, stored: CalibrationReport) -> ReportStaleness:
    """Votes and judge outputs newer than ``stored`` (two counting queries)."""
    from annotation.models import Vote
    from judges.models import JudgeOutput

    return ReportStaleness(
        newer_votes=Vote.objects.filter(
            trial__assignment__block__study=study, created_at__gt=stored.created_at
        ).count(),
        newer_outputs=JudgeOutput.objects.filter(
            comparison__study=study, finished_at__gt=stored.created_at
        ).count(),
    )
