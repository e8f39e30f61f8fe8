"""``schedule_blocks SLUG``: blocks, planned assignments and trials
(docs/protocol.md "Planning the human study", "Commands")."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import NotFound, ValidationFailed
from annotation.kinds import design_of
from annotation.management.base import ArbiterCommand
from annotation.models import Study
from annotation.services.adaptive_allocation import study_schedule
from annotation.services.scheduling import (
    DEFAULT_CHECKS,
    default_rater_targets,
    schedulable_count,
    unit_noun,
)


def rater_targets(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValidationFailed(f"expected comma-separated integers like 5,5,4, got {text!r}", field="--raters") from None


class Command(ArbiterCommand):
    help = (
        "Split a study's human comparisons (both candidates rendered) into disjoint blocks and plan every "
        "assignment's trials (order, display side, hidden repeats) from one seed, before anyone starts. "
        "Refused when there are fewer comparisons than blocks × block size, when a repeat cannot be placed "
        "min-gap trials after its original, or when the study already has blocks."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--blocks", type=int, default=8)
        parser.add_argument("--block-size", type=int, default=234)
        parser.add_argument("--repeats", type=int, default=None,
                            help="hidden repeats per assignment (default: the study's, 6 unless a bundle set it)")
        parser.add_argument("--min-gap", type=int, default=None,
                            help="trials between an original and its repeat (default: the study's, 20 unless a bundle set it)")
        parser.add_argument(
            "--raters", default=None,
            help="rater target per block, comma-separated (default 5,5,5,5,5,4,2,2; for a checklist study the "
            "bundle's k per block, for pairwise and rating 3 per block)",
        )
        parser.add_argument(
            "--checks", type=int, default=None,
            help=f"attention checks per assignment (pairwise, checklist, rating; default {DEFAULT_CHECKS})",
        )
        parser.add_argument(
            "--gold", type=int, default=0,
            help="gold trials per assignment (pairwise_reference: the reference against a degraded copy; default 0)",
        )
        parser.add_argument("--seed", type=int, default=None, help="default: the study's seed")
        parser.add_argument(
            "--allocation", choices=["uniform", "adaptive"], default="uniform",
            help="adaptive: these blocks are the uniform start; each later block is built from the current fit "
            "(the pairwise kinds: pairwise_reference and pairwise; docs/protocol.md 'Adaptive allocation and stopping')",
        )
        parser.add_argument("--target-k", type=int, default=3, help="adaptive: the top-k the allocator targets (default 3)")
        parser.add_argument(
            "--adaptation", choices=["serve", "block"], default="serve",
            help="adaptive pairwise_reference: 'serve' chooses each later trial's comparison when the rater reaches "
            "it (default); 'block' builds each later block whole from the fit",
        )

    def run(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise NotFound(f"no study with slug '{options['slug']}'")
        seed = options["seed"] if options["seed"] is not None else study.seed
        repeats = options["repeats"] if options["repeats"] is not None else study.hidden_repeats
        min_gap = options["min_gap"] if options["min_gap"] is not None else study.min_gap
        blocks = study_schedule(
            study=study, blocks=options["blocks"], block_size=options["block_size"], repeats=repeats,
            min_gap=min_gap, seed=seed, checks=options["checks"], gold=options["gold"],
            raters=rater_targets(options["raters"]) if options["raters"] is not None
            else default_rater_targets(study, options["blocks"]),
            allocation=options["allocation"], target_k=options["target_k"], adaptation=options["adaptation"],
        )
        noun = unit_noun(study)
        left_out = schedulable_count(study) - sum(b.items.count() for b in blocks)
        study.refresh_from_db(fields=["options"])
        checks = (study.options or {}).get("attention_checks", 0) if design_of(study).has_attention_checks else 0
        for block in blocks:
            self.stdout.write(
                f"{block.name}: {block.items.count()} {noun}, {block.target_raters} planned assignments, "
                f"{block.items.count() + repeats + checks + options['gold']} trials each"
                + (f" ({options['gold']} gold)" if options["gold"] else "")
            )
        self.stdout.write(f"seed {seed}; {left_out} eligible {noun} left unscheduled")
