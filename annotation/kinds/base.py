"""What a study kind is: one ``StudyDesign`` per kind, looked up with ``design_of(study)``.

Every difference between the kinds (the unit a rater judges, the image slots a trial shows, the trial
template, how an answer is cleaned and canonicalized, the votes-CSV columns, the bundle section, what
``new_study`` makes of a researcher's files, the schedule units) belongs to the kind's design, in its
own module of this package. Code elsewhere asks the design instead of testing ``study.kind``: adding a
kind is one new module here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from annotation.kinds.answer import PAIRWISE_VERDICTS, VoteAnswer, pairwise_answer_clean
from annotation.kinds.judging import NOT_JUDGED, JudgeRequestPlan, JudgeUnitContext

if TYPE_CHECKING:
    from django.db.models import Model

    from annotation.kinds.csv_rows import VotesCsvFormat
    from annotation.models import Study


@dataclass(frozen=True)
class ScheduleUnit:
    """One schedulable unit: the object a trial shows and the section it belongs to (its page or image)."""

    obj: Model
    section: int



@dataclass(frozen=True)
class ComprehensionQuestion:
    """The question a participant answers before the first trial (annotation.services.comprehension)."""

    question: str
    choices: tuple[tuple[str, str], ...]
    answer: str


# The study.json keys every kind other than the reference's requires (annotation.services.bundles.questionnaire_format).
BUNDLE_COMMON_REQUIRED = ("slug", "title", "kind", "instructions_md", "systems", "items")

# How an attention check's expected answer is named on the page.
ATTENTION_NAMES = {"A": "A", "B": "B", "TIE": "Tie", "YES": "Yes", "NO": "No", "UNCLEAR": "Unclear"}


@dataclass(frozen=True)
class StudyDesign:
    """The fixed facts of one study kind (docs/protocol.md "The study model",
    docs/study-kinds.md "Where a kind lives"); a kind's module subclasses it."""

    kind: str  # the ``Study.kind`` value (``annotation.models.StudyKind``)
    label: str
    unit: str  # what one trial asks about: "comparison", "predicate" or "candidate"
    has_reference: bool  # a reference page is shown beside the candidates
    pairwise: bool  # a trial shows two candidates and asks for a winner

    # ---- the rater's trial page (annotation.services.answers, annotation.rater)
    image_slots: ClassVar[tuple[str, ...]] = ("item",)  # the trial's image slots, as the page names them
    trial_unit_related: ClassVar[tuple[str, ...]] = ()  # what a trial page joins of its unit
    verdict_choices: ClassVar[tuple[tuple[str, str, str], ...]] = PAIRWISE_VERDICTS  # (value, text, key)
    verdict_prompt: ClassVar[str] = "Choose a verdict: A, B, Tie or Cannot judge."
    rationale_field: ClassVar[str] = "rationale"  # the form field of the free-text note
    has_ratings: ClassVar[bool] = False  # an answer rates the study's dimensions
    # a trial scores the page's active axes (docs/protocol.md "The study model")
    has_axes: ClassVar[bool] = False
    # ---- units, progress and rater quality
    unit_field: ClassVar[str] = ""  # the Trial / BlockItem foreign key naming the unit
    valid_labels: ClassVar[tuple[str, ...] | None] = ("A", "B", "TIE")  # a valid answer's labels (None: any)
    abstain_label: ClassVar[str] = "CANNOT_JUDGE"  # the label that declines to answer
    # instructed-response checks are planned (docs/study-kinds.md "Running the other study kinds")
    has_attention_checks: ClassVar[bool] = True
    asks_comprehension: ClassVar[bool] = True  # a participant answers a comprehension question first
    # ---- the schedule (annotation.services.scheduling)
    unit_plural: ClassVar[str] = "comparisons"  # what a study's blocks are made of, for messages
    # Williams-square section order (docs/study-kinds.md "Scheduling"), else
    # docs/protocol.md "Planning the human study"'s shuffle
    counterbalanced: ClassVar[bool] = True
    default_raters_hint: ClassVar[str] = "3"  # the default rater target per block, as the schedule form says it
    # ---- the bundle section (study.json keys of the kind; annotation.services.bundles.questionnaire_format)
    bundle_required: ClassVar[tuple[str, ...]] = ()
    bundle_optional: ClassVar[tuple[str, ...]] = ()
    bundle_options: ClassVar[tuple[str, ...]] = ()  # option keys, in ``options`` or at the top level
    bundle_option_defaults: ClassVar[Mapping[str, Any]] = {}  # what an export writes when unset, in order
    # ---- a study from the researcher's files (annotation.services.new_study, docs/new-study.md)
    # the study.json keys new_study makes from the files (an option may not give them)
    new_study_makes: ClassVar[tuple[str, ...]] = ("kind", "systems", "briefs", "items")
    takes_predicates: ClassVar[bool] = False  # a predicates file lists the questions asked of each item
    # A rendered HTML item keeps its page's text and element boxes (``CandidateBlocks``), for the local
    # judge (docs/protocol.md "The built-in local judge") and the disagreement lens's "more text"
    # (docs/protocol.md "The disagreement lens"); researchers only, never sent to a rater or a judge.
    keeps_page_text: ClassVar[bool] = False
    # ---- the research pages
    abstain_name: ClassVar[str] = "Cannot judge"  # the abstain label's column title ("" : the kind never abstains)
    # what the kind's report (docs/study-kinds.md "The kind report") shows first
    analysis_summary: ClassVar[str] = ""

    @property
    def name(self) -> str:
        return self.kind

    @property
    def trial_template(self) -> str:
        """The kind's question on the trial page (its images and answer form), included by the trial state (templates/annotation/rater/_state.html)."""
        return f"annotation/rater/trial_{self.kind}.html"

    def attention_instruction(self, expected: str) -> str:
        """The instructed-response line of an attention check (docs/study-kinds.md "Scheduling"), in the
        page's own words."""
        return f"Attention check: for this one, please answer “{ATTENTION_NAMES.get(expected, expected)}”."

    def comprehension_question(self, study: Study) -> ComprehensionQuestion:
        """The study's comprehension question (annotation.services.comprehension)."""
        return ComprehensionQuestion(
            question="You can see both images clearly and they answer the brief equally well. What do you answer?",
            choices=(("A", "A"), ("B", "B"), ("TIE", "Tie"), ("CANNOT_JUDGE", "Cannot judge")),
            answer="TIE",
        )

    def schedule_units(self, study: Study) -> list[ScheduleUnit]:
        """The study's schedulable units in file order, with their section."""
        raise NotImplementedError

    def default_rater_targets(self, study: Study, blocks: int) -> list[int]:
        """Rater targets per block when none are given."""
        return [3] * blocks

    def attention_answers(self, study: Study) -> tuple[str, ...]:
        """The answers an attention check may ask for (as displayed)."""
        return ("A", "B", "TIE")

    def trial_view_fields(self, study: Study) -> dict[str, Any]:
        """The kind's own fields of a ``TrialView`` (a rating study's dimensions and scale)."""
        return {}

    def answer_clean(
        self,
        *,
        study: Study,
        active_axes: list[str],
        verdict: object,
        confidence: object,
        axes: Mapping[str, object],
        ratings: Mapping[str, object] | None,
        rationale: object,
    ) -> VoteAnswer:
        """Validate a posted answer (display orientation); ``ValidationFailed`` names the field.

        The pairwise kinds: verdict, confidence and the active axes' scores."""
        return pairwise_answer_clean(
            active_axes=active_axes, verdict=verdict, confidence=confidence, axes=axes, rationale=rationale
        )

    # ---- judges (docs/protocol.md "Judge requests by study kind"; annotation.kinds.judging)

    def judge_plan(self, study: Study) -> JudgeRequestPlan:
        """The judge request this kind builds for ``study`` (its refusal when it builds none)."""
        return NOT_JUDGED

    def judge_unit_ids(self, study: Study) -> list[int]:
        """The candidates a ``candidate``-unit plan calls a judge on, in brief then system order
        (a comparison-unit plan calls one on each of the study's comparisons)."""
        from annotation.models import Candidate

        return list(
            Candidate.objects.filter(page__study=study, rendered=True, image__isnull=False)
            .order_by("page__position", "page__external_id", "system__position", "system__external_id")
            .values_list("pk", flat=True)
        )

    def judge_unit_context(self, study: Study, unit: Model) -> JudgeUnitContext:
        """The prompt blocks of one unit (a comparison or a candidate) and the ids its reply answers,
        beyond the verdict's ``ACTIVE_AXES`` (which ``judges`` adds)."""
        return JudgeUnitContext()

    # ---- votes CSV (docs/protocol.md "Files", docs/study-kinds.md "Votes CSV";
    # annotation.services.votes_csv)

    def votes_csv(self, study: Study) -> VotesCsvFormat:
        """The study's votes CSV: its columns, how a row parses, what an export writes."""
        raise NotImplementedError

    def owns_votes_column(self, column: str) -> bool:
        """Whether ``column`` is one of this kind's votes-CSV columns (for a header of another kind)."""
        raise NotImplementedError
