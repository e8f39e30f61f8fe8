"""``export_judge_outputs SLUG PATH`` (docs/protocol.md "Files", "Commands"): finished outputs as JSONL,
importable again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.files import output_path_check
from annotation.management.base import ArbiterCommand
from judges.management.commands._common import study_by_slug
from judges.services.outputs import judge_outputs_export_jsonl


class Command(ArbiterCommand):
    help = "Export a study's judge outputs as JSONL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path")

    def run(self, *args: Any, **o: Any) -> None:
        n = judge_outputs_export_jsonl(study=study_by_slug(o["slug"]), path=output_path_check(o["path"]))
        self.stdout.write(f"exported {n} judge outputs")
