"""What one kind's report is: its rows, its statistics, its figure and its template
(docs/study-kinds.md "The kind report").

Each module of this package registers one ``KindReportSpec`` (``REPORT``) for a study kind of
``annotation.kinds``; ``kind_reports.kinds.report_of(study)`` looks it up by
``design_of(study).name``. The report services, figures and templates ask the design instead of
testing the kind: a new kind's report is one new module here and one template.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from annotation.errors import ValidationFailed
from annotation.models import Study

if TYPE_CHECKING:
    import pandas as pd

    from stats.rater_agreement import KindAgreementResult


@dataclass(frozen=True)
class KindSettings:
    """The study options the analyses need, defaults filled in (docs/bundle-kinds.md)."""

    kind: str
    k: int
    dimensions: tuple[str, ...]
    scale: tuple[int, int]
    margin: float


def parse_systems(value: str | Sequence[str] | None) -> tuple[str, str] | None:
    """``"X,Y"`` (or a pair) → ``("X", "Y")``; None stays None."""
    if value is None:
        return None
    parts = (
        [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p).strip() for p in value]
    )
    parts = [p for p in parts if p]
    if not parts:
        return None
    if len(parts) != 2 or parts[0] == parts[1]:
        raise ValidationFailed(
            f"expected two different system ids like alpha,beta, got {','.join(parts)!r}", field="systems"
        )
    return parts[0], parts[1]


class KindReportSpec:
    """The report of one study kind; the defaults are those of a one-answer-per-trial kind.

    ``unit_fields``: the unit's columns of the answered-trial rows (name → ORM path from ``Trial``);
    ``data_columns``: the kind's own columns of the data frame (``data_fields`` fills them);
    ``analysis_key``: the JSON key of the kind's analysis; ``template``: its section of the page.
    """

    kind: ClassVar[str]
    analysis_key: ClassVar[str]
    template: ClassVar[str]
    unit_fields: ClassVar[Mapping[str, str]]
    data_columns: ClassVar[tuple[str, ...]] = ()
    #: The report compares two of the study's systems (``--systems``; the page's systems field).
    compares_systems: ClassVar[bool] = False
    #: The agreement has one entry per rating dimension (the agreement table's first column).
    agreement_by_dimension: ClassVar[bool] = False

    def dimensions(self, declared: tuple[str, ...], rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The dimensions the report reads (the study's declared ones)."""
        return declared

    def displayed_answer(self, row: Mapping[str, Any], dimensions: Sequence[str]) -> str:
        """The answer as the rater gave it on screen (hygiene input; docs/study-kinds.md)."""
        return str(row["label"])

    def attention_passed(self, row: Mapping[str, Any], displayed: str, dimensions: Sequence[str]) -> bool:
        return displayed == str(row["attention_expected"]).strip()

    def data_fields(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The kind's own columns of one data answer (``data_columns``)."""
        return {}

    def reports_without_votes(self, study: Study) -> bool:
        """Whether the report has something to say before any human answer (a checklist's judges)."""
        return False

    def systems(self, study: Study, systems: str | Sequence[str] | None) -> tuple[str, str] | None:
        """The two systems compared; a kind that compares none refuses the argument."""
        if parse_systems(systems) is not None:
            raise ValidationFailed("only a rating study compares two systems", field="systems")
        return None

    def agreement_answers(self, data: pd.DataFrame) -> pd.DataFrame:
        """The ``kind_agreement`` input: ``unit, rater, answer, brief, is_repeat``."""
        import pandas as pd

        return pd.DataFrame(
            {
                "unit": data["unit"],
                "rater": data["rater"],
                "answer": data["label"],
                "brief": data["brief"],
                "is_repeat": data["is_repeat"].astype(bool),
            }
        )

    def analyse(
        self,
        *,
        study: Study,
        data: pd.DataFrame,
        settings: KindSettings,
        systems: tuple[str, str] | None,
        resamples: int,
        seed: int,
    ) -> tuple[dict[str, Any], KindAgreementResult]:
        """The kind's analysis (plain dict) and the inter-rater agreement on the kept data answers."""
        raise NotImplementedError

    def figure(self, analysis: Mapping[str, Any]) -> str:
        """The analysis figure as an SVG data URI (``kind_reports.figures``)."""
        raise NotImplementedError


__all__ = ["KindReportSpec", "KindSettings", "parse_systems"]
