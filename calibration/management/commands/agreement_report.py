"""``agreement_report SLUG --json PATH [--html PATH] [--bootstrap N] [--seed N] [--rules [PATH] |
--no-rules]`` (docs/protocol.md "Human reference and agreement", "Commands", "Report keys").

The study's exclusion rules apply by default once it has saved rules or gold trials (issue 30);
``--rules`` applies them in any case (stored settings, with a JSON file's on top; issue 17), and
``--no-rules`` gives the raw figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.services.agreement import DEFAULT_RESAMPLES, agreement_report_write
from calibration.services.exclusion_rules import exclusions_line, rules_option


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    help = 'Human reference and inter-rater agreement (docs/protocol.md "Human reference and agreement") as JSON, and optionally a self-contained HTML page.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--json", dest="json_path", type=Path, required=True, help="JSON report to write")
        parser.add_argument("--html", dest="html_path", type=Path, default=None, help="HTML report to write")
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=DEFAULT_RESAMPLES,
            help=f"page-block bootstrap resamples (default {DEFAULT_RESAMPLES})",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="bootstrap seed (default: the study's seed)"
        )
        parser.add_argument(
            "--rules",
            dest="rules_path",
            nargs="?",
            const="",
            default=None,
            help="apply the exclusion rules (gold trials, hidden repeats, too fast, straight-lining, position "
            "bias): the study's stored settings, or a JSON file of settings on top. A study with saved rules or "
            "gold trials has them applied by default, without --rules; the report then gains 'exclusions'",
        )
        parser.add_argument(
            "--no-rules", action="store_true",
            help="the raw figures: no exclusion rule, even when the study has saved rules (which apply by default)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        rules, where = rules_option(options["rules_path"])
        report = agreement_report_write(
            study=study,
            json_path=options["json_path"],
            html_path=options["html_path"],
            resamples=options["bootstrap"],
            seed=options["seed"],
            rules=rules,
            rules_where=where,
            raw=options["no_rules"],
        )
        kappa = report["fleiss_kappa"]["value"]
        self.stdout.write(
            f"{study.slug}: {report['n_comparisons']} comparisons, {report['n_valid_annotations']} valid votes, "
            f"Fleiss κ {'n/a' if kappa is None else f'{kappa:.3f}'}; wrote {options['json_path']}"
            + (f" and {options['html_path']}" if options["html_path"] else "")
        )
        if "exclusions" in report:
            self.stdout.write(exclusions_line(report["exclusions"]))
