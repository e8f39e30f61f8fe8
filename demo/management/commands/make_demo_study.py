"""``make_demo_study [--kind K] [--slug S] [--seed N] [--pages N] [--systems N] [--no-votes] [--no-judges] [--with-users]``.

A synthetic study for demos and tests (docs/protocol.md "Commands"). The default kind, ``pairwise_reference``:
drawn pages, systems of known ability, failed renders, two blocks answered by simulated raters (one open
slot left in each), and simulated judges' replies. ``--kind pairwise|checklist|rating`` builds a
docs/study-kinds.md "Demo studies" questionnaire study of drawn posters instead (``demo.kinds``, one module
per kind): two blocks with attention checks, simulated participants who pass the comprehension check and
answer every trial, one open slot per block. Deterministic in ``--seed``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from demo.kinds import DEMOS, POSTER_KINDS, demo_of
from demo.kinds.base import DemoOptions
from demo.kinds.pairwise_reference import DEMO as REFERENCE


class Command(ArbiterCommand):
    shows_progress = True  # the stage and its time on a terminal's stderr (`make run` builds four demos)
    help = (
        "Create a synthetic demo study of one kind (images, simulated raters' votes; simulated judge outputs "
        "for pairwise_reference)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--kind",
            choices=tuple(DEMOS),
            default=REFERENCE.kind,
            help="study kind (default pairwise_reference: reference pages, candidates and judges)",
        )
        parser.add_argument(
            "--slug",
            default=None,
            help="slug of the new study (default: demo, or demo-<kind> for the other kinds)",
        )
        parser.add_argument(
            "--seed", type=int, default=1, help="random seed; the same seed gives the same study"
        )
        sizes = ", ".join(f"{k} {poster.default_sizes[0]}" for k, poster in POSTER_KINDS.items())
        parser.add_argument(
            "--pages",
            type=int,
            default=None,
            help=f"pairwise_reference: number of pages, at least 4 (default 40); other kinds: number of briefs "
            f"(default {sizes})",
        )
        parser.add_argument(
            "--systems",
            type=int,
            default=None,
            help="pairwise_reference: number of systems, 2–10 (default 6); pairwise: 2–6 (default 4); "
            "checklist: 1–6 (default 2); rating: 2",
        )
        parser.add_argument("--no-votes", action="store_true", help="schedule blocks but simulate no raters")
        parser.add_argument(
            "--no-judges",
            action="store_true",
            help="import no simulated judge outputs (the other kinds have none)",
        )
        parser.add_argument(
            "--with-users",
            action="store_true",
            help="create or reset the demo researcher login (password: $ARBITER_DEMO_PASSWORD or a new one)",
        )

    def run(self, *args: Any, **options: Any) -> None:
        demo = demo_of(options["kind"])
        result = demo.create(
            DemoOptions(
                slug=options["slug"] or demo.default_slug,
                seed=options["seed"],
                pages=options["pages"],
                systems=options["systems"],
                votes=not options["no_votes"],
                judges=not options["no_judges"],
                with_users=options["with_users"],
            )
        )
        for line in demo.counts_lines(result):
            self.stdout.write(line)
