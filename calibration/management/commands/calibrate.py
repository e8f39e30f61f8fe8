"""``calibrate SLUG --json PATH [--html PATH] [--freeze NAME] [--bootstrap N] [--seed N]
[--pilot-size N] [--judges a,b,c] [--rules [PATH] | --no-rules]``: docs/protocol.md "Judges and calibration"
calibration of a study's judges (report keys docs/protocol.md "Report keys"). ``--rules``: the human reference
from the votes the exclusion rules keep (issue 17).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from annotation.errors import NotFound, ValidationFailed
from annotation.files import output_path_check, write_text_atomic
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.calibration_plots import calibration_html
from calibration.services.calibration import calibration_run
from calibration.services.exclusion_rules import exclusions_line, rules_option
from stats.defaults import CALIBRATION_RESAMPLES, CALIBRATION_SEED


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    help = "Calibrate the study's judges against the human reference (docs/protocol.md \"Judges and calibration\") and optionally freeze the weights."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--json", type=Path, required=True, help="write the JSON report here")
        parser.add_argument("--html", type=Path, help="also write a self-contained HTML report here")
        parser.add_argument(
            "--freeze", metavar="NAME", help="freeze the fitted weights as a CoefficientSet NAME"
        )
        parser.add_argument(
            "--bootstrap", type=int, default=CALIBRATION_RESAMPLES, help="page-block resamples (5000)"
        )
        parser.add_argument("--seed", type=int, default=CALIBRATION_SEED, help=f"bootstrap seed ({CALIBRATION_SEED})")
        parser.add_argument(
            "--pilot-size", type=int, help="committee pilot size (default: the paper's 320/1872 share)"
        )
        parser.add_argument(
            "--judges", help="comma-separated judge names (default: every judge with outputs)"
        )
        parser.add_argument(
            "--rules",
            dest="rules_path",
            nargs="?",
            const="",
            default=None,
            help="apply the exclusion rules (gold trials, hidden repeats, too fast, straight-lining, position "
            "bias) to the human votes first: the study's stored settings, or a JSON file of settings on top. A "
            "study with saved rules or gold trials has them applied by default, without --rules; the report "
            "then gains 'exclusions'",
        )
        parser.add_argument(
            "--no-rules", action="store_true",
            help="the raw figures: no exclusion rule, even when the study has saved rules (which apply by default)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        json_path: Path = options["json"]
        html_path: Path | None = options["html"]
        output_path_check(json_path, option="--json")
        output_path_check(html_path, option="--html")
        judges = None
        if options["judges"] is not None:
            judges = [j.strip() for j in options["judges"].split(",") if j.strip()]
            if not judges:
                raise ValidationFailed("expected comma-separated judge names", field="--judges")
        rules, where = rules_option(options["rules_path"])
        report, _, frozen = calibration_run(
            rules=rules,
            rules_where=where,
            raw=options["no_rules"],
            study=study,
            resamples=options["bootstrap"],
            seed=options["seed"],
            pilot_size=options["pilot_size"],
            judges=judges,
            freeze=options["freeze"],
        )
        write_text_atomic(json_path, json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n")
        if html_path is not None:
            write_text_atomic(html_path, calibration_html(report, title=f"Calibration · {study.title}"))
        brier = report["cv"]["brier"]["value"]
        line = (
            f"calibrated {len(report['judges'])} judges on {report['n_comparisons']} comparisons of {study.slug} "
            f"({report['n_excluded']} left out); out-of-fold Brier "
            + (f"{brier:.4f}" if brier is not None else "n/a")
        )
        if frozen is not None:
            line += f"; frozen as {frozen.name!r}"
        self.stdout.write(line)
        if "exclusions" in report:
            self.stdout.write(exclusions_line(report["exclusions"]))
