"""A checklist judge's scores: pass rate per dimension and the Visual score (docs/protocol.md "Checklist
judges"; AesCode §E.1).

Pure module: pandas in, frozen dataclasses out, no Django.

Rules (docs/protocol.md "Checklist judges"):

- A question *passes* when the judge answered yes and cited evidence; no, unclear and a yes without
  evidence fail (AesCode §E.1: an unresolved question is a failure, not a guessed pass).
- A question's dimension is its ``question_type`` (Content, Layout, Style, …); questions without one
  form the dimension ``(untyped)``.
- An item (one brief × system rendering) scores, per dimension, the share of its questions of that
  dimension that pass, in points 0–100; its Visual score is the mean of its dimension scores.
- A system scores, per dimension, the mean of its items' dimension scores (each item weighs the same,
  whatever its number of questions), and its Visual score is the mean of its dimension scores.
- Intervals: percentile 2.5/97.5 of the cluster bootstrap over briefs (``stats.bootstrap``,
  ``brief_bootstrap``), one count matrix for every system and dimension; a resample's Visual is the
  mean of that resample's dimension scores.
- An item the judge has no valid answer for (a failed render, a failed or invalid call) is not
  scored; the caller counts it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stats.bootstrap import brief_bootstrap, check_bootstrap_args, percentile_ci, ratio_of_sums
from stats.errors import InvalidKindData
from stats.frames import require_columns, string_column
from stats.serialize import json_safe

UNTYPED = "(untyped)"
ANSWER_COLUMNS: tuple[str, ...] = ("brief", "system", "item", "predicate", "dimension", "passed")


@dataclass(frozen=True)
class DimensionScore:
    """One system's pass rate on one dimension, in points 0–100, with its brief-bootstrap interval."""

    dimension: str
    n_items: int
    n_questions: int
    n_passed: int
    value: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "dimension": self.dimension,
                "n_items": self.n_items,
                "n_questions": self.n_questions,
                "n_passed": self.n_passed,
                "value": self.value,
                "ci95": list(self.ci95),
            }
        )


@dataclass(frozen=True)
class SystemChecklistScore:
    system: str
    n_items: int
    n_briefs: int
    dimensions: tuple[DimensionScore, ...]
    visual: float
    visual_ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "system": self.system,
                "n_items": self.n_items,
                "n_briefs": self.n_briefs,
                "dimensions": [d.to_dict() for d in self.dimensions],
                "visual": self.visual,
                "visual_ci95": list(self.visual_ci95),
            }
        )


@dataclass(frozen=True)
class ChecklistJudgeScores:
    """Per system the dimension pass rates and Visual; per item its scores (for the score–preference
    figure). ``items`` rows: ``item, brief, system, visual`` and one entry per dimension (None when the
    item has no question of it)."""

    dimensions: tuple[str, ...]
    systems: tuple[SystemChecklistScore, ...]
    items: tuple[dict[str, Any], ...]
    n_briefs: int
    resamples: int
    seed: int

    def system(self, name: str) -> SystemChecklistScore:
        for s in self.systems:
            if s.system == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "dimensions": list(self.dimensions),
                "systems": [s.to_dict() for s in self.systems],
                "items": [dict(i) for i in self.items],
                "bootstrap": {
                    "resamples": self.resamples,
                    "seed": self.seed,
                    "clusters": "brief",
                    "n_clusters": self.n_briefs,
                },
            }
        )


def _validate(answers: pd.DataFrame) -> pd.DataFrame:
    frame = require_columns(answers, ANSWER_COLUMNS, "answers")
    for col in ("brief", "system", "item", "predicate"):
        frame[col] = string_column(frame, col, "answers")
    frame["dimension"] = [
        UNTYPED if d is None or (isinstance(d, float) and math.isnan(d)) or str(d).strip() == "" else str(d)
        for d in frame["dimension"].tolist()
    ]
    passed = frame["passed"].tolist()
    for i, p in enumerate(passed):
        if not isinstance(p, (bool, np.bool_)):
            raise InvalidKindData(f"answers: column 'passed' row {i}: expected true or false, got {p!r}")
    frame["passed"] = np.asarray(passed, dtype=bool)
    dup = frame.duplicated("predicate")
    if dup.any():
        raise InvalidKindData(f"answers: predicate {frame.loc[dup, 'predicate'].iloc[0]!r} answered twice")
    per_item = frame.groupby("item")[["brief", "system"]].nunique()
    if (per_item > 1).any().any():
        bad = per_item[(per_item > 1).any(axis=1)].index[0]
        raise InvalidKindData(f"answers: item {bad!r} has more than one brief or system")
    return frame


def checklist_judge_scores(answers: pd.DataFrame, *, resamples: int, seed: int) -> ChecklistJudgeScores:
    """docs/protocol.md "Checklist judges" scores of one judge (module docstring).

    ``answers``: one row per answered question, ``brief, system, item, predicate, dimension, passed``.
    """
    check_bootstrap_args(resamples, seed)
    frame = _validate(answers)
    dimensions = tuple(sorted(set(frame["dimension"]), key=lambda d: (d == UNTYPED, d)))
    per = (
        frame.groupby(["item", "brief", "system", "dimension"], sort=True)["passed"]
        .agg(n="size", k="sum")
        .reset_index()
    )
    per["score"] = 100.0 * per["k"] / per["n"]
    wide = per.pivot(index=["item", "brief", "system"], columns="dimension", values="score").reset_index()
    wide["visual"] = wide[[d for d in dimensions if d in wide.columns]].mean(axis=1, skipna=True)

    boot = brief_bootstrap(wide["brief"].tolist(), resamples=resamples, seed=seed)
    weights = boot.counts.astype(float)
    systems: list[SystemChecklistScore] = []
    for system in sorted(set(wide["system"])):
        rows = wide[wide["system"] == system]
        cols = boot.column_of(rows["brief"].tolist())
        dim_scores: list[DimensionScore] = []
        resampled: list[np.ndarray] = []
        for dim in dimensions:
            if dim not in rows.columns:
                continue
            has = rows[dim].notna().to_numpy()
            if not has.any():
                continue
            values = rows[dim].to_numpy(dtype=float)[has]
            num = np.bincount(cols[has], weights=values, minlength=len(boot.briefs))
            den = np.bincount(cols[has], minlength=len(boot.briefs)).astype(float)
            draws = np.asarray(ratio_of_sums(weights @ num, weights @ den), dtype=float)
            resampled.append(draws)
            sel = per[(per["system"] == system) & (per["dimension"] == dim)]
            dim_scores.append(
                DimensionScore(
                    dimension=dim,
                    n_items=int(has.sum()),
                    n_questions=int(sel["n"].sum()),
                    n_passed=int(sel["k"].sum()),
                    value=float(values.mean()),
                    ci95=percentile_ci(draws),
                )
            )
        visual = float(np.mean([d.value for d in dim_scores])) if dim_scores else math.nan
        if resampled:
            stacked = np.vstack(resampled)
            with np.errstate(invalid="ignore"):
                visual_draws = stacked.mean(axis=0)  # NaN where a dimension drew no item
        else:
            visual_draws = np.full(resamples, np.nan)
        systems.append(
            SystemChecklistScore(
                system=system,
                n_items=len(rows),
                n_briefs=int(rows["brief"].nunique()),
                dimensions=tuple(dim_scores),
                visual=visual,
                visual_ci95=percentile_ci(visual_draws),
            )
        )
    items = tuple(
        {
            "item": rec["item"],
            "brief": rec["brief"],
            "system": rec["system"],
            "visual": float(rec["visual"]),
            **{d: (None if d not in rec or pd.isna(rec[d]) else float(rec[d])) for d in dimensions},
        }
        for rec in wide.to_dict(orient="records")
    )
    return ChecklistJudgeScores(
        dimensions=dimensions,
        systems=tuple(systems),
        items=items,
        n_briefs=len(boot.briefs),
        resamples=int(resamples),
        seed=int(seed),
    )


__all__ = [
    "UNTYPED",
    "ChecklistJudgeScores",
    "DimensionScore",
    "SystemChecklistScore",
    "checklist_judge_scores",
]
