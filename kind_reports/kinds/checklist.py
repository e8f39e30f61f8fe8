"""The ``checklist`` report (docs/study-kinds.md "The kind report"): each automatic source against the human
majority."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from annotation.models import Study
from kind_reports.kinds.base import KindReportSpec, KindSettings
from kind_reports.selectors import checklist_predicates_frame

if TYPE_CHECKING:
    import pandas as pd

    from stats.rater_agreement import KindAgreementResult


def checklist_answers_frame(data: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        {
            "predicate": data["unit"],
            "rater": data["rater"],
            "answer": data["label"],
            "is_repeat": data["is_repeat"].astype(bool),
        }
    )


class ChecklistReport(KindReportSpec):
    kind = "checklist"
    analysis_key = "checklist"
    template = "kind_reports/kinds/checklist.html"
    unit_fields = {
        "unit": "predicate__external_id",
        "brief": "predicate__candidate__page__external_id",
    }

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
        from judges.selectors import checklist_judge_answers
        from kind_reports.checklist_judges import checklist_judges_section
        from stats.checklist import checklist_agreement
        from stats.rater_agreement import kind_agreement, predicate_scale

        human = checklist_answers_frame(data)
        predicates = checklist_predicates_frame(study=study)
        analysis = checklist_agreement(human, predicates, resamples=resamples, seed=seed, k=settings.k).to_dict()
        # docs/protocol.md "Checklist judges", "Judge reliability against people": one entry per judge.
        analysis["judges"] = checklist_judges_section(
            study=study, predicates=predicates, answers=checklist_judge_answers(study=study), human=human,
            k=settings.k, resamples=resamples, seed=seed,
        )
        agreement = kind_agreement(
            self.agreement_answers(data), scale=predicate_scale(self.kind), resamples=resamples, seed=seed
        )
        return analysis, agreement

    def figure(self, analysis: Mapping[str, Any]) -> str:
        from kind_reports.figures import checklist_plot  # matplotlib: only when a page is drawn

        return checklist_plot(analysis)


REPORT = ChecklistReport()
