"""``export_votes SLUG PATH``: write the study's human votes CSV (SPEC §8, §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.votes_csv import votes_export_csv


class Command(ArbiterCommand):
    help = "Export the study's human votes as a SPEC §8 votes CSV (voided assignments left out)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("path", type=Path, help="CSV file to write")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        n = votes_export_csv(study=study, path=output_path_check(options["path"]))
        self.stdout.write(f"wrote {n} votes to {options['path']}")
