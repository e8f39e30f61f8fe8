"""``import_study PATH``: import a study bundle (SPEC §8, §9); prints the slug."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from annotation.services.bundles import study_import_bundle


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    help = "Import a study bundle (a folder or a .zip with study.json and images); prints the slug."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="bundle folder or .zip file")

    def run(self, *args: Any, **options: Any) -> None:
        study = study_import_bundle(path=options["path"])
        self.stdout.write(study.slug)
