"""``rule_score SLUG [--json PATH] [--bootstrap N] [--seed N]`` (docs/protocol.md "AesCode's rule score")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from kind_reports.rule import DEFAULT_RESAMPLES, rule_score_write


def _cell(measure: dict[str, Any]) -> str:
    if measure["mean"] is None:
        return "—"
    low, high = measure["ci"]
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{measure['mean']:.3f}{interval} n={measure['n']}"


class Command(ArbiterCommand):
    help = (
        "AesCode's rule score of a study (docs/protocol.md \"AesCode's rule score\"): per system Rule and its "
        "Text, Boundary, Table and Chart channels with brief-bootstrap intervals; --json also lists every output."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--json", dest="json_path", type=Path, default=None, help="JSON report to write")
        parser.add_argument(
            "--bootstrap",
            type=int,
            default=DEFAULT_RESAMPLES,
            help=f"brief-cluster bootstrap resamples (default {DEFAULT_RESAMPLES})",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="bootstrap seed (default: the study's seed)"
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        report = rule_score_write(
            study=study, json_path=options["json_path"], resamples=options["bootstrap"], seed=options["seed"]
        )
        self.stdout.write(
            f"{study.slug}: {report['n_outputs']} outputs of {report['n_briefs']} briefs scored "
            f"({report['bootstrap']['resamples']:,} brief-bootstrap resamples, 95% intervals)"
        )
        for system in report["systems"]:
            cells = "; ".join(f"{m} {_cell(system[m])}" for m in report["measures"])
            self.stdout.write(f"  {system['system']} ({system['outputs']} outputs): {cells}")
        if options["json_path"]:
            self.stdout.write(f"wrote {options['json_path']}")
