"""The ``rating`` report (docs/study-kinds.md "The kind report"): two systems' ratings per dimension, paired
on the briefs, and equivalence.

``rating`` compares two systems, ``system_a − system_b``: the ``systems`` argument, else the first
two systems of the study by position. The dimensions reported are the study's dimensions (in their
order) that have at least one kept rating; a study without declared dimensions reports those answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from annotation.errors import ValidationFailed
from annotation.models import Study
from kind_reports.kinds.base import KindReportSpec, KindSettings, parse_systems
from kind_reports.selectors import system_ids

if TYPE_CHECKING:
    import pandas as pd

    from stats.rater_agreement import KindAgreementResult


def _ratings_of(answers: Any) -> dict[str, Any]:
    ratings = answers.get("ratings") if isinstance(answers, dict) else None
    return ratings if isinstance(ratings, dict) else {}


def _int_or_none(text: str) -> int | None:
    try:
        return int(text.strip())
    except (TypeError, ValueError):
        return None


def rating_systems(study: Study, systems: str | Sequence[str] | None) -> tuple[str, str]:
    """The two systems a rating report compares; unknown ids are refused."""
    known = system_ids(study=study)
    chosen = parse_systems(systems)
    if chosen is None:
        if len(known) < 2:
            raise ValidationFailed(
                f"study '{study.slug}' has {len(known)} system(s); a rating report compares two",
                field="systems",
            )
        return known[0], known[1]
    for s in chosen:
        if s not in known:
            raise ValidationFailed(
                f"unknown system {s!r}; the study's systems are {', '.join(known)}", field="systems"
            )
    return chosen


def ratings_frame(data: pd.DataFrame, dimensions: Sequence[str]) -> pd.DataFrame:
    """Data answers → one row per rating (``brief, system, rater, dimension, rating, item, is_repeat``)."""
    import pandas as pd

    rows = [
        {
            "brief": r.brief,
            "system": r.system,
            "rater": r.rater,
            "dimension": d,
            "rating": r.ratings[d],
            "item": r.unit,
            "is_repeat": bool(r.is_repeat),
            "trial_id": r.trial_id,
        }
        for r in data.itertuples(index=False)
        for d in dimensions
        if r.ratings.get(d) is not None
    ]
    return pd.DataFrame(
        rows, columns=["brief", "system", "rater", "dimension", "rating", "item", "is_repeat", "trial_id"]
    )


class RatingReport(KindReportSpec):
    kind = "rating"
    analysis_key = "rating"
    template = "kind_reports/kinds/rating.html"
    unit_fields = {
        "unit": "candidate__external_id",
        "brief": "candidate__page__external_id",
        "system": "candidate__system__external_id",
    }
    data_columns = ("system", "ratings")
    compares_systems = True
    agreement_by_dimension = True

    def dimensions(self, declared: tuple[str, ...], rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        if declared:
            return declared
        return tuple(sorted({d for r in rows for d in _ratings_of(r["answers"])}))

    def displayed_answer(self, row: Mapping[str, Any], dimensions: Sequence[str]) -> str:
        ratings = _ratings_of(row["answers"])
        return "|".join("" if ratings.get(d) is None else str(ratings.get(d)) for d in dimensions)

    def attention_passed(self, row: Mapping[str, Any], displayed: str, dimensions: Sequence[str]) -> bool:
        """Passed when every dimension's rating equals the expected one."""
        value = _int_or_none(str(row["attention_expected"]).strip())
        ratings = _ratings_of(row["answers"])
        return value is not None and bool(dimensions) and all(ratings.get(d) == value for d in dimensions)

    def data_fields(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {"system": row["system"], "ratings": _ratings_of(row["answers"])}

    def systems(self, study: Study, systems: str | Sequence[str] | None) -> tuple[str, str] | None:
        return rating_systems(study, systems)

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
        from stats.rater_agreement import kind_agreement, rating_scale
        from stats.rating import rating_comparison

        assert systems is not None
        ratings = ratings_frame(data, settings.dimensions)
        for system in systems:
            if not (ratings["system"] == system).any():
                raise ValidationFailed(
                    f"study '{study.slug}': no kept rating of system {system!r} (not rated yet, or every rating "
                    "of it was excluded); choose two rated systems",
                    field="systems",
                )
        rated = set(ratings["dimension"])
        analysis = rating_comparison(
            ratings,
            system_a=systems[0],
            system_b=systems[1],
            resamples=resamples,
            seed=seed,
            margin=settings.margin,
            scale=settings.scale,
            dimensions=[d for d in settings.dimensions if d in rated],
        ).to_dict()
        analysis["dimensions_declared"] = list(settings.dimensions)
        agreement = kind_agreement(
            self.agreement_answers_of_ratings(ratings),
            scale=rating_scale(settings.scale, self.kind),
            resamples=resamples,
            seed=seed,
        )
        return analysis, agreement

    @staticmethod
    def agreement_answers_of_ratings(ratings: pd.DataFrame) -> pd.DataFrame:
        """The ``kind_agreement`` input of ratings: one answer per item × dimension."""
        import pandas as pd

        return pd.DataFrame(
            {
                "unit": ratings["item"],
                "rater": ratings["rater"],
                "answer": ratings["rating"],
                "brief": ratings["brief"],
                "is_repeat": ratings["is_repeat"].astype(bool),
                "dimension": ratings["dimension"],
            }
        )

    def figure(self, analysis: Mapping[str, Any]) -> str:
        from kind_reports.figures import rating_equivalence_plot  # matplotlib: only when a page is drawn

        return rating_equivalence_plot(analysis)


REPORT = RatingReport()
