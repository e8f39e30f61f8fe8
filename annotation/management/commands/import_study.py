"""``import_study PATH [--update]``: import a study bundle (docs/protocol.md "Files", "Commands"); prints the
slug.

``--update``: the bundle's study exists; replace the candidates that changed (paper B.5,
``annotation.services.bundles.update``) and print what was replaced and superseded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand, researcher_option
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.bundles.update import study_update_bundle


class Command(ArbiterCommand):
    shows_progress = True  # stage and count on a terminal's stderr; quiet otherwise
    help = "Import a study bundle (a folder or a .zip with study.json and images); prints the slug."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="bundle folder or .zip file")
        parser.add_argument(
            "--researcher", metavar="USERNAME", help="an account to make the study's researcher (sees it on the web and in the API)"
        )
        parser.add_argument(
            "--update",
            action="store_true",
            help="replace the changed candidates of the existing study (everything else must be unchanged)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        if options["update"]:
            self.stdout.write(study_update_bundle(path=options["path"]).summary())
            return
        study = study_import_bundle(path=options["path"], user=researcher_option(options["researcher"]))
        self.stdout.write(study.slug)
