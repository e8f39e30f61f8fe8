"""Automatic judges and their outputs (docs/protocol.md "The study model", "Judges and calibration"). Builds
on ``annotation``."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from annotation.models import Candidate, ChecklistAnswer, Comparison, Predicate


class Provider(models.TextChoices):
    OPENAI = "openai", "OpenAI-compatible chat completions"
    OPENAI_RESPONSES = "openai-responses", "OpenAI Responses API"
    ANTHROPIC = "anthropic", "Anthropic messages"
    GEMINI = "gemini", "Google Gemini generateContent"
    AZURE_OPENAI = "azure-openai", "Azure OpenAI chat completions"
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
    max_tokens = models.PositiveIntegerField(default=4096)
    # Which parameters are sent (judges.providers.base.Endpoint): add_judge flags override.
    api_version = models.CharField(
        max_length=40, blank=True, help_text="anthropic-version / Azure api-version"
    )
    token_param = models.CharField(
        max_length=24, default="auto", help_text="auto, max_tokens or max_completion_tokens"
    )
    send_temperature = models.BooleanField(default=True)
    seed = models.BigIntegerField(null=True, blank=True)
    reasoning_effort = models.CharField(max_length=16, blank=True)
    structured_output = models.BooleanField(default=True)
    # A 400 refusing a parameter for the model: drop it and retry the call once (judges registered
    # before this existed keep it off), and what was learned that way: {param: {"changed", "undo",
    # "said", "at"}} (judges.services.judges.judge_learn_parameters).
    adapt_parameters = models.BooleanField(default=True)
    learned_parameters = models.JSONField(default=dict, blank=True)
    # Prices in US dollars per million tokens; batch calls cost (1 - batch_discount) of that.
    price_input_per_mtok = models.FloatField(null=True, blank=True)
    price_output_per_mtok = models.FloatField(null=True, blank=True)
    batch_discount = models.FloatField(default=0.5)
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
    """judge × unit × order × repeat → raw reply, validation status, canonical answer.

    The unit is what the study kind's judge request is about (``annotation.kinds.judging``): a
    ``comparison`` (pairwise kinds: a verdict in ``winner``, ``confidence``, ``axis_scores``) or one
    ``candidate`` rendering (the checklist kind: one answer per question in ``checklist_answers``;
    the rating kind: one score per dimension in ``axis_scores``). Exactly one of the two is set.

    ``superseded``: a candidate of the comparison, or the rendering itself, was replaced after this
    output was made (``import_study --update``, paper B.5); it is kept, answers no current query
    (``JudgeOutput.objects`` leaves it out), and ``run_judges`` makes its successor.
    """

    # No index of its own: the (judge, status) index below starts with it and serves every lookup
    # by judge (and the PROTECT check), so a third index per row would only slow bulk imports.
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="outputs", db_index=False)
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="judge_outputs"
    )
    candidate = models.ForeignKey(
        Candidate, null=True, blank=True, on_delete=models.CASCADE, related_name="judge_outputs"
    )
    order = models.CharField(max_length=8, choices=Order.choices)
    repeat = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=OutputStatus.choices, default=OutputStatus.PENDING)
    raw = models.TextField(blank=True)
    error = models.TextField(blank=True)
    # Canonical (docs/protocol.md "Canonical answers") answer of a valid reply.
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
    # Usage (summed over every HTTP attempt of the call: what was billed) and what the provider said.
    calls = models.PositiveIntegerField(default=0)  # HTTP requests sent for this output, every attempt
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    served_model = models.CharField(max_length=200, blank=True)
    request_id = models.CharField(max_length=200, blank=True)
    fingerprint = models.CharField(max_length=200, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    attempt_log = models.JSONField(default=list, blank=True)  # one entry per HTTP attempt
    batch_id = models.CharField(max_length=200, blank=True)  # provider batch holding this call

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
            models.UniqueConstraint(
                fields=["judge", "candidate", "order", "repeat"],
                condition=Q(superseded=False, candidate__isnull=False),
                name="judgeoutput_unique_item_call",
            ),
            models.CheckConstraint(
                condition=Q(comparison__isnull=False, candidate__isnull=True)
                | Q(comparison__isnull=True, candidate__isnull=False),
                name="judgeoutput_one_unit",
            ),
            # A valid verdict names a winner; a call about one rendering has none.
            models.CheckConstraint(
                condition=~Q(status="valid") | Q(winner__in=["A", "B", "TIE"]) | Q(candidate__isnull=False),
                name="judgeoutput_valid_has_winner",
            ),
        ]
        indexes = [models.Index(fields=["judge", "status"])]

    def __str__(self) -> str:
        unit = self.comparison_id if self.comparison_id is not None else f"item{self.candidate_id}"
        return f"{self.judge_id}:{unit}:{self.order}:{self.repeat}"


class JudgeChecklistAnswer(models.Model):
    """One question of a checklist judge call (docs/protocol.md "Checklist judges"): the answer and the
    visible evidence the judge cited.

    Written with its call's ``valid`` status in one transaction, every question of the call at once
    (a reply is stored whole or not at all). ``passed`` is the question's score: YES with non-blank
    evidence; NO, UNCLEAR and a YES without evidence fail (AesCode §E.1). Usage and cost are the
    call's (``output``): one call asks every question of the rendering (decision 0076).
    """

    output = models.ForeignKey(JudgeOutput, on_delete=models.CASCADE, related_name="checklist_answers")
    predicate = models.ForeignKey(Predicate, on_delete=models.CASCADE, related_name="judge_answers")
    answer = models.CharField(max_length=8, choices=ChecklistAnswer.choices)
    evidence = models.TextField(blank=True)
    passed = models.BooleanField()

    class Meta:
        ordering = ["output", "predicate"]
        constraints = [
            models.UniqueConstraint(fields=["output", "predicate"], name="judgechecklistanswer_unique"),
            models.CheckConstraint(
                condition=Q(answer__in=["YES", "NO", "UNCLEAR"]), name="judgechecklistanswer_answer"
            ),
            models.CheckConstraint(
                condition=Q(passed=False) | Q(answer="YES"), name="judgechecklistanswer_pass_is_yes"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.output_id}:{self.predicate_id}={self.answer}"


class BatchStatus(models.TextChoices):
    PREPARING = "preparing", "Preparing (outputs claimed, not yet submitted)"
    SUBMITTED = "submitted", "Submitted (the provider is working on it)"
    STORED = "stored", "Results stored"
    CANCELLED = "cancelled", "Cancelled (partial results stored)"
    FAILED = "failed", "Failed (outputs released for live calls)"


class JudgeBatch(models.Model):
    """One provider batch job (OpenAI or Azure OpenAI Batch, Anthropic Message Batches, Gemini batch) of judge calls.

    Its outputs are claimed with ``claim_token = "batch<pk>"`` and ``batch_id = str(pk)`` until the
    results are stored; each request's ``custom_id`` is the output id.
    """

    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="batches")
    study = models.ForeignKey("annotation.Study", on_delete=models.CASCADE, related_name="judge_batches")
    status = models.CharField(max_length=12, choices=BatchStatus.choices, default=BatchStatus.PREPARING)
    provider_batch_id = models.CharField(max_length=200, blank=True)
    input_file_id = models.CharField(max_length=200, blank=True)
    provider_status = models.CharField(max_length=40, blank=True)
    calls = models.PositiveIntegerField(default=0)
    stored = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"batch {self.pk} of {self.judge_id} ({self.status})"

    @property
    def claim_token(self) -> str:
        return f"batch{self.pk}"
