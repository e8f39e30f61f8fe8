"""Automatic judges and their outputs (SPEC §2, §6). Builds on ``annotation``."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from annotation.models import Comparison


class Provider(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible chat completions"
    ANTHROPIC = "anthropic", "Anthropic messages"
    IMPORTED = "imported", "Imported outputs only (not callable)"
    DEMO = "demo", "Built-in demo judge (answers locally from the demo's ground truth)"


class Judge(models.Model):
    """An automatic (VLM) judge. Endpoints are admin-configured; the API key is never stored."""

    name = models.CharField(max_length=120, unique=True)
    family = models.CharField(max_length=80, blank=True, help_text="Vendor family, for committee eligibility")
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.OPENAI)
    model = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(max_length=500, blank=True)
    api_key_env = models.CharField(max_length=120, blank=True, help_text="Name of the environment variable")
    max_image_edge = models.PositiveIntegerField(null=True, blank=True)
    max_image_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    max_request_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    rate_per_second = models.FloatField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(default=4)
    timeout_seconds = models.FloatField(default=120.0)
    max_invalid_retries = models.PositiveIntegerField(default=2)
    max_transport_retries = models.PositiveIntegerField(default=5)
    max_attempts = models.PositiveIntegerField(default=10)
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(default=1024)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Order(models.TextChoices):
    PRIMARY = "primary", "Primary (canonical A on the left)"
    SWAPPED = "swapped", "Swapped (canonical B shown as A)"


class OutputStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    VALID = "valid", "Valid"
    INVALID = "invalid", "Invalid reply"
    FAILED = "failed", "Transport failure"


class CurrentOutputManager(models.Manager["JudgeOutput"]):
    """The outputs in force: superseded ones (paper B.5) are history, reached by ``all_versions``."""

    def get_queryset(self) -> models.QuerySet[JudgeOutput]:
        return super().get_queryset().filter(superseded=False)


class JudgeOutput(models.Model):
    """judge × comparison × order × repeat → raw reply, validation status, canonical answer.

    ``superseded``: a candidate of the comparison was replaced after this output was made
    (``import_study --update``, paper B.5); it is kept, answers no current query
    (``JudgeOutput.objects`` leaves it out), and ``run_judges`` makes its successor.
    """

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="outputs")
    comparison = models.ForeignKey(Comparison, on_delete=models.CASCADE, related_name="judge_outputs")
    order = models.CharField(max_length=8, choices=Order.choices)
    repeat = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=OutputStatus.choices, default=OutputStatus.PENDING)
    raw = models.TextField(blank=True)
    error = models.TextField(blank=True)
    # Canonical (SPEC §3) answer of a valid reply.
    winner = models.CharField(max_length=4, blank=True)
    confidence = models.PositiveSmallIntegerField(null=True, blank=True)
    axis_scores = models.JSONField(default=list, blank=True)  # [{"id": AXIS_ID, "score": int}], canonical
    reason = models.TextField(blank=True)
    # Bookkeeping for the task queue: attempts are capped; the lease lets a stuck claim be retaken.
    attempts = models.PositiveIntegerField(default=0)
    invalid_attempts = models.PositiveIntegerField(default=0)
    transport_failures = models.PositiveIntegerField(default=0)
    lease_until = models.DateTimeField(null=True, blank=True)
    # Who holds the current claim: every write of a running call is conditional on it, so a worker
    # whose lease ran out can never overwrite the result of the worker that took over.
    claim_token = models.CharField(max_length=32, blank=True)
    image_repairs = models.JSONField(default=list, blank=True)
    # sha256 of the prompt template the judge answered (judges.prompts.prompt_template_sha256);
    # empty for imported outputs and for calls that got no reply.
    prompt_sha256 = models.CharField(max_length=64, blank=True)
    imported = models.BooleanField(default=False)
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    all_versions = models.Manager()  # superseded outputs included
    objects = CurrentOutputManager()

    class Meta:
        ordering = ["comparison", "judge", "order", "repeat"]
        default_manager_name = "objects"
        base_manager_name = "all_versions"
        constraints = [
            # One output in force per call; superseded ones (any number) are kept beside it.
            models.UniqueConstraint(
                fields=["judge", "comparison", "order", "repeat"],
                condition=Q(superseded=False),
                name="judgeoutput_unique_call",
            ),
            models.CheckConstraint(
                condition=~Q(status="valid") | Q(winner__in=["A", "B", "TIE"]), name="judgeoutput_valid_has_winner"
            ),
        ]
        indexes = [models.Index(fields=["judge", "status"])]

    def __str__(self) -> str:
        return f"{self.judge_id}:{self.comparison_id}:{self.order}:{self.repeat}"
