"""Deployment leaderboards (SPEC §7). Builds on annotation, judges and calibration."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Study, new_token
from calibration.models import CoefficientSet


class Leaderboard(models.Model):
    """A computed (and optionally published) leaderboard: parameters, progress and result."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="leaderboards")
    coefficient_set = models.ForeignKey(CoefficientSet, on_delete=models.PROTECT, related_name="leaderboards")
    resamples = models.PositiveIntegerField(default=2000)
    seed = models.BigIntegerField(default=20260831)
    use_human_labels = models.BooleanField(default=False)
    objective = models.JSONField(default=dict, blank=True)  # {system: score} imported objective leaderboard
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    published = models.BooleanField(default=False)
    public_token = models.CharField(max_length=40, unique=True, default=new_token)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "-created_at"]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.coefficient_set_id}:{self.created_at:%Y-%m-%d}"
