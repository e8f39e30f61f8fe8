"""``plan_study --target KIND [--pilot SLUG | --systems M ...] [--json/--csv/--plot PATH]``: how many
votes, raters, blocks and judge calls a target needs, by seeded simulation (docs/protocol.md
"Planning a study's size"). Never writes to a study."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound, ValidationFailed
from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.services.exclusion_rules import exclusions_line
from ranking.planning import (
    PLAN_PARAMETERS,
    study_plan_for_parameters,
    study_plan_parameters,
    study_plan_verify,
    study_plan_write,
)
from stats.defaults import PLAN_KINDS
from stats.errors import StatisticsError
from stats.gold_rule import DEFAULT_GOLD_ACCURACY, gold_plan


class Command(ArbiterCommand):
    help = (
        "Plan a study's size by seeded simulation with the project's estimators: votes (raters, blocks, "
        "judge calls) until a target is met, from a pilot study's votes or stated assumptions. Reads only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--target", required=True, choices=PLAN_KINDS, help="top_k, adjacent, kappa, alpha or brier"
        )
        parser.add_argument("--k", type=int, default=3, help="top-k: how many best systems (default 3)")
        parser.add_argument(
            "--probability", type=float, default=0.9, help="ranking targets: probability (default 0.9)"
        )
        parser.add_argument(
            "--width", type=float, default=50.0, help="adjacent: 95%% width in Elo points (default 50)"
        )
        parser.add_argument(
            "--half-width", type=float, default=0.05, help="kappa/alpha/brier: 95%% half-width (default 0.05)"
        )
        parser.add_argument("--allocation", choices=["uniform", "adaptive"], default="uniform")
        parser.add_argument(
            "--pilot",
            metavar="SLUG",
            default="",
            help="estimate the assumptions from this study's votes (and judges)",
        )
        parser.add_argument("--systems", type=int, help="stated assumptions: number of systems")
        parser.add_argument(
            "--elo-sd", type=float, default=100.0, help="spread of the systems' scores (Elo sd, default 100)"
        )
        parser.add_argument("--tie-rate", type=float, default=0.10, help="share of TIE votes (default 0.10)")
        parser.add_argument(
            "--rater-noise", type=float, default=0.3, help="sd of the raters' log noise scale (default 0.3)"
        )
        parser.add_argument(
            "--repeats", type=int, default=6, help="hidden repeats per assignment (default 6)"
        )
        parser.add_argument(
            "--trials-per-rater", type=int, default=240, help="trials per assignment (default 240)"
        )
        parser.add_argument("--raters-per-block", type=int, default=5, help="raters per block (default 5)")
        parser.add_argument(
            "--judges", type=int, default=1, help="judges scoring every comparison (default 1)"
        )
        parser.add_argument(
            "--judge-accuracy",
            default="",
            metavar="A[,A...]",
            help="brier: each judge's share of outputs equal to the human majority (default 0.7 per --judges)",
        )
        parser.add_argument(
            "--judge-outputs",
            type=int,
            default=4,
            help="brier: outputs per comparison and judge (default 4: 2 orders x 2 repeats)",
        )
        parser.add_argument(
            "--studies", type=int, help="simulated studies (default 1000 ranking, 40 kappa/alpha/brier)"
        )
        parser.add_argument(
            "--assurance",
            type=float,
            default=0.8,
            help="kappa/alpha: share of studies whose half-width reaches the target (default 0.8; 0: the mean)",
        )
        parser.add_argument(
            "--start-blocks", type=int, default=1, help="adaptive: uniform blocks before adapting (default 1)"
        )
        parser.add_argument(
            "--round-votes",
            type=int,
            default=None,
            help="adaptive: votes per re-allocation round (default: the serve-time refit, ARBITER_SERVE_REFIT_VOTES = 50, "
            "as schedule_blocks --allocation adaptive runs; give one block's votes for --adaptation block)",
        )
        parser.add_argument(
            "--verify",
            type=int,
            nargs="?",
            const=200,
            default=0,
            metavar="N",
            help="check the plan on N fresh simulated studies of its size (N default 200; the planner page "
            "always checks on 200)",
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", type=Path, help="write the plan as JSON here")
        parser.add_argument(
            "--csv", type=Path, help="write the curve (votes, statistic, interval) as CSV here"
        )
        parser.add_argument("--plot", type=Path, help="write the figure here (.svg or .png)")
        parser.add_argument(
            "--gold-accuracy", type=float, default=DEFAULT_GOLD_ACCURACY, metavar="P",
            help="honest raters' share of gold trials right, for the gold suggestion (default 0.93; "
            "docs/protocol.md \"Gold trials: the exclusion test\")",
        )

    def run(self, *args: Any, **options: Any) -> None:
        json_path = output_path_check(options["json"], option="--json")
        csv_path = output_path_check(options["csv"], option="--csv")
        plot_path = output_path_check(options["plot"], option="--plot")
        try:
            gold = gold_plan(float(options["gold_accuracy"]))
        except StatisticsError as exc:
            raise ValidationFailed(str(exc), field="gold-accuracy") from None
        if plot_path is not None and plot_path.suffix.lower() not in (".svg", ".png"):
            raise ValidationFailed(f"--plot {plot_path}: the figure is written as .svg or .png")
        parameters = study_plan_parameters({name: options[name] for name in PLAN_PARAMETERS})
        pilot = None
        if parameters["pilot"]:
            pilot = Study.objects.filter(slug=parameters["pilot"]).first()
            if pilot is None:
                raise NotFound(f"no study with slug '{parameters['pilot']}'")
        plan, summary = study_plan_for_parameters(parameters, pilot=pilot)
        target = plan.target
        check = study_plan_verify(plan, parameters["verify"])
        study_plan_write(
            plan=plan, pilot=summary, check=check, json_path=json_path, csv_path=csv_path, plot_path=plot_path
        )
        statistic = "P(met)" if target.is_ranking or target.uses_assurance else "half-width"
        self.stdout.write(
            f"{target.describe()}, {plan.allocation} allocation, {plan.n_studies} simulated studies, seed {plan.seed}"
        )
        if plan.allocation == "adaptive" and target.is_ranking:
            d = plan.design
            step = f"rounds of {d.round_votes} votes" if d.round_votes else f"one block ({d.block_votes} votes) per round"
            self.stdout.write(
                f"simulated at the study's granularity: {_count(d.start_blocks, 'uniform start block')} "
                f"({d.start_blocks * d.block_votes} votes), then {step}, 25% uniform floor"
            )
        self.stdout.write(f"{'votes':>8}  {statistic:>10}  95% (simulation)")
        for p in plan.points:
            self.stdout.write(f"{p.votes:8d}  {p.value:10.3f}  [{p.low:.3f}, {p.high:.3f}]")
        low, high = plan.votes_interval
        high_text = "not reached" if high == float("inf") else f"{high:.0f}"
        self.stdout.write(
            f"needed: {math.ceil(plan.votes_needed)} main votes [{low:.0f}, {high_text}] = "
            f"{_count(plan.trials_needed, 'trial')}, {_count(plan.raters_needed, 'rater')}, "
            f"{_count(plan.blocks_needed, 'block')}"
            + (
                f" (the last with {plan.last_block_raters} of its {plan.design.raters_per_block} raters)"
                if target.is_ranking and plan.last_block_raters < plan.design.raters_per_block
                else ""
            )
            + f", {_count(plan.judge_calls, 'judge call')}"
            + (f", {_count(plan.comparisons_needed, 'comparison')}" if plan.comparisons_needed is not None else "")
            + (f" (pilot '{summary['study']}': {summary['valid_main_votes']} valid votes)" if summary else "")
        )
        if summary and summary.get("exclusions"):
            self.stdout.write(f"pilot: {exclusions_line(summary['exclusions'])}")
        if plan.mean_votes_needed is not None and plan.target.uses_assurance:
            self.stdout.write(
                f"(the mean half-width reaches {target.half_width:g} at {math.ceil(plan.mean_votes_needed)} votes; "
                f"{target.assurance:.0%} of studies reach it at the {math.ceil(plan.votes_needed)} above)"
            )
        if check is not None:
            verdict = "meets the target" if check.meets(target) else "MISSES the target"
            self.stdout.write(f"{check.describe()}: {verdict} (within one standard error)")
        self.stdout.write(
            f"gold: {gold.describe()} (docs/protocol.md \"Gold trials: the exclusion test\"; "
            f"schedule_blocks --gold {gold.gold_trials})"
        )


def _count(n: int, noun: str) -> str:
    """``1 rater``, ``2 raters``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
