"""``export_schedule SLUG PATH``: the full plan as CSV (every trial of every assignment, with seeds)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound
from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.scheduling import schedule_export_csv


class Command(ArbiterCommand):
    help = "Write a study's schedule (blocks, assignments, trials, seeds) as CSV."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug '{options['slug']}'")
        rows = schedule_export_csv(study=study, path=output_path_check(options["path"]))
        self.stdout.write(f"{rows} trials written to {options['path']}")
