"""``make_demo_study [--slug S] [--seed N] [--pages N] [--systems N] [--no-votes] [--no-judges] [--with-users]``.

A synthetic study for demos and tests (SPEC §9): drawn pages, systems of known ability, failed
renders, two blocks answered by simulated raters (one open slot left in each), and simulated
judges' replies. Deterministic in ``--seed``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from demo.service import demo_counts_lines, demo_study_create


class Command(ArbiterCommand):
    help = "Create a synthetic demo study (images, simulated raters' votes, simulated judge outputs)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", default="demo", help="slug of the new study (default: demo)")
        parser.add_argument("--seed", type=int, default=1, help="random seed; the same seed gives the same study")
        parser.add_argument("--pages", type=int, default=40, help="number of pages, at least 4 (default 40)")
        parser.add_argument("--systems", type=int, default=6, help="number of systems, 2–10 (default 6)")
        parser.add_argument("--no-votes", action="store_true", help="schedule blocks but simulate no raters")
        parser.add_argument("--no-judges", action="store_true", help="import no simulated judge outputs")
        parser.add_argument(
            "--with-users",
            action="store_true",
            help="create or reset the demo researcher login (password: $ARBITER_DEMO_PASSWORD or a new one)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        result = demo_study_create(
            slug=options["slug"],
            seed=options["seed"],
            n_pages=options["pages"],
            n_systems=options["systems"],
            votes=not options["no_votes"],
            judges=not options["no_judges"],
            with_users=options["with_users"],
        )
        for line in demo_counts_lines(result):
            self.stdout.write(line)
