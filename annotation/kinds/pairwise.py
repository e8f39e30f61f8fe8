"""Pairwise without a reference (docs/study-kinds.md "Units"): two candidates, a winner, optional score
dimensions.

Votes CSV (docs/study-kinds.md "Votes CSV"): ``comparison, brief, item_a, item_b, system_a, system_b, block,
rater, position, swapped, repeat, attention, label, confidence, rationale, response_ms``; the label is
canonical (``A``/``B``/``TIE``/``CANNOT_JUDGE``), confidence 1–5 (may be empty for ``CANNOT_JUDGE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from annotation.kinds.base import BUNDLE_COMMON_REQUIRED, ScheduleUnit, StudyDesign
from annotation.kinds.csv_rows import AttentionVotesCsv, Problems, Unit, parse_pairwise_answer
from annotation.kinds.judging import (
    BOTH_ORDERS,
    PAIRWISE_PROMPT,
    REPLY_VERDICT,
    UNIT_COMPARISON,
    JudgeRequestPlan,
    JudgeUnitContext,
)
from annotation.models import Comparison, ComparisonSet, Label, Study

if TYPE_CHECKING:
    from django.db.models import Model

PAIRWISE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "brief",
    "item_a",
    "item_b",
    "system_a",
    "system_b",
    "block",
    "rater",
    "position",
    "swapped",
    "repeat",
    "attention",
    "label",
    "confidence",
    "rationale",
    "response_ms",
)
# The answers an attention check may ask for, as displayed (docs/study-kinds.md).
PAIRWISE_ATTENTION: tuple[str, ...] = (Label.A, Label.B, Label.TIE)


@dataclass
class PairwiseVotesCsv(AttentionVotesCsv):
    unit_column: ClassVar[str] = "comparison"
    unit_field: ClassVar[str] = "comparison"
    has_swapped: ClassVar[bool] = True
    identity_paths: ClassVar[dict[str, str]] = {
        "comparison": "trial__comparison__external_id",
        "brief": "trial__comparison__page__external_id",
        "item_a": "trial__comparison__candidate_a__external_id",
        "item_b": "trial__comparison__candidate_b__external_id",
        "system_a": "trial__comparison__candidate_a__system__external_id",
        "system_b": "trial__comparison__candidate_b__system__external_id",
    }

    def columns(self) -> list[str]:
        return list(PAIRWISE_COLUMNS)

    def units(self) -> dict[str, Unit]:
        return {
            c.external_id: Unit(
                c.pk,
                c.external_id,
                {
                    "brief": c.page.external_id,
                    "item_a": c.candidate_a.external_id,
                    "item_b": c.candidate_b.external_id,
                    "system_a": c.candidate_a.system.external_id,
                    "system_b": c.candidate_b.system.external_id,
                },
            )
            for c in Comparison.objects.filter(study=self.study).select_related(
                "page", "candidate_a__system", "candidate_b__system"
            )
        }

    def attention_answers(self) -> tuple[str, ...]:
        return PAIRWISE_ATTENTION

    def parse_answer(
        self, *, value: dict[str, str], raw: dict[str, str], line: int, problems: Problems
    ) -> dict[str, Any]:
        label, confidence = parse_pairwise_answer(value=value, line=line, problems=problems)
        return {"label": label, "confidence": confidence, "rationale": raw["rationale"], "answers": {}}


@dataclass(frozen=True)
class PairwiseDesign(StudyDesign):
    image_slots = ("left", "right")
    trial_unit_related = ("comparison__page",)
    unit_field = "comparison"
    analysis_summary = "score–preference agreement by score gap"
    bundle_required = (*BUNDLE_COMMON_REQUIRED, "briefs")  # the brief is the task both images answer
    bundle_optional = ("comparisons", "judge_prompt", "settings", "crowd")
    keeps_page_text = True  # "more text" of the disagreement lens counts characters

    def schedule_units(self, study: Study) -> list[ScheduleUnit]:
        comparisons = (
            Comparison.objects.filter(
                study=study, set=ComparisonSet.HUMAN,
                candidate_a__image__isnull=False, candidate_b__image__isnull=False,
            )
            .select_related("page")
            .order_by("page__position", "page__external_id", "id")
        )
        return [ScheduleUnit(c, c.page_id) for c in comparisons]

    def votes_csv(self, study: Study) -> PairwiseVotesCsv:
        return PairwiseVotesCsv(study)

    def judge_plan(self, study: Study) -> JudgeRequestPlan:
        """CANDIDATE A and CANDIDATE B, no reference, the brief in the prompt, the verdict in both orders
        (docs/protocol.md "Judge requests by study kind")."""
        return JudgeRequestPlan(
            unit=UNIT_COMPARISON,
            slots=(("CANDIDATE A", "first"), ("CANDIDATE B", "second")),
            reply=REPLY_VERDICT,
            orders=BOTH_ORDERS,
            default_prompt=PAIRWISE_PROMPT,
        )

    def judge_unit_context(self, study: Study, unit: Model) -> JudgeUnitContext:
        assert isinstance(unit, Comparison)
        return JudgeUnitContext(blocks={"BRIEF": unit.page.text.strip() or "(no brief text)"})

    def owns_votes_column(self, column: str) -> bool:
        return column in PAIRWISE_COLUMNS


DESIGN = PairwiseDesign(
    kind="pairwise", label="Pairwise without reference", unit="comparison", has_reference=False, pairwise=True
)
