"""``export_coefficients SLUG NAME PATH``: write a frozen CoefficientSet as JSON with its provenance
(``import_coefficients`` takes the file back unchanged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotation.errors import NotFound
from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from calibration.services.coefficients import coefficient_set_export


class Command(ArbiterCommand):
    help = "Export a frozen coefficient set (name, coefficients, provenance) as JSON."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("name", help="coefficient set name")
        parser.add_argument("path", type=Path, help="JSON file to write")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug {options['slug']!r}")
        cs = coefficient_set_export(study=study, name=options["name"], path=output_path_check(options["path"]))
        self.stdout.write(f"wrote coefficient set {cs.name!r} of {study.slug} to {options['path']}")
