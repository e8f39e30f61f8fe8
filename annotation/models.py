"""The study data model (docs/protocol.md "The study model") — the ground floor: imports no other app.

Canonical identities (docs/protocol.md "Canonical answers") are enforced by the schema: a comparison's
candidates never change, one vote per trial, no comparison twice in a block, blocks of a study are disjoint.
Other study kinds (docs/study-kinds.md "Running the other study kinds") reuse Study / Block / Assignment /
Trial / Vote; a trial then points at a candidate (rating) or a predicate (checklist) instead of a comparison.
Their bundles map a brief onto a Page (text, no image) and an item onto a Candidate (docs/bundle-kinds.md).
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotation.services.crowd_settings import RATER_PAGE_SETTINGS


def new_token() -> str:
    """An opaque, URL-safe identifier that carries no information about what it names."""
    return secrets.token_urlsafe(18)


class StudyKind(models.TextChoices):
    PAIRWISE_REFERENCE = "pairwise_reference", "Pairwise with reference"
    PAIRWISE = "pairwise", "Pairwise without reference"
    CHECKLIST = "checklist", "Checklist predicates"
    RATING = "rating", "Ratings"


class Study(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=32, choices=StudyKind.choices, default=StudyKind.PAIRWISE_REFERENCE)
    instructions_md = models.TextField(blank=True)
    # Empty means "use the project's default prompt" (judges app); docs/protocol.md "Judges and calibration":
    # study data, editable.
    judge_prompt = models.TextField(blank=True)
    seed = models.BigIntegerField(default=20260830)
    hidden_repeats = models.PositiveIntegerField(default=6)
    min_gap = models.PositiveIntegerField(default=20)
    neutralize_media = models.BooleanField(default=True)
    # Prolific-style completion code shown at the end of an assignment; empty: one per assignment.
    completion_code = models.CharField(max_length=64, blank=True)
    # Opaque token of the public participant link (docs/protocol.md "Planning the human study" study links).
    link_token = models.CharField(max_length=40, unique=True, default=new_token)
    accepting_participants = models.BooleanField(default=True)
    # Crowd round trip (docs/decisions/0030-session-flow-and-crowd-round-trip.md): where a finished
    # participant is sent (e.g. Prolific's .../submissions/complete?cc=CODE; "{code}" is replaced by the
    # completion code), and the URL/code for a participant screened out (comprehension failed, voided, study
    # full).
    completion_url = models.URLField(max_length=500, blank=True)
    screened_out_url = models.URLField(max_length=500, blank=True)
    screened_out_code = models.CharField(max_length=64, blank=True)
    # An optional free-text comment box on the end page.
    end_comment = models.BooleanField(default=False)
    # A break screen every N answered trials (0: no breaks).
    break_every = models.PositiveIntegerField(default=40)
    # Kind-specific settings (rating scale, equivalence margin, ...) and free bundle metadata.
    options = models.JSONField(default=dict, blank=True)
    researchers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="studies")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


# The rater page's study settings (issue 30), kept in ``Study.options["rater_page"]``:
# digit_keys: digits answer the highlighted question; axes_from_verdict: the "v" key (and its
# button) sets every axis to the verdict's side; mark_defaulted_axes: votes remember which axes
# were so set and left unchanged, and the votes CSV says so (its trailing ``axes_defaulted``).
# The defaults live with the crowd settings' validator, which checks them in the bundle and PATCH.
RATER_PAGE_DEFAULTS = RATER_PAGE_SETTINGS


def rater_page_options(study: Study) -> dict[str, bool]:
    """The study's rater-page settings, defaults filled in."""
    stored = (study.options or {}).get("rater_page") or {}
    return {key: bool(stored.get(key, default)) for key, default in RATER_PAGE_DEFAULTS.items()}


class AxisScope(models.TextChoices):
    FIXED = "fixed", "Fixed (always scored)"
    CONDITIONAL = "conditional", "Conditional (when the page has a target)"


class Axis(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="axes")
    axis_id = models.CharField(max_length=80)
    # What raters read (docs/protocol.md "The study model", e.g. "Global layout"); blank: the id, humanized
    # (``display_title``).
    title = models.CharField(max_length=200, blank=True)
    scope = models.CharField(max_length=16, choices=AxisScope.choices)
    description = models.TextField(blank=True)
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["study", "position"]
        verbose_name_plural = "axes"
        constraints = [
            models.UniqueConstraint(fields=["study", "axis_id"], name="axis_unique_id"),
            models.UniqueConstraint(fields=["study", "position"], name="axis_unique_position"),
        ]

    def __str__(self) -> str:
        return self.axis_id

    @property
    def display_title(self) -> str:
        return axis_title(self.axis_id, self.title)


def axis_title(axis_id: str, title: str = "") -> str:
    """The axis name raters read: its ``title``, else the id humanized (``GLOBAL_LAYOUT`` → "Global layout")."""
    if title.strip():
        return title.strip()
    words = axis_id.replace("_", " ").replace("-", " ").replace(".", " ").split()
    return " ".join(words).capitalize() if words else axis_id


class StoredImage(models.Model):
    """An image re-encoded from pixels (no metadata), stored under its content hash."""

    sha256 = models.CharField(max_length=64, unique=True)
    file = models.FileField(upload_to="images/", max_length=200)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    size_bytes = models.PositiveBigIntegerField()
    # Pixel mode of the stored PNG (RGB, RGBA, L); empty for rows stored before it was recorded.
    mode = models.CharField(max_length=8, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.sha256[:12]


class System(models.Model):
    """A model or pipeline under test. Its name and id are never shown to raters or judges."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="systems")
    external_id = models.CharField(max_length=120)
    name = models.CharField(max_length=200)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["study", "position", "external_id"]
        constraints = [models.UniqueConstraint(fields=["study", "external_id"], name="system_unique_id")]

    def __str__(self) -> str:
        return self.external_id


class Page(models.Model):
    """The reference item: a page with its reference image (or, for `pairwise`, a text brief)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pages")
    external_id = models.CharField(max_length=120)
    # What raters and judges see: the display variant (8-bit RGB, the page's display width; SECURITY.md
    # row 16). ``original_image`` is the upload as decoded (its size and mode), for researchers and
    # the bundle export; ``neutralized_image`` is the display variant with media regions hidden.
    image = models.ForeignKey(StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    original_image = models.ForeignKey(
        StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    neutralized_image = models.ForeignKey(
        StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    text = models.TextField(blank=True)
    # [{axis, role, bbox_1000: [x0, y0, x1, y1], description}]
    targets = models.JSONField(default=list, blank=True)
    # [{kind: photo|chart, bbox_1000}]
    media = models.JSONField(default=list, blank=True)
    # [{type: title|text|list|table|formula|figure, bbox_1000}]: the page's blocks, from its render's DOM
    # (docs/rendering.md "The JSON of a render"); the trial page aligns the panes' scrolling by them.
    blocks = models.JSONField(default=list, blank=True)
    meta = models.JSONField(default=dict, blank=True)
    # The brief's verifiable requirements {text?, tables?, charts?, canvas?} (docs/protocol.md "AesCode's
    # rule score"; rule_score.requirements); {} when it has none.
    requirements = models.JSONField(default=dict, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["study", "position", "external_id"]
        constraints = [models.UniqueConstraint(fields=["study", "external_id"], name="page_unique_id")]

    def __str__(self) -> str:
        return self.external_id

    def active_axis_ids(self, axes: list[Axis]) -> list[str]:
        """Fixed axes always; conditional ones when the page has a target for them
        (docs/protocol.md "The study model")."""
        targeted = {t.get("axis") for t in self.targets}
        return [a.axis_id for a in axes if a.scope == AxisScope.FIXED or a.axis_id in targeted]


class Candidate(models.Model):
    """One system's rendering of one page. A failed render has no image and is never scheduled."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="candidates")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="candidates")
    # What raters and judges see: the display variant (8-bit RGB, the page's display width; SECURITY.md
    # row 16). ``original_image`` is the upload as decoded (its size and mode), for researchers and
    # the bundle export; ``neutralized_image`` is the display variant with media regions hidden.
    image = models.ForeignKey(StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    original_image = models.ForeignKey(
        StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    neutralized_image = models.ForeignKey(
        StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    rendered = models.BooleanField(default=True)
    # Why a failed render failed (a timeout, a blank page, ...: the renderer's one line); empty otherwise.
    render_reason = models.CharField(max_length=300, blank=True)
    media = models.JSONField(default=list, blank=True)
    blocks = models.JSONField(default=list, blank=True)  # as Page.blocks, from this render's DOM
    # Imported metric scores for score–preference analyses (docs/study-kinds.md "The kind report"): {metric:
    # score}.
    metrics = models.JSONField(default=dict, blank=True)
    # The rule score of this render against its brief's requirements {rule, applicable, channels}
    # (docs/protocol.md "AesCode's rule score"; rule_score.verifiers); {} when not scored.
    rule = models.JSONField(default=dict, blank=True)
    # Opaque id for exports of other kinds' items; never derived from the system.
    external_id = models.CharField(max_length=120, blank=True)
    # The current version (paper B.5): 1 as imported, +1 per replacement by ``import_study --update``.
    # The fields above always hold the current version; earlier ones are CandidateVersion rows.
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["page", "system"]
        constraints = [
            models.UniqueConstraint(fields=["page", "system"], name="candidate_unique_page_system"),
            models.CheckConstraint(
                condition=Q(rendered=False, image__isnull=True) | Q(rendered=True),
                name="candidate_failed_render_has_no_image",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.page_id}/{self.system_id}"


class CandidateVersion(models.Model):
    """One version of a candidate (paper B.5): its image, render flag and media, when and why.

    A candidate never replaced has no rows (it is at version 1, as imported); the first
    replacement writes the row of version 1 (dated at the study's import) and of version 2.
    ``activated_at`` is when the version became the one shown and judged.
    """

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    image = models.ForeignKey(StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # The upload as the bundle had it (researchers and exports); ``image`` is what raters saw.
    original_image = models.ForeignKey(
        StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    neutralized_image = models.ForeignKey(
        StoredImage, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    rendered = models.BooleanField(default=True)
    media = models.JSONField(default=list, blank=True)
    # The bundle's ``version_date`` (the date the candidate was produced) and ``version_note``.
    date = models.DateField(null=True, blank=True)
    note = models.TextField(blank=True)
    activated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["candidate", "number"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "number"], name="candidateversion_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.candidate_id}v{self.number}"


class PageTruth(models.Model):
    """A page's ground truth for the objective protocol (docs/protocol.md "Ground truth"): its blocks
    in the documented JSON format, ``{page: {width, height}, blocks: [{type, text, html?, latex?,
    bbox}]}``, as given or read from an HTML page rendered with the study's settings (the blocks are
    kept, not the HTML). Researchers only: nothing a rater is served reads it."""

    page = models.OneToOneField(Page, on_delete=models.CASCADE, related_name="truth")
    blocks = models.JSONField()

    def __str__(self) -> str:
        return f"truth of {self.page_id}"


class CandidateBlocks(models.Model):
    """A candidate's blocks from its render's DOM (``dom.blocks``), with their text, table HTML and
    LaTeX, in the ground truth's format (docs/protocol.md "Ground truth"): what the objective protocol
    scores. Kept only for the studies that have ground truth (``Candidate.blocks`` keeps the
    geometry every study has)."""

    candidate = models.OneToOneField(Candidate, on_delete=models.CASCADE, related_name="objective_blocks")
    blocks = models.JSONField()

    def __str__(self) -> str:
        return f"blocks of {self.candidate_id}"


class ObjectiveScore(models.Model):
    """The cached objective score of one candidate against its page's ground truth (docs/protocol.md
    "Objective scores beside the rankings"): ``score`` is the protocol's page score as a dict;
    ``digest`` the SHA-256 of the truth and the blocks it was computed from, so a change of either
    computes it again."""

    candidate = models.OneToOneField(Candidate, on_delete=models.CASCADE, related_name="objective_score")
    digest = models.CharField(max_length=64)
    score = models.JSONField()
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"objective score of {self.candidate_id}"


class ComparisonSet(models.TextChoices):
    HUMAN = "human", "Human study"
    DEPLOYMENT = "deployment", "Deployment"


class Comparison(models.Model):
    """Page + canonical candidate A + canonical candidate B. Never changes once created
    (docs/protocol.md "Canonical answers")."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="comparisons")
    external_id = models.CharField(max_length=120)
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="comparisons")
    candidate_a = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="+")
    candidate_b = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="+")
    set = models.CharField(max_length=16, choices=ComparisonSet.choices, default=ComparisonSet.HUMAN)
    # Data trials of serve-time blocks that show this comparison (annotation.services.serve_time):
    # the counter its quota is taken from, one conditional UPDATE per serve.
    served = models.PositiveIntegerField(default=0)
    # Its places in serve-time blocks (their rater target; 0: not in their pool).
    serve_quota = models.PositiveIntegerField(default=0)
    # Its pair of systems' column (stats.allocation.pair_column over the study's systems by
    # position), set with the quota: serving reads pairs without joining candidates.
    serve_pair = models.PositiveIntegerField(null=True, blank=True)
    # Its display parity in serve-time blocks (docs/protocol.md "Serve-time choice"): the n-th serve
    # (from 0) shows canonical B on the left when ``(n + serve_side) % 2 == 1``. Set with the pair:
    # the pair's comparisons alternate which system their first serve puts on the left.
    serve_side = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="comparison_unique_id"),
            models.UniqueConstraint(fields=["page", "candidate_a", "candidate_b"], name="comparison_unique_pair"),
            models.CheckConstraint(condition=~Q(candidate_a=models.F("candidate_b")), name="comparison_distinct"),
        ]
        indexes = [models.Index(fields=["study", "set"])]

    def __str__(self) -> str:
        return self.external_id


class ChecklistAnswer(models.TextChoices):
    YES = "YES", "Yes"
    NO = "NO", "No"
    UNCLEAR = "UNCLEAR", "Unclear"


class Predicate(models.Model):
    """A checklist yes/no question about one item's image, with optional element boxes
    (docs/study-kinds.md "Running the other study kinds").

    ``automatic`` is the imported automatic answer (blank: none); ``question_type`` an optional tag
    (Content / Layout / Style, ...) for the per-type breakdown.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="predicates")
    external_id = models.CharField(max_length=120)
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="predicates")
    question = models.TextField()
    # [[x0, y0, x1, y1], ...] in 0…1000 page-normalized coordinates.
    boxes = models.JSONField(default=list, blank=True)
    automatic = models.CharField(max_length=16, choices=ChecklistAnswer.choices, blank=True)
    question_type = models.CharField(max_length=80, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["study", "position", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="predicate_unique_id"),
            models.CheckConstraint(
                condition=Q(automatic__in=["", "YES", "NO", "UNCLEAR"]), name="predicate_automatic_answer"
            ),
        ]

    def __str__(self) -> str:
        return self.external_id


class Block(models.Model):
    """An ordered set of items for human annotation; a study's blocks are disjoint
    (docs/protocol.md "The study model", "Planning the human study")."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="blocks")
    name = models.CharField(max_length=80)
    position = models.PositiveIntegerField(default=0)
    target_raters = models.PositiveIntegerField(default=1)
    # An adaptive study's serve-time block (annotation.services.serve_time): its data trials get
    # their comparison when the rater reaches them, and it has no items of its own.
    serve_time = models.BooleanField(default=False)
    # The seed the schedule used, recorded so the plan can be reproduced
    # (docs/protocol.md "Planning the human study").
    seed = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "position", "name"]
        constraints = [models.UniqueConstraint(fields=["study", "name"], name="block_unique_name")]

    def __str__(self) -> str:
        return self.name


class BlockItem(models.Model):
    """One member of a block: a comparison (pairwise kinds), a candidate (rating) or a predicate (checklist)."""

    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="block_items"
    )
    candidate = models.ForeignKey(
        Candidate, null=True, blank=True, on_delete=models.CASCADE, related_name="block_items"
    )
    predicate = models.ForeignKey(
        Predicate, null=True, blank=True, on_delete=models.CASCADE, related_name="block_items"
    )

    class Meta:
        ordering = ["block", "position"]
        constraints = [
            models.UniqueConstraint(fields=["block", "position"], name="blockitem_unique_position"),
            # Disjoint blocks: a comparison belongs to at most one block (of its one study).
            models.UniqueConstraint(
                fields=["comparison"], condition=Q(comparison__isnull=False), name="blockitem_unique_comparison"
            ),
            models.UniqueConstraint(
                fields=["block", "candidate"], condition=Q(candidate__isnull=False), name="blockitem_unique_candidate"
            ),
            models.UniqueConstraint(
                fields=["block", "predicate"], condition=Q(predicate__isnull=False), name="blockitem_unique_predicate"
            ),
            models.CheckConstraint(
                condition=Q(comparison__isnull=False) | Q(candidate__isnull=False) | Q(predicate__isnull=False),
                name="blockitem_has_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.block_id}:{self.position}"


class Rater(models.Model):
    """A person who judges trials: a rater account, a study-link participant, or an imported id."""

    class Source(models.TextChoices):
        ACCOUNT = "account", "Rater account"
        LINK = "link", "Study link participant"
        IMPORT = "import", "Imported votes"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="raters")
    external_id = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="rater_profiles"
    )
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.IMPORT)
    # Crowd-platform context (e.g. Prolific STUDY_ID, SESSION_ID); never shown back to others.
    platform = models.JSONField(default=dict, blank=True)
    # Comprehension check before the first trial (docs/study-kinds.md "Comprehension check"): attempts made,
    # and whether one passed.
    comprehension_attempts = models.PositiveSmallIntegerField(default=0)
    comprehension_passed = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="rater_unique_id"),
            models.UniqueConstraint(
                fields=["study", "user"], condition=Q(user__isnull=False), name="rater_unique_user"
            ),
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def display_name(self) -> str:
        """The name researchers see: an account's username (its id is ``account/<pk>``), else the id.

        Blinding is toward raters, not from researchers. Load ``user`` with the rater
        (``select_related("…rater__user")``) where many are shown.
        """
        if self.source == self.Source.ACCOUNT and self.user_id is not None and self.user is not None:
            return self.user.get_username()
        return self.external_id


class AssignmentState(models.TextChoices):
    OPEN = "open", "Open (no rater yet)"
    ACTIVE = "active", "In progress"
    FINISHED = "finished", "Finished"
    VOIDED = "voided", "Voided"


class Assignment(models.Model):
    """One rater's pass through one block (docs/protocol.md "The study model"). Planned in full before anyone
    starts."""

    block = models.ForeignKey(Block, on_delete=models.CASCADE, related_name="assignments")
    # The rater slot within the block: slot parity drives the display-order alternation
    # (docs/protocol.md "Planning the human study").
    slot = models.PositiveIntegerField()
    rater = models.ForeignKey(Rater, null=True, blank=True, on_delete=models.PROTECT, related_name="assignments")
    state = models.CharField(max_length=16, choices=AssignmentState.choices, default=AssignmentState.OPEN)
    seed = models.BigIntegerField(null=True, blank=True)
    token = models.CharField(max_length=40, unique=True, default=new_token)
    created_at = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    completion_code = models.CharField(max_length=64, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=300, blank=True)
    # The participant's optional end-of-study comment (Study.end_comment).
    end_comment = models.TextField(blank=True)

    class Meta:
        ordering = ["block", "slot", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["block", "slot"], condition=~Q(state="voided"), name="assignment_unique_live_slot"
            ),
            models.UniqueConstraint(
                fields=["block", "rater"],
                condition=Q(rater__isnull=False) & ~Q(state="voided"),
                name="assignment_unique_live_rater",
            ),
        ]
        indexes = [models.Index(fields=["block", "state"])]

    def __str__(self) -> str:
        return f"{self.block_id}#{self.slot}"


class SuppliedGold(models.Model):
    """A gold trial supplied in the bundle (issue 30; ``study.json`` ``gold``, docs/protocol.md):
    two candidate images of a page and the known answer. ``image_a`` / ``image_b`` are the shown
    (display) variants, ``original_a`` / ``original_b`` the uploads the export writes back."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="supplied_gold")
    external_id = models.CharField(max_length=120)
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="supplied_gold")
    image_a = models.ForeignKey("StoredImage", on_delete=models.PROTECT, related_name="+")
    image_b = models.ForeignKey("StoredImage", on_delete=models.PROTECT, related_name="+")
    original_a = models.ForeignKey("StoredImage", on_delete=models.PROTECT, related_name="+")
    original_b = models.ForeignKey("StoredImage", on_delete=models.PROTECT, related_name="+")
    answer = models.CharField(max_length=1, choices=[("A", "A"), ("B", "B")])
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["study", "position"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="supplied_gold_unique_id"),
        ]

    def __str__(self) -> str:
        return self.external_id


# ``Trial.attention_expected`` of a gold trial (issue 30): excluded from data wherever attention
# checks are, but nothing is told to the rater; the known canonical answer is ``GOLD_ANSWER``.
GOLD_EXPECTED = "GOLD"
GOLD_ANSWER = "A"


class Trial(models.Model):
    """One showing of an item in an assignment (docs/protocol.md "The study model").

    ``swapped``: canonical B is shown in the "A" slot. ``is_repeat``/``repeat_of``: hidden repeat.
    ``token`` is the only identifier a rater ever sees.
    """

    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="trials")
    position = models.PositiveIntegerField()
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.PROTECT, related_name="trials"
    )
    candidate = models.ForeignKey(Candidate, null=True, blank=True, on_delete=models.PROTECT, related_name="trials")
    predicate = models.ForeignKey(Predicate, null=True, blank=True, on_delete=models.PROTECT, related_name="trials")
    swapped = models.BooleanField(default=False)
    is_repeat = models.BooleanField(default=False)
    repeat_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="repeats"
    )
    # Instructed-response attention check (docs/study-kinds.md "Scheduling"): the answer the rater is told to
    # give, as displayed ("A" = left; "YES"; a rating value for every dimension). Blank: a data trial.
    # A check shows a real unit of the block but is never data.
    attention_expected = models.CharField(max_length=16, blank=True)
    # Gold trial (issue 30; ``pairwise_reference``): ``attention_expected`` is ``GOLD``, nothing is
    # told to the rater, canonical A shows ``gold_match_image`` (a copy of the page's reference at
    # a real candidate's size; null on trials scheduled before it existed: the reference itself)
    # and canonical B ``gold_image``, a degraded copy; the known answer is canonical A. Never
    # data, like an attention check (annotation.services.gold).
    gold_image = models.ForeignKey(
        "StoredImage", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    gold_match_image = models.ForeignKey(
        "StoredImage", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The bundle's gold entry this trial shows (null: a gold trial made from the page). Its right
    # image is stored as ``gold_match_image`` (canonical A) and the other as ``gold_image``.
    supplied_gold = models.ForeignKey(
        SuppliedGold, null=True, blank=True, on_delete=models.RESTRICT, related_name="trials"
    )
    token = models.CharField(max_length=40, unique=True, default=new_token)
    shown_at = models.DateTimeField(null=True, blank=True)
    # The candidate versions displayed (paper B.5): canonical A's and B's (a rating trial's candidate
    # in ``version_a``), recorded when the trial is first shown or its vote imported; null before.
    version_a = models.PositiveIntegerField(null=True, blank=True)
    version_b = models.PositiveIntegerField(null=True, blank=True)
    # A serve-time trial's probability of showing its pair of systems when it was chosen (the
    # allocation's floor included); the adaptive leaderboard weighs its vote by the inverse.
    allocation_probability = models.FloatField(null=True, blank=True)
    # What the trial's screen reads of its unit (images, active axes, blocks, the kind's question),
    # stored when the trial is made or first shown (annotation.services.trial_screens; decision
    # 0079): showing or answering a trial joins nothing. Server-side only: it holds the images'
    # stored file names, which a rater never receives.
    screen = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["assignment", "position"]
        constraints = [
            models.UniqueConstraint(fields=["assignment", "position"], name="trial_unique_position"),
            models.UniqueConstraint(
                fields=["assignment", "comparison"],
                condition=Q(is_repeat=False, attention_expected="", comparison__isnull=False),
                name="trial_unique_main_comparison",
            ),
            models.UniqueConstraint(
                fields=["assignment", "candidate"],
                condition=Q(is_repeat=False, attention_expected="", candidate__isnull=False),
                name="trial_unique_main_candidate",
            ),
            models.UniqueConstraint(
                fields=["assignment", "predicate"],
                condition=Q(is_repeat=False, attention_expected="", predicate__isnull=False),
                name="trial_unique_main_predicate",
            ),
            models.CheckConstraint(
                condition=Q(is_repeat=False, repeat_of__isnull=True) | Q(is_repeat=True, repeat_of__isnull=False),
                name="trial_repeat_has_original",
            ),
            models.CheckConstraint(
                condition=Q(attention_expected="") | Q(is_repeat=False), name="trial_check_is_not_a_repeat"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.assignment_id}:{self.position}"


class Label(models.TextChoices):
    A = "A", "A"
    B = "B", "B"
    TIE = "TIE", "Tie"
    CANNOT_JUDGE = "CANNOT_JUDGE", "Cannot judge"
    # Checklist kind (docs/study-kinds.md "Running the other study kinds").
    YES = "YES", "Yes"
    NO = "NO", "No"
    UNCLEAR = "UNCLEAR", "Unclear"


PAIRWISE_LABELS = (Label.A, Label.B, Label.TIE, Label.CANNOT_JUDGE)


class Vote(models.Model):
    """The answer to a trial, stored canonically (docs/protocol.md "Canonical answers"): A/B as the comparison
    defines them."""

    trial = models.OneToOneField(Trial, on_delete=models.CASCADE, related_name="vote")
    label = models.CharField(max_length=16, choices=Label.choices, blank=True)
    confidence = models.PositiveSmallIntegerField(null=True, blank=True)
    # {axis_id: integer −2…+2}, canonical sign; only the page's active axes.
    axis_scores = models.JSONField(default=dict, blank=True)
    rationale = models.TextField(blank=True)
    # Kind-specific answers: ratings {dimension: int}, evidence note, ...
    answers = models.JSONField(default=dict, blank=True)
    response_ms = models.PositiveIntegerField(null=True, blank=True)
    # Idempotency: the client's key for this submission; a retry with the same key is a no-op.
    idempotency_key = models.CharField(max_length=80, blank=True)
    request_hash = models.CharField(max_length=64, blank=True)
    # Earlier answers replaced with "Undo last answer", oldest first: [{label, confidence,
    # axis_scores, rationale, answers, idempotency_key, request_hash, replaced_at}]. Empty: never
    # revised. The first entry's label is the votes CSV ``first_label`` (docs/protocol.md "Files").
    history = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trial"]
        constraints = [
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=1, confidence__lte=5),
                name="vote_confidence_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.trial_id}={self.label}"


class ProblemKind(models.TextChoices):
    IMAGE = "image", "An image did not load"
    DIFFERENCE = "difference", "I cannot see the difference"
    OTHER = "other", "Something else"


class TrialProblem(models.Model):
    """A rater's "Report a problem" on a trial: for researchers to read, never a vote."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="problems")
    kind = models.CharField(max_length=16, choices=ProblemKind.choices)
    text = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One report of each kind per trial: a second one updates the text (no flooding).
            models.UniqueConstraint(fields=["trial", "kind"], name="trialproblem_unique_kind"),
            models.CheckConstraint(condition=Q(kind__in=["image", "difference", "other"]), name="trialproblem_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.trial_id}:{self.kind}"


class AuditEvent(models.Model):
    """Append-only log of who imported, voided, froze or published what."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=60)
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    target = models.CharField(max_length=300, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.target}"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise ValueError("audit events are append-only")
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise ValueError("audit events are append-only")


class LoginCounter(models.Model):
    """One login-throttle counter, shared by every web process and node (SECURITY.md row 24).

    Used when no shared cache is configured (``ARBITER_LOGIN_COUNTERS = "database"``); written only
    by ``annotation.services.login_counters``, one atomic statement per increment.
    """

    key = models.CharField(max_length=128, primary_key=True)
    attempts = models.IntegerField()
    expires = models.FloatField(db_index=True)  # Unix time: the end of the counter's window

    def __str__(self) -> str:
        return f"{self.key}: {self.attempts}"


class DeploymentCheck(models.Model):
    """A value every node of one deployment must agree on, written by the first node that starts.

    ``secret_key``: an HMAC of a constant under ``SECRET_KEY`` (``annotation.services.deployment``):
    a node started with another key finds a different value and refuses to start.
    """

    name = models.CharField(max_length=60, unique=True)
    value = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class ServeWeights(models.Model):
    """An adaptive study's current pair weights for serve-time choice (annotation.services.serve_time):
    the allocation rule's share per system pair (floor excluded, summing to 1) from the fit of
    ``votes`` valid main votes, refreshed as votes come in."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="serve_weights")
    votes = models.PositiveIntegerField(default=0)
    systems = models.JSONField(default=list)  # external ids, in the fit's order
    system_ids = models.JSONField(default=list)  # their primary keys, in the same order
    rule_shares = models.JSONField(default=list)  # one per pair column (stats.allocation.pair_column)
    floor = models.FloatField()
    rule = models.CharField(max_length=40, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"serve weights of study {self.study_id} ({self.votes} votes)"


class NewStudyRun(models.Model):
    """A study (or a dry run's report) made from an upload in the background (docs/new-study.md
    "Upload page and API"): the upload page stores the ``.zip`` in the media storage and a Celery
    worker, or without a broker the web process's background queue (``annotation.task_queue``),
    renders its HTML pages and imports the study, reporting its progress here; the run's page
    polls it. A dry run keeps its upload and its renders, so the real run started from its result
    uploads and renders nothing again."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    token = models.CharField(max_length=40, unique=True, default=new_token)
    # The upload in the media storage (removed when the run ends) and its name as uploaded.
    archive = models.CharField(max_length=200)
    archive_name = models.CharField(max_length=200)
    # What the form gave: kind, manifest, reference, match, options, comparisons, dry_run.
    parameters = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=200, blank=True)
    done = models.PositiveIntegerField(null=True, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    report = models.TextField(blank=True)  # what the dry run (or the real run) reports
    # Per group (each system, the references) pages rendered and failed, the failures' reasons, and
    # how many pages were rendered by this run and how many kept from its dry run.
    progress = models.JSONField(default=dict, blank=True)
    # The folder holding the run's renders (under ARBITER_NEW_STUDY_RENDERS), kept after a dry run
    # for the real run, removed when the real run ends.
    renders = models.CharField(max_length=300, blank=True)
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The worker making the study holds the run by its claim until lease_until, renewed while it
    # works; a run whose lease ran out (its worker died) is claimed again, at most
    # MAX_ATTEMPTS times in all (annotation.services.new_study_runs).
    claim = models.CharField(max_length=40, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.token

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)
