"""Ratings (SPEC §10): one candidate scored on the study's dimensions.

Votes CSV (SPEC §11): ``item, brief, system, block, rater, position, repeat, attention,
response_ms``, then one ``rating:<dimension>`` column per dimension of ``Study.options["dimensions"]``
in that order, each an integer on the study's scale (``Vote.answers = {"ratings": {...}}``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from annotation.kinds.base import StudyDesign
from annotation.kinds.csv_rows import AttentionVotesCsv, Problems, Unit, parse_int
from annotation.models import Candidate, Study

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
    def votes_csv(self, study: Study) -> RatingVotesCsv:
        return RatingVotesCsv(study)

    def owns_votes_column(self, column: str) -> bool:
        return column.startswith(RATING_PREFIX)


DESIGN = RatingDesign(kind="rating", label="Ratings", unit="candidate", has_reference=False, pairwise=False)
