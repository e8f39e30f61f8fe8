"""``export_votes SLUG PATH [--gold GOLD_PATH]``: write the study's human votes CSV
(docs/protocol.md "Files", "Commands") and, with ``--gold``, its gold answers CSV
(docs/protocol.md "Files")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.votes_csv import gold_export_csv, votes_export_csv


class Command(ArbiterCommand):
    help = "Export the study's human votes as a votes CSV (docs/protocol.md \"Files\"; voided assignments left out)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("path", type=Path, help="CSV file to write")
        parser.add_argument(
            "--gold", type=Path, metavar="GOLD_PATH",
            help="also write the gold trials' answers (rater, expected, given, correct) to this CSV",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        gold_path = output_path_check(options["gold"]) if options["gold"] is not None else None
        n = votes_export_csv(study=study, path=output_path_check(options["path"]))
        self.stdout.write(f"wrote {n} votes to {options['path']}")
        if gold_path is not None:
            g = gold_export_csv(study=study, path=gold_path)
            self.stdout.write(f"wrote {g} gold answers to {options['gold']}")
