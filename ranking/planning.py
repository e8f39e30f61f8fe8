"""Sample-size planning for a study (docs/protocol.md "Planning a study's size").

The one way in for ``plan_study``: stated assumptions, or a pilot study's valid main votes read
through ``annotation.selectors.votes.votes_frame``, become a ``stats.planning`` plan; the plan is
written as JSON, CSV and a figure. It only reads: nothing of any study is written.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from annotation.errors import ValidationFailed
from annotation.files import write_text_atomic
from annotation.models import Study
from annotation.selectors.votes import votes_frame
from stats.errors import StatisticsError
from stats.planning import PlanTarget, StudyDesign, StudyPlan, pilot_assumptions, plan_study
from stats.study_simulation import StudyAssumptions

_VALUE = {"A": 1.0, "TIE": 0.5, "B": 0.0}


def pilot_assumptions_read(*, study: Study) -> tuple[StudyAssumptions, dict[str, Any]]:
    """Assumptions from a pilot study's valid main votes (hidden repeats and CANNOT_JUDGE left out)."""
    frame = votes_frame(study=study)
    repeats = int(frame["is_repeat"].sum()) if len(frame) else 0
    main = frame[~frame["is_repeat"] & frame["label"].isin(list(_VALUE))] if len(frame) else frame
    systems = tuple(sorted(set(main["system_a"]) | set(main["system_b"]))) if len(main) else ()
    index = {s: i for i, s in enumerate(systems)}
    a = np.array([index[s] for s in main["system_a"]], dtype=np.int64) if len(main) else np.zeros(0, np.int64)
    b = np.array([index[s] for s in main["system_b"]], dtype=np.int64) if len(main) else np.zeros(0, np.int64)
    y = np.array([_VALUE[label] for label in main["label"]], dtype=np.float64) if len(main) else np.zeros(0)
    try:
        assumptions, summary = pilot_assumptions(a, b, y, systems, n_repeats=repeats)
    except StatisticsError as exc:
        raise ValidationFailed(f"pilot '{study.slug}': {exc}") from None
    return assumptions, {"study": study.slug, **summary}


def study_plan_compute(
    *,
    target: PlanTarget,
    assumptions: StudyAssumptions | None = None,
    pilot: Study | None = None,
    allocation: str = "uniform",
    design: StudyDesign | None = None,
    n_studies: int | None = None,
    seed: int = 0,
) -> tuple[StudyPlan, dict[str, Any] | None]:
    """The plan for ``target`` from ``assumptions`` or from a ``pilot`` study (exactly one of them)."""
    if (assumptions is None) == (pilot is None):
        raise ValidationFailed("give either stated assumptions or a pilot study, not both or neither")
    summary = None
    if pilot is not None:
        assumptions, summary = pilot_assumptions_read(study=pilot)
    assert assumptions is not None
    plan = plan_study(assumptions, target, allocation=allocation, design=design, n_studies=n_studies, seed=seed)
    return plan, summary


def study_plan_report(plan: StudyPlan, pilot: dict[str, Any] | None) -> dict[str, Any]:
    return {**plan.to_dict(), "pilot": pilot, "writes_to_study": False}


def study_plan_csv(plan: StudyPlan) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    statistic = "probability" if plan.target.is_ranking else "half_width"
    writer.writerow(["votes", statistic, "ci95_low", "ci95_high"])
    for p in plan.points:
        writer.writerow([p.votes, f"{p.value:.6g}", f"{p.low:.6g}", f"{p.high:.6g}"])
    return buf.getvalue()


def study_plan_figure(plan: StudyPlan, path: Path) -> None:
    """Target statistic against votes with the simulation's 95 % band; SVG or PNG by suffix."""
    fig = Figure(figsize=(6.4, 3.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    votes = [p.votes for p in plan.points]
    ax.fill_between(votes, [p.low for p in plan.points], [p.high for p in plan.points], color="#c7d2fe", label="95% (simulation)")
    ax.plot(votes, [p.value for p in plan.points], color="#2f5bd3", marker="o", markersize=3, label=plan.allocation)
    level = plan.target.probability if plan.target.is_ranking else plan.target.half_width
    ax.axhline(level, color="#b42318", linewidth=1, linestyle="--", label="target")
    ax.axvline(plan.votes_needed, color="#98a2b3", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("main votes")
    ax.set_ylabel("probability target met" if plan.target.is_ranking else "95% half-width")
    ax.set_title(f"{plan.target.describe()}: {math.ceil(plan.votes_needed)} votes", fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    suffix = path.suffix.lower()
    if suffix not in (".svg", ".png"):
        raise ValidationFailed(f"--plot {path}: the figure is written as .svg or .png")
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix[1:], metadata={"Date": None} if suffix == ".svg" else None, bbox_inches="tight")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)


def study_plan_write(
    *, plan: StudyPlan, pilot: dict[str, Any] | None, json_path: Path | None, csv_path: Path | None, plot_path: Path | None
) -> None:
    if json_path is not None:
        write_text_atomic(json_path, json.dumps(study_plan_report(plan, pilot), indent=2, allow_nan=False) + "\n")
    if csv_path is not None:
        write_text_atomic(csv_path, study_plan_csv(plan))
    if plot_path is not None:
        study_plan_figure(plan, plot_path)
