"""``copy_media SLUG... | --all --to s3|local``: copy studies' images between the media folder and the bucket."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import ArbiterError, NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.media_copy import study_media_copy


class Command(ArbiterCommand):
    shows_progress = True
    help = ("Copy studies' stored images to the bucket (--to s3) or the media folder (--to local) from the other, "
            "reading every object back and checking its size and SHA-256.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", help="studies to copy (or --all)")
        parser.add_argument("--all", action="store_true", help="every study")
        parser.add_argument("--to", required=True, choices=["s3", "local"])

    def run(self, *args: Any, **options: Any) -> None:
        slugs: list[str] = options["slugs"]
        if options["all"] == bool(slugs):
            raise ArbiterError("name the studies to copy, or --all (not both)")
        studies = list(Study.objects.order_by("pk")) if options["all"] else list(Study.objects.filter(slug__in=slugs))
        missing = sorted(set(slugs) - {s.slug for s in studies})
        if missing:
            raise NotFound(f"no study with slug {missing[0]!r}")
        result = study_media_copy(studies=studies, to=options["to"])
        self.stdout.write(
            f"{result.objects} images: {result.copied} copied, {result.present} already there, "
            f"{result.checked} checked (size and SHA-256) in {options['to']}"
        )
