"""Sample-size planning for a study (docs/protocol.md "Planning a study's size").

The one way in for ``plan_study``, the planner page, its REST endpoint and its task: stated
assumptions, or a pilot study's valid main votes read through
``annotation.selectors.votes.votes_frame`` (and, for the Brier target, its judge outputs on the
human-labelled comparisons, read through ``calibration.selectors.calibration.calibration_inputs``),
become a ``stats.planning`` plan; the plan is written as JSON, CSV and a figure. It only reads:
nothing of any study is written.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db.models import QuerySet
from django.utils import timezone

from annotation import csv_cells
from annotation.errors import ArbiterError, ValidationFailed
from annotation.files import write_text_atomic
from annotation.models import Study
from annotation.selectors.votes import votes_frame
from annotation.services.serve_time import refit_votes
from ranking.models import StudyPlanRun
from stats.defaults import ALLOCATIONS, PLAN_KINDS
from stats.errors import StatisticsError

if TYPE_CHECKING:
    import pandas as pd

    from stats.planning import JudgeAssumptions, PlanCheck, PlanTarget, Progress, StudyDesign, StudyPlan
    from stats.study_simulation import StudyAssumptions

_VALUE = {"A": 1.0, "TIE": 0.5, "B": 0.0}

#: The plan's inputs, as the command's options, the page's form fields and the API's body name them.
PLAN_PARAMETERS: dict[str, Any] = {
    "target": "top_k",
    "k": 3,
    "probability": 0.9,
    "width": 50.0,
    "half_width": 0.05,
    "allocation": "uniform",
    "pilot": "",
    "systems": None,
    "elo_sd": 100.0,
    "tie_rate": 0.10,
    "rater_noise": 0.3,
    "repeats": 6,
    "trials_per_rater": 240,
    "raters_per_block": 5,
    "judges": 1,
    "judge_accuracy": "",
    "judge_outputs": 4,
    "studies": None,
    "seed": 0,
    "assurance": 0.8,
    "start_blocks": 1,
    "round_votes": None,
    #: Fresh simulated studies that check the plan (``stats.planning.verify_plan``; 0: no check).
    "verify": 200,
}
_INTEGERS = (
    "k",
    "systems",
    "repeats",
    "trials_per_rater",
    "raters_per_block",
    "judges",
    "judge_outputs",
    "studies",
    "seed",
    "start_blocks",
    "round_votes",
    "verify",
)
_FLOATS = ("probability", "width", "half_width", "elo_sd", "tie_rate", "rater_noise", "assurance")
#: Bounds of the whole-number inputs, so that one plan stays a bounded simulation (the ranges of
#: real values are checked by ``stats.planning``'s dataclasses).
PLAN_BOUNDS: dict[str, tuple[int, int]] = {
    "k": (1, 49),
    "systems": (2, 50),
    "repeats": (0, 1000),
    "trials_per_rater": (2, 10_000),
    "raters_per_block": (2, 100),
    "judges": (0, 20),
    "judge_outputs": (1, 20),
    "studies": (10, 2000),
    "seed": (0, 2**31 - 1),
    "start_blocks": (1, 100),
    "round_votes": (1, 1_000_000),
    "verify": (0, 2000),
}


def study_plan_parameters(values: Mapping[str, Any]) -> dict[str, Any]:
    """Clean plan inputs (form strings, API JSON or command options) into ``PLAN_PARAMETERS``' types.

    Empty values take the default; a value of the wrong type raises a one-line ``ValidationFailed``
    naming the field. The dataclasses of ``stats.planning`` check the ranges (``study_plan_build``).
    """
    unknown = sorted(set(values) - set(PLAN_PARAMETERS))
    if unknown:
        raise ValidationFailed(f"unknown plan input(s) {', '.join(unknown)}")
    out = dict(PLAN_PARAMETERS)
    for name, value in values.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if name in _INTEGERS:
            try:
                number = float(str(value).strip()) if not isinstance(value, int | float) else value
            except ValueError:
                raise ValidationFailed(f"expected a whole number, got {value!r}", field=name) from None
            if isinstance(value, bool) or not float(number).is_integer():
                raise ValidationFailed(f"expected a whole number, got {value!r}", field=name)
            out[name] = int(number)
        elif name in _FLOATS:
            try:
                number = float(str(value).strip()) if not isinstance(value, int | float) else float(value)
            except ValueError:
                raise ValidationFailed(f"expected a number, got {value!r}", field=name) from None
            if isinstance(value, bool) or not math.isfinite(number):
                raise ValidationFailed(f"expected a finite number, got {value!r}", field=name)
            out[name] = number
        elif name == "judge_accuracy":
            items = value if isinstance(value, list | tuple) else str(value).split(",")
            try:
                out[name] = ",".join(f"{float(str(a).strip()):g}" for a in items if str(a).strip())
            except ValueError:
                raise ValidationFailed(
                    f"expected numbers separated by commas (one per judge), got {value!r}", field=name
                ) from None
        else:
            out[name] = str(value).strip()
    if out["target"] not in PLAN_KINDS:
        raise ValidationFailed(
            f"expected one of {', '.join(PLAN_KINDS)}, got {out['target']!r}", field="target"
        )
    if out["allocation"] not in ALLOCATIONS:
        raise ValidationFailed(
            f"expected one of {', '.join(ALLOCATIONS)}, got {out['allocation']!r}", field="allocation"
        )
    for name, (low, high) in PLAN_BOUNDS.items():
        if out[name] is not None and not low <= out[name] <= high:
            raise ValidationFailed(f"expected {low}…{high}, got {out[name]}", field=name)
    if out["pilot"] and out["systems"] is not None:
        raise ValidationFailed("give a pilot study or the stated assumptions (systems), not both")
    if not out["pilot"] and out["systems"] is None:
        raise ValidationFailed("give a pilot study or the stated assumptions (systems, …)")
    return out


def study_plan_build(
    parameters: Mapping[str, Any],
) -> tuple[PlanTarget, StudyDesign, StudyAssumptions | None, JudgeAssumptions | None]:
    """The ``stats.planning`` inputs of clean parameters; out-of-range values raise one line."""
    from stats.planning import JudgeAssumptions, PlanTarget, StudyDesign
    from stats.study_simulation import StudyAssumptions

    p = parameters
    try:
        target = PlanTarget(
            kind=p["target"],
            k=p["k"],
            probability=p["probability"],
            width_elo=p["width"],
            half_width=p["half_width"],
            # 0: plan κ / α for the mean half-width instead of the share of studies reaching it.
            assurance=p["assurance"] or None,
        )
        design = StudyDesign(
            trials_per_rater=p["trials_per_rater"],
            hidden_repeats=p["repeats"],
            raters_per_block=p["raters_per_block"],
            n_judges=p["judges"],
            start_blocks=p["start_blocks"],
            # Unset: the serve-time refit interval, the granularity an adaptive pairwise_reference
            # study runs at (docs/protocol.md "Serve-time choice"); a block's votes plan --adaptation block.
            round_votes=p["round_votes"] if p["round_votes"] is not None else refit_votes(),
        )
        assumptions = None
        if not p["pilot"]:
            assumptions = StudyAssumptions(
                n_systems=p["systems"],
                elo_sd=p["elo_sd"],
                tie_rate=p["tie_rate"],
                rater_noise=p["rater_noise"],
            )
        judges = None
        if target.kind == "brier":
            stated = tuple(float(a) for a in p["judge_accuracy"].split(",") if a)
            judges = JudgeAssumptions(
                accuracy=stated or (0.7,) * max(1, p["judges"]), outputs_per_comparison=p["judge_outputs"]
            )
    except StatisticsError as exc:
        raise ValidationFailed(str(exc)) from None
    return target, design, assumptions, judges


def study_plan_for_parameters(
    parameters: Mapping[str, Any], *, pilot: Study | None = None, progress: Progress | None = None
) -> tuple[StudyPlan, dict[str, Any] | None]:
    """The plan of clean ``parameters``; ``pilot`` is the study that ``parameters['pilot']`` names."""
    target, design, assumptions, judges = study_plan_build(parameters)
    return study_plan_compute(
        target=target,
        assumptions=assumptions,
        pilot=pilot,
        allocation=parameters["allocation"],
        design=design,
        judges=judges,
        n_studies=parameters["studies"],
        seed=parameters["seed"],
        progress=progress,
    )


def pilot_votes(*, study: Study) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """A pilot's votes after the study's saved exclusion rules, as every report reads them by
    default (docs/protocol.md, "Commands"; none when the study has no rules and no gold), and
    the ``exclusions`` object of what they removed (None when no rule applies)."""
    from calibration.services.agreement import reference_votes_filtered
    from calibration.services.exclusion_rules import effective_rules

    frame = votes_frame(study=study)
    rules, by_default = effective_rules(study, None)
    if rules is None:
        return frame, None
    frame, exclusions = reference_votes_filtered(study=study, votes=frame, rules=rules)
    exclusions["applied_by_default"] = by_default
    return frame, exclusions


def pilot_assumptions_read(*, study: Study) -> tuple[StudyAssumptions, dict[str, Any]]:
    """Assumptions from a pilot study's valid main votes (hidden repeats and CANNOT_JUDGE left out),
    after its saved exclusion rules (``pilot_votes``)."""
    import numpy as np

    from stats.planning import pilot_assumptions

    frame, exclusions = pilot_votes(study=study)
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
    return assumptions, {"study": study.slug, **summary, "exclusions": exclusions}


def pilot_judges_read(*, study: Study) -> tuple[JudgeAssumptions, dict[str, Any]]:
    """Judge assumptions from a pilot's judge outputs on its human-labelled comparisons
    (docs/protocol.md "Judges and calibration" inputs)."""
    import numpy as np

    from calibration.selectors.calibration import calibration_inputs
    from stats.planning import pilot_judges

    try:
        inputs = calibration_inputs(study=study, votes=pilot_votes(study=study)[0])
    except ArbiterError as exc:
        raise ValidationFailed(
            f"pilot '{study.slug}': the Brier target needs its judge outputs: {exc}"
        ) from None
    human = inputs.human[inputs.human["n_valid"] > 0]
    try:
        return pilot_judges(
            inputs.judge_outputs,
            comparisons=human["comparison"].tolist(),
            human_counts=human[["n_B", "n_T", "n_A"]].to_numpy(dtype=np.int64),
            judges=list(inputs.judges),
        )
    except StatisticsError as exc:
        raise ValidationFailed(f"pilot '{study.slug}': {exc}") from None


def study_plan_compute(
    *,
    target: PlanTarget,
    assumptions: StudyAssumptions | None = None,
    pilot: Study | None = None,
    allocation: str = "uniform",
    design: StudyDesign | None = None,
    judges: JudgeAssumptions | None = None,
    n_studies: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[StudyPlan, dict[str, Any] | None]:
    """The plan for ``target`` from ``assumptions`` or from a ``pilot`` study (exactly one of them).

    A pilot also gives the Brier target its judges (``judges`` is then ignored)."""
    from stats.planning import plan_study

    if (assumptions is None) == (pilot is None):
        raise ValidationFailed("give either stated assumptions or a pilot study, not both or neither")
    summary = None
    if pilot is not None:
        if target.kind == "brier":
            judges, judge_summary = pilot_judges_read(study=pilot)
        assumptions, summary = pilot_assumptions_read(study=pilot)
        if target.kind == "brier":
            summary.update(judge_summary)
    assert assumptions is not None
    try:
        plan = plan_study(
            assumptions,
            target,
            allocation=allocation,
            design=design,
            judges=judges,
            n_studies=n_studies,
            seed=seed,
            progress=progress,
        )
    except StatisticsError as exc:
        raise ValidationFailed(str(exc)) from None
    return plan, summary


def study_plan_verify(plan: StudyPlan, n_studies: int) -> PlanCheck | None:
    """The plan checked on ``n_studies`` fresh simulated studies of its size (None for 0)."""
    from stats.planning import verify_plan

    if not n_studies:
        return None
    try:
        return verify_plan(plan, n_studies=n_studies)
    except StatisticsError as exc:
        raise ValidationFailed(str(exc)) from None


def study_plan_report(
    plan: StudyPlan, pilot: dict[str, Any] | None, check: PlanCheck | None = None
) -> dict[str, Any]:
    return {
        **plan.to_dict(),
        "pilot": pilot,
        "verification": None if check is None else check.to_dict(plan.target),
        "writes_to_study": False,
    }


def study_plan_csv(plan: StudyPlan) -> str:
    buf = io.StringIO()
    writer = csv_cells.writer(buf)
    statistic = "probability" if plan.target.is_ranking or plan.target.uses_assurance else "half_width"
    writer.writerow(["votes", statistic, "ci95_low", "ci95_high"])
    for p in plan.points:
        writer.writerow([p.votes, f"{p.value:.6g}", f"{p.low:.6g}", f"{p.high:.6g}"])
    return buf.getvalue()


def study_plan_figure_bytes(plan: StudyPlan, fmt: str = "svg") -> bytes:
    """Target statistic against votes with the simulation's 95 % band, as SVG or PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from calibration.drawing import drawing

    # One figure at a time per process, with a fixed id salt: the same plan gives the same bytes.
    with drawing({"svg.hashsalt": "arbiter-plan"}):
        fig = Figure(figsize=(6.4, 3.6))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        votes = [p.votes for p in plan.points]
        ax.fill_between(
            votes,
            [p.low for p in plan.points],
            [p.high for p in plan.points],
            color="#c7d2fe",
            label="95% (simulation)",
        )
        ax.plot(
            votes,
            [p.value for p in plan.points],
            color="#2f5bd3",
            marker="o",
            markersize=3,
            label=plan.allocation,
        )
        level = (
            plan.target.probability
            if plan.target.is_ranking
            else float(plan.target.assurance or 0.0)
            if plan.target.uses_assurance
            else plan.target.half_width
        )
        ax.axhline(level, color="#b42318", linewidth=1, linestyle="--", label="target")
        ax.axvline(plan.votes_needed, color="#98a2b3", linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel("main votes")
        ax.set_ylabel(
            "probability target met"
            if plan.target.is_ranking
            else "share of studies reaching it"
            if plan.target.uses_assurance
            else "95% half-width"
        )
        ax.set_title(f"{plan.target.describe()}: {math.ceil(plan.votes_needed)} votes", fontsize=9)
        ax.legend(fontsize=8, frameon=False)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata={"Date": None} if fmt == "svg" else None, bbox_inches="tight")
        return buf.getvalue()


def study_plan_figure(plan: StudyPlan, path: Path) -> None:
    """The figure written to ``path``: SVG or PNG by suffix."""
    suffix = path.suffix.lower()
    if suffix not in (".svg", ".png"):
        raise ValidationFailed(f"--plot {path}: the figure is written as .svg or .png")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(study_plan_figure_bytes(plan, suffix[1:]))
    tmp.replace(path)


def study_plan_write(
    *,
    plan: StudyPlan,
    pilot: dict[str, Any] | None,
    check: PlanCheck | None = None,
    json_path: Path | None,
    csv_path: Path | None,
    plot_path: Path | None,
) -> None:
    if json_path is not None:
        write_text_atomic(
            json_path, json.dumps(study_plan_report(plan, pilot, check), indent=2, allow_nan=False) + "\n"
        )
    if csv_path is not None:
        write_text_atomic(csv_path, study_plan_csv(plan))
    if plot_path is not None:
        study_plan_figure(plan, plot_path)


# --------------------------------------------------------------------------- planner page / API runs


def study_plan_check(
    parameters: Mapping[str, Any], *, pilot: Study | None
) -> tuple[PlanTarget, StudyAssumptions | None]:
    """The cheap refusals, before a run is queued: ranges, the pilot's size, an impossible top-k."""
    target, _design, assumptions, _judges = study_plan_build(parameters)
    if pilot is not None:
        assumptions, _ = pilot_assumptions_read(study=pilot)
        if target.kind == "brier":
            pilot_judges_read(study=pilot)
    assert assumptions is not None
    if target.kind == "top_k" and not target.k < assumptions.n_systems:
        raise ValidationFailed(
            f"target top-{target.k} is impossible with {assumptions.n_systems} systems "
            "(k must be below the system count)"
        )
    return target, assumptions


def study_plan_run_create(
    *, values: Mapping[str, Any], pilots: QuerySet[Study], user: Any = None
) -> StudyPlanRun:
    """A queued plan run from form or API ``values``; ``pilots``: the studies the user may use as pilot.

    Bad input raises a one-line ``ValidationFailed``; nothing of the pilot is written."""
    parameters = study_plan_parameters(values)
    pilot = None
    if parameters["pilot"]:
        pilot = pilots.filter(slug=parameters["pilot"]).first()
        if pilot is None:
            raise ValidationFailed(
                f"no study '{parameters['pilot']}' of yours to use as pilot", field="pilot"
            )
    study_plan_check(parameters, pilot=pilot)
    return StudyPlanRun.objects.create(
        pilot=pilot,
        parameters=parameters,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


PROGRESS_SECONDS = 0.5


def study_plan_run_fail(run_id: int, message: str) -> None:
    StudyPlanRun.objects.filter(pk=run_id).exclude(status=StudyPlanRun.Status.DONE).update(
        status=StudyPlanRun.Status.FAILED, error=" ".join(message.split())[:2000], finished_at=timezone.now()
    )


def study_plan_run_execute(*, run_id: int) -> str:
    """Claim a queued plan run (conditional update: a second delivery is a no-op), compute, store."""
    claimed = StudyPlanRun.objects.filter(pk=run_id, status=StudyPlanRun.Status.QUEUED).update(
        status=StudyPlanRun.Status.RUNNING, started_at=timezone.now(), progress=0.0
    )
    if not claimed:
        return "not queued"
    run = StudyPlanRun.objects.select_related("pilot").get(pk=run_id)
    last = [0.0]

    def progress(share: float) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_SECONDS:
            last[0] = now
            StudyPlanRun.objects.filter(pk=run_id, status=StudyPlanRun.Status.RUNNING).update(progress=share)

    try:
        plan, summary = study_plan_for_parameters(run.parameters, pilot=run.pilot, progress=progress)
        # The page checks every plan on fresh studies by default (``verify``: 200).
        check = study_plan_verify(plan, int(run.parameters.get("verify", PLAN_PARAMETERS["verify"])))
    except (ArbiterError, ValueError) as exc:
        study_plan_run_fail(run_id, str(exc))
        return "failed"
    StudyPlanRun.objects.filter(pk=run_id).update(
        status=StudyPlanRun.Status.DONE,
        progress=1.0,
        result=json.loads(json.dumps(study_plan_report(plan, summary, check), allow_nan=False)),
        csv=study_plan_csv(plan),
        svg=study_plan_figure_bytes(plan, "svg").decode("utf-8"),
        finished_at=timezone.now(),
    )
    return "done"


def study_plan_runs_for(user: Any) -> QuerySet[StudyPlanRun]:
    """The plan runs a researcher started (an admin sees all)."""
    from annotation.roles import is_admin

    runs = StudyPlanRun.objects.select_related("pilot")
    return runs if is_admin(user) else runs.filter(created_by=user)
