"""``judge_ablation SLUG --json PATH [--html PATH] [--bootstrap N] [--seed N]``: the nested
judge-subset ablation (paper B.4; issue 16 part 1): every non-empty subset of the study's judges,
out-of-fold Brier per subset size with page-block intervals, the one-standard-error choice, and
Brier against the estimated cost per comparison with the Pareto front."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.files import output_path_check, write_text_atomic
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.ablation_plots import ablation_html
from calibration.services.ablation import judge_ablation_report
from stats.defaults import ABLATION_RESAMPLES, ABLATION_SEED


class Command(ArbiterCommand):
    help = (
        "Nested judge-subset ablation (paper B.4): which judges are worth paying for. A different "
        'estimator from the frozen OLS proxy (docs/protocol.md "Judges and calibration").'
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--json", type=Path, required=True, help="write the JSON report here")
        parser.add_argument("--html", type=Path, help="also write a self-contained HTML report here")
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=ABLATION_RESAMPLES,
            help=f"page-block resamples (default {ABLATION_RESAMPLES}, as the paper)",
        )
        parser.add_argument("--seed", type=int, default=ABLATION_SEED, help=f"bootstrap seed ({ABLATION_SEED})")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        for flag in ("json", "html"):
            output_path_check(options[flag], option=f"--{flag}")
        report = judge_ablation_report(study=study, resamples=options["bootstrap"], seed=options["seed"])
        text = json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        html = (
            ablation_html(report, title=f"Judge-subset ablation · {study.title}") if options["html"] else None
        )
        write_text_atomic(options["json"], text)
        if html is not None:
            write_text_atomic(options["html"], html)
        chosen = sorted({"+".join(c["judges"]) for c in report["one_se"]["selected"]})
        best = min(report["sizes"], key=lambda s: s["brier"]["value"])
        self.stdout.write(
            f"{study.slug}: {len(report['subsets'])} subsets of {len(report['judges'])} judges on "
            f"{report['n_comparisons']} comparisons, {len(report['outer_folds'])} outer folds; lowest Brier at "
            f"{best['size']} judges ({best['brier']['value']:.4f}); one-SE rule chose {', '.join(chosen)}; "
            f"wrote {options['json']}" + (f" and {options['html']}" if options["html"] else "")
        )
        # A judge left out (no valid output on the human set) is named on the terminal too, not
        # only in the report's warnings: otherwise "3 judges" hides which one is missing and why.
        for dropped in report.get("dropped_judges") or []:
            self.stderr.write(f"judge {dropped['judge']} left out: {dropped['reason']}")
