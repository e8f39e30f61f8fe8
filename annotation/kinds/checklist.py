"""Checklist predicates (docs/study-kinds.md "Units"): one candidate, one yes/no predicate per trial.

Votes CSV (docs/study-kinds.md "Votes CSV"): ``predicate, item, brief, system, block, rater, position, repeat,
attention, label, evidence, response_ms``; label ``YES``/``NO``/``UNCLEAR``, a non-blank evidence note (stored
in ``Vote.rationale``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from annotation.errors import ValidationFailed
from annotation.kinds.answer import VoteAnswer, rationale_clean
from annotation.kinds.base import BUNDLE_COMMON_REQUIRED, ComprehensionQuestion, ScheduleUnit, StudyDesign
from annotation.kinds.csv_rows import AttentionVotesCsv, Problems, Unit
from annotation.kinds.judging import (
    CHECKLIST_PROMPT,
    ONE_ORDER,
    REPLY_CHECKLIST,
    UNIT_CANDIDATE,
    JudgeRequestPlan,
    JudgeUnitContext,
)
from annotation.models import Candidate, ChecklistAnswer, Predicate, Study

if TYPE_CHECKING:
    from django.db.models import Model

CHECKLIST_COLUMNS: tuple[str, ...] = (
    "predicate",
    "item",
    "brief",
    "system",
    "block",
    "rater",
    "position",
    "repeat",
    "attention",
    "label",
    "evidence",
    "response_ms",
)
CHECKLIST_LABELS: tuple[str, ...] = (ChecklistAnswer.YES, ChecklistAnswer.NO, ChecklistAnswer.UNCLEAR)
CHECKLIST_VERDICTS = (
    (ChecklistAnswer.YES, "Yes", "y"), (ChecklistAnswer.NO, "No", "n"), (ChecklistAnswer.UNCLEAR, "Unclear", "u"),
)


@dataclass
class ChecklistVotesCsv(AttentionVotesCsv):
    unit_column: ClassVar[str] = "predicate"
    unit_field: ClassVar[str] = "predicate"
    identity_paths: ClassVar[dict[str, str]] = {
        "predicate": "trial__predicate__external_id",
        "item": "trial__predicate__candidate__external_id",
        "brief": "trial__predicate__candidate__page__external_id",
        "system": "trial__predicate__candidate__system__external_id",
    }

    def columns(self) -> list[str]:
        return list(CHECKLIST_COLUMNS)

    def units(self) -> dict[str, Unit]:
        return {
            p.external_id: Unit(
                p.pk,
                p.external_id,
                {
                    "item": p.candidate.external_id,
                    "brief": p.candidate.page.external_id,
                    "system": p.candidate.system.external_id,
                },
            )
            for p in Predicate.objects.filter(study=self.study).select_related("candidate__page", "candidate__system")
        }

    def attention_answers(self) -> tuple[str, ...]:
        return CHECKLIST_LABELS

    def parse_answer(
        self, *, value: dict[str, str], raw: dict[str, str], line: int, problems: Problems
    ) -> dict[str, Any]:
        label = value["label"]
        if label not in CHECKLIST_LABELS:
            problems.add(line, "label", f"expected one of {', '.join(CHECKLIST_LABELS)}, got {label!r}")
        rationale = raw["evidence"]
        if not rationale.strip():
            problems.add(line, "evidence", "empty; a checklist answer needs an evidence note")
        return {"label": label, "confidence": None, "rationale": rationale, "answers": {}}

    def export_answer(self, v: dict[str, Any]) -> None:
        v["evidence"] = v["rationale"]


@dataclass(frozen=True)
class ChecklistDesign(StudyDesign):
    trial_unit_related = ("predicate__candidate__page",)
    verdict_choices = CHECKLIST_VERDICTS
    verdict_prompt = "Choose an answer: Yes, No or Unclear."
    rationale_field = "evidence"
    unit_field = "predicate"
    valid_labels = (ChecklistAnswer.YES, ChecklistAnswer.NO)
    abstain_label = ChecklistAnswer.UNCLEAR
    unit_plural = "predicates"
    default_raters_hint = "k"
    abstain_name = "Unclear"
    analysis_summary = "human majority vs automatic answers"
    bundle_required = (*BUNDLE_COMMON_REQUIRED, "predicates")
    bundle_options = ("k", "preference_study")
    bundle_optional = ("briefs", "options", *bundle_options, "judge_prompt", "settings", "crowd")
    bundle_option_defaults = {"k": 3}
    takes_predicates = True
    keeps_page_text = True

    def schedule_units(self, study: Study) -> list[ScheduleUnit]:
        predicates = (
            Predicate.objects.filter(study=study, candidate__image__isnull=False)
            .select_related("candidate")
            .order_by("position", "external_id")
        )
        return [ScheduleUnit(p, p.candidate_id) for p in predicates]

    def default_rater_targets(self, study: Study, blocks: int) -> list[int]:
        return [int((study.options or {}).get("k", 3))] * blocks  # the study's k

    def attention_answers(self, study: Study) -> tuple[str, ...]:
        return CHECKLIST_LABELS

    def comprehension_question(self, study: Study) -> ComprehensionQuestion:
        return ComprehensionQuestion(
            question="The image does not show enough to tell whether the answer is yes or no. What do you answer?",
            choices=(("YES", "Yes"), ("NO", "No"), ("UNCLEAR", "Unclear")),
            answer="UNCLEAR",
        )

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
        """A label and a non-blank evidence note (docs/study-kinds.md "Running the other study kinds")."""
        text = rationale_clean(rationale, field="evidence")
        if verdict not in CHECKLIST_LABELS:
            raise ValidationFailed("choose Yes, No or Unclear", field="verdict")
        if not text:
            raise ValidationFailed("note the evidence you see for your answer", field="evidence")
        return VoteAnswer(verdict=str(verdict), confidence=None, axes={}, rationale=text)

    def votes_csv(self, study: Study) -> ChecklistVotesCsv:
        return ChecklistVotesCsv(study)

    def judge_plan(self, study: Study) -> JudgeRequestPlan:
        """One rendering, its questions, a yes / no / unclear answer with evidence per question
        (docs/protocol.md "Checklist judges"; AesCode §E.1): one call per rendering (decision 0076)."""
        return JudgeRequestPlan(
            unit=UNIT_CANDIDATE,
            slots=(("IMAGE", "item"),),
            reply=REPLY_CHECKLIST,
            orders=ONE_ORDER,
            default_prompt=CHECKLIST_PROMPT,
        )

    def judge_unit_ids(self, study: Study) -> list[int]:
        """The renderings that have questions (a failed render has no image and is not asked)."""
        return list(
            Candidate.objects.filter(page__study=study, image__isnull=False, predicates__isnull=False)
            .distinct()
            .order_by("page__position", "page__external_id", "system__position", "system__external_id")
            .values_list("pk", flat=True)
        )

    def judge_unit_context(self, study: Study, unit: Model) -> JudgeUnitContext:
        """The rendering's questions in file order, sent as Q1, Q2, … (a predicate's id may name its
        system; the judge never sees it)."""
        assert isinstance(unit, Candidate)
        rows = list(
            Predicate.objects.filter(candidate=unit).order_by("position", "external_id").values_list("pk", "question")
        )
        ids = tuple(f"Q{i}" for i in range(1, len(rows) + 1))
        return JudgeUnitContext(
            blocks={
                "BRIEF": unit.page.text.strip() or "(no brief text)",
                "QUESTIONS": [{"id": qid, "question": question} for qid, (_, question) in zip(ids, rows, strict=True)],
            },
            ids=ids,
            keys=tuple(pk for pk, _ in rows),
        )

    def owns_votes_column(self, column: str) -> bool:
        return column in CHECKLIST_COLUMNS


DESIGN = ChecklistDesign(
    kind="checklist", label="Checklist predicates", unit="predicate", has_reference=False, pairwise=False
)
