"""``judge_disagreement SLUG --judge NAME --json PATH [--no-rules]`` (docs/protocol.md "The disagreement
lens", "Commands"): the lens of one judge as JSON, the object the REST endpoint answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.services.lens import disagreement_report_write


class Command(ArbiterCommand):
    help = 'Where a judge and the people disagree (docs/protocol.md "The disagreement lens") as JSON.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--judge", required=True, help="the judge's name")
        parser.add_argument("--json", dest="json_path", type=Path, required=True, help="JSON report to write")
        parser.add_argument(
            "--no-rules",
            action="store_true",
            help="every vote: no exclusion rule, even when the study has saved rules (which apply by default)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        report = disagreement_report_write(
            study=study, judge=options["judge"], json_path=options["json_path"], raw=options["no_rules"]
        )
        if "position" not in report:  # a checklist judge: per question
            agreement = report["agreement"]
            self.stdout.write(
                f"{study.slug}, judge {report['judge']}: agrees with the human majority on {agreement['agree']} of "
                f"{agreement['n']} questions; {len(report['drilldown'])} questions in the drill-down; "
                f"wrote {options['json_path']}"
            )
            for step in report["next_steps"]:
                self.stdout.write(step)
            return
        position = report["position"]
        agreement = report["agreement"]["judge_vs_majority"]["with_ties"]
        value = agreement["value"]
        self.stdout.write(
            f"{study.slug}, judge {report['judge']}: {position['n_cases']} both-order cases "
            f"({position['counts']['consistent']} consistent, {position['counts']['biased_first']} biased toward the "
            f"first, {position['counts']['biased_second']} toward the second, {position['counts']['error']} errors); "
            f"agreement with the human majority {'n/a' if value is None else f'{value:.3f}'} "
            f"({agreement['agree']}/{agreement['n']}); {len(report['drilldown'])} comparisons in the drill-down; "
            f"wrote {options['json_path']}"
        )
        for step in report["next_steps"]:
            self.stdout.write(step)
