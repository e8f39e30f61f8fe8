"""``import_coefficients SLUG PATH [--name NAME]``: freeze an imported CoefficientSet
(docs/protocol.md "Commands") from ``{"name": ..., "coefficients": {judge: beta}}`` (an
``export_coefficients`` file too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.services.coefficients import coefficient_set_import


class Command(ArbiterCommand):
    help = 'Import a frozen coefficient set from {"name": ..., "coefficients": {judge: beta}} (docs/protocol.md "Commands").'

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("path", type=Path, help="JSON file")
        parser.add_argument("--name", help="freeze under this name instead of the file's")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        cs = coefficient_set_import(study=study, path=options["path"], name=options["name"])
        self.stdout.write(
            f"imported coefficient set {cs.name!r} ({len(cs.coefficients)} judges) into {study.slug}"
        )
