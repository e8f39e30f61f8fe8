"""``rule_score SLUG [--json PATH] [--bootstrap N] [--seed N]``, or with no study ``rule_score --requirements
FILE --system NAME=FOLDER ... [--json PATH]`` over ``render_pages`` output folders (docs/protocol.md "AesCode's
rule score")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound, ValidationFailed
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from kind_reports.rule import DEFAULT_RESAMPLES, rule_score_folders, rule_score_write


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
        parser.add_argument(
            "slug", nargs="?", default=None, help="study slug (or --requirements and --system)"
        )
        parser.add_argument(
            "--requirements",
            type=Path,
            default=None,
            help="no study: JSON {page: requirements}, scored against render_pages' <page>.json in each --system folder",
        )
        parser.add_argument(
            "--system",
            action="append",
            default=[],
            metavar="NAME=FOLDER",
            help="no study: a system's render_pages output folder",
        )
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
        if options["slug"] is None:
            report = self._folders(options)
        else:
            if options["requirements"] is not None or options["system"]:
                raise ValidationFailed(
                    "give a study's slug or --requirements with --system folders, not both", where="slug"
                )
            study = Study.objects.filter(slug=options["slug"]).first()
            if study is None:
                raise NotFound(f"no study with slug {options['slug']!r}")
            report = rule_score_write(
                study=study,
                json_path=options["json_path"],
                resamples=options["bootstrap"],
                seed=options["seed"],
            )
        self._print(report, options)

    def _folders(self, options: dict[str, Any]) -> dict[str, Any]:
        if options["requirements"] is None:
            raise ValidationFailed(
                "give a study's slug, or --requirements FILE with --system NAME=FOLDER", where="slug"
            )
        systems = []
        for value in options["system"]:
            name, sep, folder = str(value).partition("=")
            if not sep or not name.strip() or not folder.strip():
                raise ValidationFailed(f"expected NAME=FOLDER, got {value[:80]!r}", where="--system")
            systems.append((name.strip(), Path(folder)))
        return rule_score_folders(
            systems=systems,
            requirements_path=options["requirements"],
            json_path=options["json_path"],
            resamples=options["bootstrap"],
            seed=options["seed"] if options["seed"] is not None else 0,
        )

    def _print(self, report: dict[str, Any], options: dict[str, Any]) -> None:
        self.stdout.write(
            f"{report['study'] or 'folders'}: {report['n_outputs']} outputs of {report['n_briefs']} briefs scored "
            f"({report['bootstrap']['resamples']:,} brief-bootstrap resamples, 95% intervals)"
        )
        for system in report["systems"]:
            cells = "; ".join(f"{m} {_cell(system[m])}" for m in report["measures"])
            self.stdout.write(f"  {system['system']} ({system['outputs']} outputs): {cells}")
        if options["json_path"]:
            self.stdout.write(f"wrote {options['json_path']}")
