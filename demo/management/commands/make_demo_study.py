"""``make_demo_study [--kind K] [--slug S] [--seed N] [--pages N] [--systems N] [--no-votes] [--no-judges] [--with-users]``.

A synthetic study for demos and tests (SPEC §9). The default kind, ``pairwise_reference``: drawn
pages, systems of known ability, failed renders, two blocks answered by simulated raters (one open
slot left in each), and simulated judges' replies. ``--kind pairwise|checklist|rating`` builds a
SPEC §11 questionnaire study of drawn posters instead (``demo.kinds``): two blocks with attention
checks, simulated participants who pass the comprehension check and answer every trial, one open
slot per block. Deterministic in ``--seed``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from demo.kinds import DEFAULT_SIZES, KINDS, kind_demo_create
from demo.service import demo_counts_lines, demo_study_create

REFERENCE = "pairwise_reference"


class Command(ArbiterCommand):
    help = (
        "Create a synthetic demo study of one kind (images, simulated raters' votes; simulated judge outputs "
        "for pairwise_reference)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--kind",
            choices=(REFERENCE, *KINDS),
            default=REFERENCE,
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
        sizes = ", ".join(f"{k} {b}" for k, (b, _) in DEFAULT_SIZES.items())
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
        kind = options["kind"]
        if kind == REFERENCE:
            result = demo_study_create(
                slug=options["slug"] or "demo",
                seed=options["seed"],
                n_pages=40 if options["pages"] is None else options["pages"],
                n_systems=6 if options["systems"] is None else options["systems"],
                votes=not options["no_votes"],
                judges=not options["no_judges"],
                with_users=options["with_users"],
            )
        else:
            result = kind_demo_create(
                kind=kind,
                slug=options["slug"] or f"demo-{kind}",
                seed=options["seed"],
                n_briefs=options["pages"],
                n_systems=options["systems"],
                votes=not options["no_votes"],
                with_users=options["with_users"],
            )
        for line in demo_counts_lines(result):
            self.stdout.write(line)
