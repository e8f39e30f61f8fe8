"""``study_link SLUG``: print the participant URL of a study
(docs/protocol.md "Planning the human study", "Commands")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.participants import study_link_url


class Command(ArbiterCommand):
    help = (
        "Print the participant URL of a study (origin: ARBITER_PUBLIC_URL, else --origin, else "
        "ARBITER_SERVE_ORIGIN, else http://127.0.0.1:8000). "
        "Crowd platforms append ?participant=<id> or Prolific's ?PROLIFIC_PID=…&STUDY_ID=…&SESSION_ID=…"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--origin", default="", help="the serving origin, e.g. http://127.0.0.1:8101")

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug '{options['slug']}'")
        self.stdout.write(study_link_url(study=study, origin=options["origin"]))
