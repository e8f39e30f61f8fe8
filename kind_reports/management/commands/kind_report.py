"""``kind_report SLUG --json PATH [--html PATH] [--bootstrap N] [--seed N] [--systems X,Y] [--rules PATH]``
(docs/study-kinds.md "The kind report")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from kind_reports.services import DEFAULT_RESAMPLES, kind_report_write


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    help = (
        "Report of a pairwise, checklist or rating study (docs/study-kinds.md \"The kind report\"): exclusion rules, the kind's analysis "
        "and inter-rater agreement on the kept answers, as JSON and optionally a self-contained HTML page."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--json", dest="json_path", type=Path, required=True, help="JSON report to write")
        parser.add_argument("--html", dest="html_path", type=Path, default=None, help="HTML report to write")
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=DEFAULT_RESAMPLES,
            help=f"brief-cluster bootstrap resamples (default {DEFAULT_RESAMPLES})",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="bootstrap seed (default: the study's seed)"
        )
        parser.add_argument(
            "--systems",
            default=None,
            help="rating studies: the two system ids compared, A,B (default: the first two systems)",
        )
        parser.add_argument(
            "--rules",
            dest="rules_path",
            type=Path,
            default=None,
            help="JSON object of exclusion-rule settings overriding the study's options.exclusion_rules",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        report = kind_report_write(
            study=study,
            json_path=options["json_path"],
            html_path=options["html_path"],
            resamples=options["bootstrap"],
            seed=options["seed"],
            systems=options["systems"],
            rules_path=options["rules_path"],
        )
        h = report["hygiene"]
        self.stdout.write(
            f"{study.slug} ({report['kind']}): {h['kept_answers']} of {h['n_answers']} answers kept from "
            f"{h['kept_participants']} of {h['n_participants']} participants; wrote {options['json_path']}"
            + (f" and {options['html_path']}" if options["html_path"] else "")
        )
