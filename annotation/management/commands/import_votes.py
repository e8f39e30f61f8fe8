"""``import_votes SLUG PATH``: import a human votes CSV (docs/protocol.md "Files", "Commands"); all rows or
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.votes_csv import votes_import_csv


class Command(ArbiterCommand):
    help = 'Import a human votes CSV (docs/protocol.md "Files"); creates missing blocks, raters, assignments and trials.'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("path", type=Path, help="votes CSV file")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        result = votes_import_csv(study=study, path=options["path"])
        self.stdout.write(
            f"imported {result.rows} votes ({result.main_votes} main, {result.repeat_votes} hidden repeats) into "
            f"{study.slug}: {result.blocks_created} blocks, {result.raters_created} raters, "
            f"{result.assignments_created} assignments created"
        )
