"""Reads of frozen coefficient sets and stored calibration reports
(docs/protocol.md "The study model", "Judges and calibration")."""

from __future__ import annotations

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
