"""The ``pairwise_reference`` demo (docs/protocol.md "The study model" to "Commands"): drawn pages,
candidates, votes and judges (``demo.service``)."""

from __future__ import annotations

from demo.kinds.base import DemoOptions, KindDemo
from demo.service import DemoStudyResult, demo_counts_lines, demo_study_create

DEFAULT_PAGES = 40
DEFAULT_SYSTEMS = 6


class ReferenceDemo(KindDemo):
    kind = "pairwise_reference"

    @property
    def default_slug(self) -> str:
        return "demo"

    def create(self, options: DemoOptions) -> DemoStudyResult:
        return demo_study_create(
            slug=options.slug,
            seed=options.seed,
            n_pages=DEFAULT_PAGES if options.pages is None else options.pages,
            n_systems=DEFAULT_SYSTEMS if options.systems is None else options.systems,
            votes=options.votes,
            judges=options.judges,
            with_users=options.with_users,
        )

    def counts_lines(self, result: DemoStudyResult) -> list[str]:
        return demo_counts_lines(result)


DEMO = ReferenceDemo()
