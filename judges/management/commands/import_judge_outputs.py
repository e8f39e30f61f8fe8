"""``import_judge_outputs SLUG PATH`` (docs/protocol.md "Files", "Commands"): validate and canonicalize each
raw reply; all-or-nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from judges.management.commands._common import study_by_slug
from judges.services.outputs import judge_outputs_import_jsonl


class Command(ArbiterCommand):
    help = "Import judge outputs (JSONL) into a study."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("path")

    def run(self, *args: Any, **o: Any) -> None:
        counts = judge_outputs_import_jsonl(study=study_by_slug(o["slug"]), path=Path(o["path"]))
        self.stdout.write(
            f"imported {counts['created']} judge outputs: {counts['valid']} valid, {counts['invalid']} invalid, "
            f"{counts['failed']} failed ({counts['judges_created']} new judges)"
        )
