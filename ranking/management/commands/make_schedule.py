"""``make_schedule SLUG --comparisons N [--seed N] [--replace]``: docs/protocol.md "Deployment leaderboard"
deployment comparisons (docs/protocol.md "Commands")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from ranking.leaderboard import DEFAULT_SEED
from ranking.schedule import deployment_schedule_create


class Command(ArbiterCommand):
    # No system checks: they import every URLconf and view (matplotlib, statsmodels, ...), which
    # would cost seconds at every start of a data command; `manage.py check` runs them.
    requires_system_checks: list[str] = []
    help = (
        'Create the deployment comparisons of a study (docs/protocol.md "Deployment leaderboard"): N comparisons in total, the human-study '
        "ones kept and counted, on pages where both systems rendered, pair counts and system appearances "
        "balanced to within one, seeded. Refused when deployment comparisons exist, unless --replace and "
        "none of them has judge outputs or trials."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--comparisons", required=True, help="N: total comparisons, human-study ones included"
        )
        parser.add_argument("--seed", default=DEFAULT_SEED, help=f"schedule seed (default {DEFAULT_SEED})")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="replace existing deployment comparisons (only while none has judge outputs or trials)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug '{options['slug']}'")
        outcome = deployment_schedule_create(
            study=study, comparisons=options["comparisons"], seed=options["seed"], replace=options["replace"]
        )
        for line in outcome.lines():
            self.stdout.write(line)
