"""Deployment leaderboards (docs/protocol.md "Deployment leaderboard"). Builds on annotation, judges and
calibration."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Study, new_token
from calibration.models import CoefficientSet


class RankingModel(models.TextChoices):
    """The paired-comparison model a leaderboard is fitted with (docs/protocol.md "Deployment leaderboard";
    Davidson: issue 16)."""

    BRADLEY_TERRY = "bradley_terry", 'Bradley–Terry (docs/protocol.md "Deployment leaderboard")'
    DAVIDSON = "davidson", "Davidson (ties modelled, beside Bradley–Terry)"


class Leaderboard(models.Model):
    """A computed (and optionally published) leaderboard: parameters, progress and result.

    ``inputs`` is the snapshot the computation used (systems, each scored comparison's A, B, p̂ and
    page), taken once when the run starts, so that bootstrap chunks computed on several workers
    all see the same data even if judge outputs change meanwhile. ``result`` is the
    docs/protocol.md "Report keys" JSON.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="leaderboards")
    # None: a leaderboard of the human votes themselves (docs/protocol.md "Human leaderboard").
    coefficient_set = models.ForeignKey(
        CoefficientSet, null=True, blank=True, on_delete=models.PROTECT, related_name="leaderboards"
    )
    resamples = models.PositiveIntegerField(default=2000)
    seed = models.BigIntegerField(default=20260831)
    use_human_labels = models.BooleanField(default=False)
    ranking_model = models.CharField(
        max_length=16, choices=RankingModel.choices, default=RankingModel.BRADLEY_TERRY
    )
    objective = models.JSONField(default=dict, blank=True)  # {system: score} imported objective leaderboard
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    chunks_total = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    published = models.BooleanField(default=False)
    public_token = models.CharField(max_length=40, unique=True, default=new_token)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["study", "-created_at"]

    def __str__(self) -> str:
        return f"{self.study_id}:{self.coefficient_set_id or 'human'}:{self.created_at:%Y-%m-%d}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def from_human_votes(self) -> bool:
        """A leaderboard of the study's human votes (no coefficient set, docs/protocol.md "Human
        leaderboard")."""
        return self.coefficient_set_id is None

    @property
    def source_name(self) -> str:
        """What the outcomes come from: the coefficient set's name, or ``human votes``."""
        return "human votes" if self.coefficient_set is None else self.coefficient_set.name


class LeaderboardChunk(models.Model):
    """One seeded slice ``start..stop`` of a leaderboard's bootstrap, computed by one task.

    ``result`` holds the chunk's resampled scores and ranks; the task that stores the last chunk
    merges them (``stats.bradley_terry.merge_bootstrap_results``) into the leaderboard.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Done"

    leaderboard = models.ForeignKey(Leaderboard, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    stop = models.PositiveIntegerField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(default=dict, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["leaderboard", "index"]
        constraints = [
            models.UniqueConstraint(fields=["leaderboard", "index"], name="leaderboardchunk_unique_index"),
        ]

    def __str__(self) -> str:
        return f"{self.leaderboard_id}[{self.start}:{self.stop}]"


class StudyPlanRun(models.Model):
    """One sample-size plan computed on the planner page or through the API (docs/protocol.md
    "Planning a study's size"): its inputs, progress and result. The pilot study is only read; this
    row is the planner's own, never part of a study's data."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    pilot = models.ForeignKey(Study, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    parameters = models.JSONField(default=dict)  # ranking.planning.PLAN_PARAMETERS, cleaned
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)  # ranking.planning.study_plan_report
    csv = models.TextField(blank=True)
    svg = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"plan {self.pk}: {self.parameters.get('target', '?')}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)
