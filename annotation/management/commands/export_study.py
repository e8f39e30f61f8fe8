"""``export_study SLUG PATH``: write a bundle that ``import_study`` takes back unchanged
(docs/protocol.md "Files", "Commands")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.bundles.exporting import study_export_bundle


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    help = "Export a study as a bundle: PATH ending in .zip writes a ZIP, otherwise a new folder."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path", type=Path, help="target .zip file or (new or empty) folder")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        written = study_export_bundle(study=study, path=options["path"])
        self.stdout.write(str(written))
