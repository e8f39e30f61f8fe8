"""Arbiter's own objective scores beside a leaderboard (docs/protocol.md "Objective scores beside the
rankings"): per system TEDS, TEDS-S, D_text, S_layout and S_obj from the study's ground truth and
its candidates' renders, with page-block bootstrap intervals, and their rank correlation with the
leaderboard's ranking (Spearman ρ and Kendall τ of S_obj against the fitted scores, as the
imported objective CSV's ``objective_vs_subjective`` is computed).

The imported CSV (``leaderboard --objective``) stays as it was, for outside evaluators; this
section is ``objective_scores`` and is present only for a study with ground truth.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from annotation.errors import ArbiterError
from annotation.models import Study
from annotation.services.objective_scores import (
    objective_scores_refresh,
    objective_status,
    study_has_truth,
    system_objective_scores,
)

# stats.objective_intervals.METRICS, named here so that the web's start-up loads no numpy.
METRICS = ("teds", "teds_s", "d_text", "s_layout", "s_obj")
CSV_COLUMNS = tuple(c for m in METRICS for c in (m, f"{m}_ci95_low", f"{m}_ci95_high"))


Correlate = Callable[[list[dict[str, Any]], Mapping[str, float]], dict[str, Any]]


def objective_section(
    *,
    study: Study,
    systems: list[dict[str, Any]],
    resamples: int,
    seed: int,
    correlate: Correlate,
    refresh: bool = True,
) -> dict[str, Any] | None:
    """The report's ``objective_scores`` (None for a study without ground truth). ``systems`` are the
    report's rows (their ``system``, ``rank`` and ``score``): each objective row carries the
    leaderboard's rank beside it, and the correlation is over the ranked systems with a score.
    ``refresh`` scores what is missing first (a leaderboard run has done so before its bootstrap).
    ``correlate`` is the leaderboard's objective-vs-subjective correlation (the imported CSV's)."""
    if not study_has_truth(study=study):
        return None
    if refresh:
        objective_scores_refresh(study=study)
    status = objective_status(study=study)
    found = system_objective_scores(study=study, resamples=resamples, seed=seed)
    rank_of = {row["system"]: row for row in systems}
    rows = []
    for entry in found:
        row = entry.to_json()
        ranked = rank_of.get(entry.system)
        row["rank"] = ranked["rank"] if ranked else None
        row["score"] = ranked["score"] if ranked else None
        rows.append(row)
    rows.sort(key=lambda r: (r["s_obj"] is None, -(r["s_obj"] or 0.0), r["system"]))
    section: dict[str, Any] = {
        "source": "ground truth",
        "pages_with_truth": status.pages_with_truth,
        "candidates_scored": status.scored,
        "candidates_unscored": status.unscored,
        "bootstrap": {"resamples": int(resamples), "seed": int(seed), "units": "pages", "strata": 1},
        "systems": rows,
    }
    s_obj = {r["system"]: r["s_obj"] for r in rows if r["s_obj"] is not None}
    try:
        section["vs_subjective"] = {"metric": "s_obj", **correlate(systems, s_obj)}
    except ArbiterError as exc:  # fewer than two ranked systems with a score
        section["vs_subjective"] = {"metric": "s_obj", "spearman": None, "kendall": None, "reason": str(exc)}
    return section


def objective_csv_cells(report: Mapping[str, Any], system: str) -> list[str]:
    """The objective columns of one system's leaderboard CSV row (empty without ground truth)."""
    section = report.get("objective_scores") or {}
    for row in section.get("systems", []):
        if row["system"] == system:
            cells = []
            for metric in METRICS:
                low, high = row[f"{metric}_ci95"]
                cells += [_cell(row[metric]), _cell(low), _cell(high)]
            return cells
    return [""] * len(CSV_COLUMNS)


def _cell(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def latest_rankings(*, study: Study) -> dict[str, dict[str, Any]]:
    """The newest finished leaderboard of the human votes and of a judge proxy (a coefficient set),
    each as ``{label, id, ranks: {system: rank}}``; a kind without one is absent."""
    from ranking.models import Leaderboard

    out: dict[str, dict[str, Any]] = {}
    done = Leaderboard.objects.filter(study=study, status=Leaderboard.Status.DONE).order_by(
        "-finished_at", "-pk"
    )
    for key, rows in (
        ("human", done.filter(coefficient_set__isnull=True)),
        ("judge", done.filter(coefficient_set__isnull=False)),
    ):
        found = rows.select_related("coefficient_set").first()
        if found is None:
            continue
        out[key] = {
            "label": "human votes"
            if found.coefficient_set is None
            else f"judges ({found.coefficient_set.name})",
            "id": found.pk,
            "ranks": {r["system"]: r["rank"] for r in (found.result or {}).get("systems", [])},
        }
    return out


def objective_summary(
    *, study: Study, resamples: int, seed: int, correlate: Correlate
) -> dict[str, Any] | None:
    """The study page's side-by-side table (docs/protocol.md "Objective scores beside the rankings"):
    per system the kept objective scores with intervals, the newest human and judge ranks, and the
    rank correlations of S_obj with each. None for a study without ground truth. Reads the cache
    only (the page offers to score what is missing)."""
    if not study_has_truth(study=study):
        return None
    status = objective_status(study=study)
    rankings = latest_rankings(study=study)
    rows = []
    for entry in system_objective_scores(study=study, resamples=resamples, seed=seed):
        row = entry.to_json()
        row["ranks"] = {key: ranking["ranks"].get(entry.system) for key, ranking in rankings.items()}
        rows.append(row)
    rows.sort(key=lambda r: (r["s_obj"] is None, -(r["s_obj"] or 0.0), r["system"]))
    s_obj = {r["system"]: r["s_obj"] for r in rows if r["s_obj"] is not None}
    correlations = {}
    for key, ranking in rankings.items():
        # Ranks as scores (rank 1 the highest): the correlation is over ranks either way.
        ranked = [{"system": system, "score": -float(rank)} for system, rank in ranking["ranks"].items()]
        try:
            correlations[key] = {"label": ranking["label"], **correlate(ranked, s_obj)}
        except ArbiterError as exc:
            correlations[key] = {
                "label": ranking["label"],
                "spearman": None,
                "kendall": None,
                "reason": str(exc),
            }
    return {
        "status": status,
        "rankings": rankings,
        "systems": rows,
        "correlations": correlations,
        "bootstrap": {"resamples": resamples, "seed": seed},
    }
