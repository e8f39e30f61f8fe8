"""``leaderboard SLUG --coefficients NAME --json PATH [...]``: the docs/protocol.md "Deployment leaderboard"
leaderboard (docs/protocol.md "Commands", "Report keys"); ``leaderboard SLUG --human --json PATH``: the
leaderboard of the study's human votes (docs/protocol.md "Human leaderboard")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound
from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.progress import is_terminal, progress_step
from ranking.leaderboard import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    check_leaderboard_options,
    leaderboard_compute,
    leaderboard_source,
)
from ranking.models import Leaderboard
from ranking.objective_csv import objective_read_csv
from ranking.rendering import leaderboard_write


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    # No system checks: they import every URLconf and view (matplotlib, statsmodels, ...), which
    # would cost seconds at every start of a data command; `manage.py check` runs them.
    requires_system_checks: list[str] = []
    help = (
        "Rank the study's systems from a frozen coefficient set (docs/protocol.md \"Deployment leaderboard\"): proxy outcomes from each judge's "
        "primary-order, repeat-0 output on every scheduled comparison (human-study ones included), "
        "Bradley–Terry scores, soft preference, appearances, page-block bootstrap intervals and rank-1 shares."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--coefficients", help="name of a frozen coefficient set of the study")
        source.add_argument(
            "--human",
            action="store_true",
            help='rank the study\'s human votes instead of judges (docs/protocol.md "Human leaderboard")',
        )
        parser.add_argument("--json", required=True, type=Path, help='write the JSON report here (docs/protocol.md "Report keys")')
        parser.add_argument("--html", type=Path, help="also write a self-contained HTML page")
        parser.add_argument("--csv", type=Path, help="also write the systems table as CSV")
        parser.add_argument(
            "--bootstrap", default=DEFAULT_RESAMPLES, help=f"resamples (default {DEFAULT_RESAMPLES})"
        )
        parser.add_argument("--seed", default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED})")
        parser.add_argument(
            "--objective", type=Path, help="objective leaderboard CSV 'system,score' to correlate with"
        )
        parser.add_argument(
            "--model",
            choices=["bradley_terry", "davidson"],
            default="bradley_terry",
            help='bradley_terry (docs/protocol.md "Deployment leaderboard", default) or davidson: ties modelled, with its tie parameter, '
            "the same bootstrap and a rank comparison with Bradley–Terry",
        )
        parser.add_argument(
            "--use-human-labels",
            action="store_true",
            help="use h_i instead of p̂ on comparisons with human votes",
        )
        parser.add_argument(
            "--compare-to",
            metavar="ID",
            help="an earlier leaderboard's id: add the version-sensitivity report (candidate updates, paper B.5)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug '{options['slug']}'")
        resamples, seed = check_leaderboard_options(options["bootstrap"], options["seed"])
        json_path = output_path_check(options["json"], option="--json")
        html_path = output_path_check(options["html"], option="--html")
        csv_path = output_path_check(options["csv"], option="--csv")
        coefficient_set = leaderboard_source(
            study=study,
            coefficient_set=None if options["human"] else options["coefficients"],
            compare_to=options["compare_to"],
        )
        objective = (
            objective_read_csv(study=study, path=options["objective"]) if options["objective"] else None
        )
        recorded: list[Leaderboard] = []
        report = leaderboard_compute(
            study=study,
            coefficient_set=coefficient_set,
            resamples=resamples,
            seed=seed,
            use_human_labels=options["use_human_labels"],
            objective=objective,
            model=options["model"],
            compare_to=options["compare_to"],
            record=recorded,
            # On a terminal: the bootstrap in seeded chunks (same result), each reported.
            progress=(lambda f: progress_step("bootstrap", round(100 * f), 100))
            if is_terminal(getattr(self.stderr, "_out", None))
            else None,
        )
        leaderboard_write(
            study=study, report=report, json_path=json_path, html_path=html_path, csv_path=csv_path
        )
        top = report["systems"][0]
        outcomes = (
            f"{report['n_votes']} human votes" if report["outcomes"] == "human votes" else f"{report['n_comparisons']} comparisons"
        )
        self.stdout.write(
            f"{len(report['systems'])} systems ranked ({report['estimator']}) from {outcomes} on "
            f"{report['n_pages']} pages ({report['n_skipped']} skipped); {resamples} resamples, seed {seed}; "
            f"rank 1: {top['system']} ({top['rank1_share']:.0%} of resamples)"
            + (
                f"; Davidson ν = {report['tie_parameter']['value']:.3f}, Spearman with Bradley–Terry "
                f"{report['model_comparison']['spearman']}"
                if report["model"] == "davidson"
                else ""
            )
            + f" -> {json_path}"
        )
        if "render_failures" in report:
            self.stdout.write(render_failures_line(report["render_failures"]))
        if "exclusions" in report:
            self.stdout.write(f"human {'votes' if report['outcomes'] == 'human votes' else 'labels'}: {excluded_line(report['exclusions'])}")
        for line in edge_case_lines(report):
            self.stdout.write(line)
        if "coefficient_set_exclusions" in report:
            self.stdout.write(
                f"coefficient set {report['coefficients']} calibrated on a human reference "
                f"{excluded_line(report['coefficient_set_exclusions'])}"
            )
        outputs = report.get("judge_outputs")
        if outputs is None:
            self.stdout.write(f"leaderboard {recorded[0].pk}: human votes")
        else:
            self.stdout.write(
                f"leaderboard {recorded[0].pk}: {outputs['scoring_outputs']} judge outputs scored, "
                f"{outputs['reused']} reused, {outputs['new']} new"
            )
        if "version_sensitivity" in report:
            vs = report["version_sensitivity"]
            moved = [f"{r['system']} {r['rank_change']:+d}" for r in vs["systems"] if r["rank_change"]]
            self.stdout.write(
                f"against leaderboard {vs['compared_to']['leaderboard']}: {vs['comparisons_touched']} comparisons "
                f"touched ({vs['n_human_comparisons_changed']} of the human study), outputs refreshed "
                f"{vs['outputs']['refreshed']}, retained {vs['outputs']['retained']}, new {vs['outputs']['new']}; "
                f"rank changes: {', '.join(moved) or 'none'}"
            )


def excluded_line(exclusions: dict[str, Any]) -> str:
    """Who the exclusion rules left out of the votes, and why (the leaderboard's header)."""
    how = "the study's saved exclusion rules" + (" (default)" if exclusions.get("applied_by_default") else "")
    out = exclusions.get("excluded_raters") or []
    return (
        f"without {exclusions['n_raters'] - exclusions['n_kept_raters']} of {exclusions['n_raters']} raters "
        f"({exclusions['n_votes'] - exclusions['n_kept_votes']} of {exclusions['n_votes']} votes) by {how}"
        + (": " + ", ".join(f"{r['participant']} ({', '.join(r.get('rules') or [r['rule']])})" for r in out)
           if out else "")
    )


def edge_case_lines(report: dict[str, Any]) -> list[str]:
    """The systems whose score the penalty sets and the pairs with no outcome (docs/protocol.md
    "Scores set by the penalty")."""
    lines = [f"{row['system']}: {row['penalty']}" for row in report["systems"] if row.get("penalty")]
    pairs = report.get("pairs_without_outcomes") or []
    if pairs:
        lines.append("pairs with no vote or outcome: " + ", ".join(f"{a} vs {b}" for a, b in pairs))
    return lines


def render_failures_line(failures: dict[str, Any]) -> str:
    """The rule failed renders followed and each system's failure rate (docs/protocol.md "Failed
    renders in the leaderboard")."""
    rule = failures["rule"]
    how = (
        f"{failures['n_failure_outcomes']} losses of failed outputs added" if rule == "aescode" else "rendered outputs only"
    )
    rates = ", ".join(
        f"{row['system']} {row['failed']}/{row['outputs']} ({row['rate']:.0%})" for row in failures["systems"]
    )
    return f"Render failures: {rule} rule ({how}); failed to render: {rates}"
