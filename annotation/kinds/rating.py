"""Ratings (docs/study-kinds.md "Units"): one candidate scored on the study's dimensions.

Votes CSV (docs/study-kinds.md "Votes CSV"): ``item, brief, system, block, rater, position, repeat, attention,
response_ms``, then one ``rating:<dimension>`` column per dimension of ``Study.options["dimensions"]``
in that order, each an integer on the study's scale (``Vote.answers = {"ratings": {...}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from annotation.errors import ValidationFailed
from annotation.kinds.answer import VoteAnswer, int_field, rationale_clean
from annotation.kinds.base import BUNDLE_COMMON_REQUIRED, ComprehensionQuestion, ScheduleUnit, StudyDesign
from annotation.kinds.csv_rows import AttentionVotesCsv, Problems, Unit, parse_int
from annotation.kinds.judging import (
    ONE_ORDER,
    RATING_PROMPT,
    REPLY_RATINGS,
    UNIT_CANDIDATE,
    JudgeRequestPlan,
    JudgeUnitContext,
)
from annotation.models import Candidate, Study

if TYPE_CHECKING:
    from django.db.models import Model

RATING_BASE_COLUMNS: tuple[str, ...] = (
    "item",
    "brief",
    "system",
    "block",
    "rater",
    "position",
    "repeat",
    "attention",
    "response_ms",
)
RATING_PREFIX = "rating:"
_DEFAULT_SCALE = (1, 5)


def rating_dimensions(study: Study) -> list[str]:
    return [str(d) for d in (study.options or {}).get("dimensions") or []]


def rating_scale(study: Study) -> tuple[int, int]:
    scale = (study.options or {}).get("scale") or _DEFAULT_SCALE
    return int(scale[0]), int(scale[1])


def rating_attention_answers(study: Study) -> tuple[str, ...]:
    """An attention check asks for one value of the scale."""
    low, high = rating_scale(study)
    return tuple(str(v) for v in range(low, high + 1))


@dataclass
class RatingVotesCsv(AttentionVotesCsv):
    unit_column: ClassVar[str] = "item"
    unit_field: ClassVar[str] = "candidate"
    identity_paths: ClassVar[dict[str, str]] = {
        "item": "trial__candidate__external_id",
        "brief": "trial__candidate__page__external_id",
        "system": "trial__candidate__system__external_id",
    }

    def columns(self) -> list[str]:
        return [*RATING_BASE_COLUMNS, *(RATING_PREFIX + d for d in rating_dimensions(self.study))]

    def units(self) -> dict[str, Unit]:
        return {
            c.external_id: Unit(c.pk, c.external_id, {"brief": c.page.external_id, "system": c.system.external_id})
            for c in Candidate.objects.filter(page__study=self.study)
            .exclude(external_id="")
            .select_related("page", "system")
        }

    def attention_answers(self) -> tuple[str, ...]:
        return rating_attention_answers(self.study)

    def attention_cell(self, cell: str) -> str:
        number = parse_int(cell)
        return cell if number is None else str(number)  # "+3" / "03" → "3", as the scheduler writes it

    def attention_expected(self) -> str:
        low, high = rating_scale(self.study)
        return f"an integer {low}–{high}"

    def unknown_own_column(self, col: str) -> str | None:
        if not col.startswith(RATING_PREFIX):
            return None
        dimensions = rating_dimensions(self.study)
        return f"unknown rating column (the study's dimensions: {', '.join(dimensions) or 'none'})"

    def parse_answer(
        self, *, value: dict[str, str], raw: dict[str, str], line: int, problems: Problems
    ) -> dict[str, Any]:
        low, high = rating_scale(self.study)
        ratings: dict[str, int] = {}
        for dimension in rating_dimensions(self.study):
            col = RATING_PREFIX + dimension
            score = parse_int(value[col])
            if score is None or not low <= score <= high:
                got = "empty" if value[col] == "" else repr(value[col])
                problems.add(line, col, f"expected an integer {low}–{high} (the study's scale), got {got}")
            else:
                ratings[dimension] = score
        return {"label": "", "confidence": None, "rationale": "", "answers": {"ratings": ratings}}

    def export_answer(self, v: dict[str, Any]) -> None:
        ratings = (v["answers"] or {}).get("ratings") or {}
        for dimension in rating_dimensions(self.study):
            score = ratings.get(dimension)
            v[RATING_PREFIX + dimension] = "" if score is None else int(score)


@dataclass(frozen=True)
class RatingDesign(StudyDesign):
    trial_unit_related = ("candidate__page",)
    has_ratings = True
    unit_field = "candidate"
    valid_labels = None
    unit_plural = "items"
    abstain_name = ""
    analysis_summary = "paired differences and equivalence"
    bundle_required = BUNDLE_COMMON_REQUIRED
    bundle_options = ("dimensions", "scale", "margin")
    bundle_optional = ("briefs", "options", *bundle_options, "judge_prompt", "settings", "crowd")
    bundle_option_defaults = {"scale": list(_DEFAULT_SCALE), "dimensions": [], "margin": 0.5}

    def schedule_units(self, study: Study) -> list[ScheduleUnit]:
        items = (
            Candidate.objects.filter(page__study=study, rendered=True, image__isnull=False)
            .order_by("page__position", "page__external_id", "system__position", "system__external_id")
        )
        return [ScheduleUnit(c, c.page_id) for c in items]

    def attention_answers(self, study: Study) -> tuple[str, ...]:
        return rating_attention_answers(study)

    def comprehension_question(self, study: Study) -> ComprehensionQuestion:
        low, high = rating_scale(study)
        middle = (low + high) // 2
        values = sorted({low, middle, high})
        return ComprehensionQuestion(
            question=f"Ratings go from {low} to {high}. Which number do you give an image that is excellent "
                     "on a dimension?",
            choices=tuple((str(v), str(v)) for v in values),
            answer=str(high),
        )

    def attention_instruction(self, expected: str) -> str:
        return f"Attention check: for this image, please choose {expected} on every dimension."

    def trial_view_fields(self, study: Study) -> dict[str, Any]:
        low, high = rating_scale(study)
        return {"dimensions": tuple((study.options or {}).get("dimensions", ())), "scale": tuple(range(low, high + 1))}

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
        """Every dimension of the study rated on its scale
        (docs/study-kinds.md "Running the other study kinds")."""
        rationale_clean(rationale, field="evidence")
        low, high = rating_scale(study)
        allowed = tuple(range(low, high + 1))
        given = dict(ratings or {})
        dimensions = list((study.options or {}).get("dimensions", []))
        unknown = sorted(set(given) - set(dimensions))
        if unknown:
            raise ValidationFailed(f"'{unknown[0]}' is not a dimension of this study", field="ratings")
        scores: dict[str, int] = {}
        for dimension in dimensions:
            if given.get(dimension) in (None, ""):
                raise ValidationFailed(f"rate every dimension ({low} … {high})", field=f"rating:{dimension}")
            scores[dimension] = int_field(given[dimension], field=f"rating:{dimension}", allowed=allowed)
        return VoteAnswer(verdict="", confidence=None, axes={}, rationale="", ratings=scores)

    def votes_csv(self, study: Study) -> RatingVotesCsv:
        return RatingVotesCsv(study)

    def judge_plan(self, study: Study) -> JudgeRequestPlan:
        """One rendering rated on the study's dimensions and scale, where the study has dimensions
        (docs/protocol.md "Judge requests by study kind")."""
        plan = JudgeRequestPlan(
            unit=UNIT_CANDIDATE,
            slots=(("IMAGE", "item"),),
            reply=REPLY_RATINGS,
            orders=ONE_ORDER,
            default_prompt=RATING_PROMPT,
        )
        if not rating_dimensions(study):
            from dataclasses import replace

            return replace(plan, refusal="the study has no rating dimensions (options.dimensions) for a judge to rate")
        return plan

    def judge_unit_context(self, study: Study, unit: Model) -> JudgeUnitContext:
        assert isinstance(unit, Candidate)
        low, high = rating_scale(study)
        dimensions = tuple(rating_dimensions(study))
        return JudgeUnitContext(
            blocks={
                "BRIEF": unit.page.text.strip() or "(no brief text)",
                "DIMENSIONS": list(dimensions),
                "SCALE": f"integers {low} to {high}",
            },
            ids=dimensions,
            scale=(low, high),
        )

    def owns_votes_column(self, column: str) -> bool:
        return column.startswith(RATING_PREFIX)


DESIGN = RatingDesign(kind="rating", label="Ratings", unit="candidate", has_reference=False, pairwise=False)
