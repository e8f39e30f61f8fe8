"""Frozen judge weights (docs/protocol.md "The study model" CoefficientSet,
docs/protocol.md "Judges and calibration" Freezing). Builds on annotation and judges."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from annotation.models import Study


class FrozenError(Exception):
    """A frozen CoefficientSet cannot be changed or deleted."""


class CoefficientSetQuerySet(models.QuerySet["CoefficientSet"]):
    def update(self, **kwargs: Any) -> int:
        raise FrozenError("coefficient sets are frozen: create a new one instead of updating")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise FrozenError("coefficient sets are frozen and cannot be deleted")


class CoefficientSet(models.Model):
    """Named, frozen judge weights with provenance. Immutable once saved."""

    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="coefficient_sets")
    name = models.CharField(max_length=120)
    coefficients = models.JSONField()  # {judge name: beta}
    comparison_ids = models.JSONField(default=list, blank=True)
    data_hash = models.CharField(max_length=64, blank=True)
    library_versions = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, default="fit")  # fit | import
    report = models.JSONField(default=dict, blank=True)
    frozen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    frozen_by_label = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = CoefficientSetQuerySet.as_manager()

    class Meta:
        ordering = ["study", "-created_at"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="coefficientset_unique_name")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise FrozenError(f"coefficient set {self.name!r} is frozen and cannot be changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise FrozenError(f"coefficient set {self.name!r} is frozen and cannot be deleted")


class CalibrationReport(models.Model):
    """A computed docs/protocol.md "Judges and calibration" calibration report (the JSON of ``calibrate``,
    without per-comparison predictions), kept so the researcher page can show the last one and freeze exactly
    what it shows. Reports are records, not frozen sets: they may be deleted."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="calibration_reports")
    report = models.JSONField()
    resamples = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    data_hash = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_label = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.study_id}@{self.created_at:%Y-%m-%d %H:%M}"
