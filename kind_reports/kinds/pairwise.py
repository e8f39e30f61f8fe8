"""The ``pairwise`` report (docs/study-kinds.md "The kind report"): score–preference agreement of the human
choices with each metric."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from annotation.models import Study
from kind_reports.kinds.base import KindReportSpec, KindSettings
from kind_reports.selectors import scores_frame

if TYPE_CHECKING:
    import pandas as pd

    from stats.rater_agreement import KindAgreementResult

_SWAP = {"A": "B", "B": "A"}


def pairwise_votes_frame(data: pd.DataFrame) -> pd.DataFrame:
    """Data answers → ``score_preference`` votes (canonical labels)."""
    import pandas as pd

    return pd.DataFrame(
        {
            "comparison": data["unit"],
            "brief": data["brief"],
            "item_a": data["item_a"],
            "item_b": data["item_b"],
            "rater": data["rater"],
            "label": data["label"],
            "is_repeat": data["is_repeat"].astype(bool),
        }
    )


class PairwiseReport(KindReportSpec):
    kind = "pairwise"
    analysis_key = "score_preference"
    template = "kind_reports/kinds/pairwise.html"
    unit_fields = {
        "unit": "comparison__external_id",
        "brief": "comparison__page__external_id",
        "item_a": "comparison__candidate_a__external_id",
        "item_b": "comparison__candidate_b__external_id",
    }
    data_columns = ("item_a", "item_b")

    def displayed_answer(self, row: Mapping[str, Any], dimensions: Sequence[str]) -> str:
        """The stored label is canonical: a swapped trial showed the images the other way round."""
        label = str(row["label"])
        return _SWAP.get(label, label) if row["swapped"] else label

    def data_fields(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {"item_a": row["item_a"], "item_b": row["item_b"]}

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
        from stats.rater_agreement import kind_agreement, winner_scale
        from stats.score_preference import score_preference

        analysis = score_preference(
            pairwise_votes_frame(data), scores_frame(study=study), resamples=resamples, seed=seed
        ).to_dict()
        agreement = kind_agreement(
            self.agreement_answers(data), scale=winner_scale(self.kind), resamples=resamples, seed=seed
        )
        return analysis, agreement

    def figure(self, analysis: Mapping[str, Any]) -> str:
        from kind_reports.figures import score_preference_plot  # matplotlib: only when a page is drawn

        return score_preference_plot(analysis)


REPORT = PairwiseReport()
