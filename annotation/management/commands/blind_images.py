"""``blind_images [SLUG ...]``: rebuild the shown images of stored studies (SECURITY.md row 16)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.display_images import study_images_blind


class Command(ArbiterCommand):
    help = (
        "Rebuild what raters and judges see of every page and candidate (8-bit RGB on white, scaled to "
        "the page reference's width) from the stored originals. All studies when no slug is given. "
        "Idempotent; migration 0006 runs it once for studies that existed before."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*")

    def run(self, *args: Any, **options: Any) -> None:
        slugs = options["slugs"]
        studies = list(Study.objects.filter(slug__in=slugs)) if slugs else list(Study.objects.order_by("slug"))
        missing = sorted(set(slugs) - {s.slug for s in studies})
        if missing:
            raise NotFound(f"no study with slug '{missing[0]}'")
        for study in studies:
            result = study_images_blind(study=study)
            self.stdout.write(f"{study.slug}: {result.holders} images, {result.changed} changed")
