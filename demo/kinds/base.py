"""What a demo kind is: ``KindDemo`` (what ``make_demo_study`` asks of every kind) and ``PosterKind``
(what a docs/study-kinds.md "Demo studies" poster kind adds to the shared plan, bundle, truth and simulation).

One module per kind in this package subclasses them (``pairwise_reference``, ``pairwise``,
``checklist``, ``rating``); ``demo.kinds`` is the registry. The shared steps are written once here
(``PosterKind.plan_make``, ``bundle_write``, ``truth``) and in ``demo.kinds.service``; a kind only
fills in its hooks.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from annotation.models import Trial
from demo.kinds.drawing import kind_bundle_write
from demo.kinds.plan import (
    DIMENSIONS,
    SYSTEM_NAMES,
    DemoBrief,
    DemoItem,
    DemoPredicate,
    ItemSlot,
    KindPlan,
    abilities_draw,
    briefs_make,
    item_ids,
)
from demo.kinds.simulation import KindAnswer, KindRater, StudyUnits
from demo.service import DemoStudyResult


@dataclass(frozen=True)
class DemoOptions:
    """What ``make_demo_study`` was asked for (``pages`` / ``systems`` None: the kind's default)."""

    slug: str
    seed: int
    pages: int | None
    systems: int | None
    votes: bool
    judges: bool
    with_users: bool


class KindDemo(ABC):
    """One kind's ``make_demo_study``: create the study, then the summary lines the command prints."""

    kind: str

    @property
    def default_slug(self) -> str:
        return f"demo-{self.kind}"

    @abstractmethod
    def create(self, options: DemoOptions) -> DemoStudyResult: ...

    @abstractmethod
    def counts_lines(self, result: DemoStudyResult) -> list[str]: ...


class PosterKind(ABC):
    """A docs/study-kinds.md "Demo studies" kind of the poster demos: its sizes, instructions and the hooks
    below."""

    kind: str
    default_sizes: tuple[int, int]  # (briefs, systems)
    brief_limits: tuple[int, int]
    system_limits: tuple[int, int]
    instructions: str
    units_word: str  # what a block is made of, in the summary ("comparisons", ...)
    ability_spread: float | None = None  # systems' abilities in [-spread, spread]; None: no abilities
    blank_brief_every: int = 0  # every k-th brief has no text (the image is shown alone)
    screens_out_one: bool = False  # one extra participant fails the comprehension check twice

    # --- the plan (pure) ---

    @abstractmethod
    def item_make(self, slot: ItemSlot, rng: random.Random) -> DemoItem: ...

    def predicates_make(
        self, *, brief: DemoBrief, item: DemoItem, start: int, rng: random.Random
    ) -> list[DemoPredicate]:
        return []

    def plan_make(
        self, *, slug: str, seed: int = 1, n_briefs: int | None = None, n_systems: int | None = None
    ) -> KindPlan:
        """Everything a demo of this kind contains, decided from ``seed`` (deterministic)."""
        kind = self.kind
        default_briefs, default_systems = self.default_sizes
        n_briefs = default_briefs if n_briefs is None else n_briefs
        n_systems = default_systems if n_systems is None else n_systems
        low, high = self.brief_limits
        if not low <= n_briefs <= high:
            raise ValueError(
                f"--pages (briefs) must be between {low} and {high} for a {kind} demo, got {n_briefs}"
            )
        low, high = self.system_limits
        if not low <= n_systems <= high:
            what = f"exactly {low}" if low == high else f"between {low} and {high}"
            raise ValueError(f"--systems must be {what} for a {kind} demo, got {n_systems}")
        rng = random.Random(f"arbiter-demo-{kind}:{seed}")
        systems = SYSTEM_NAMES[:n_systems]
        system_ids = [s for s, _ in systems]
        briefs = briefs_make(n_briefs, rng, blank_every=self.blank_brief_every)
        spread = self.ability_spread
        abilities = abilities_draw(system_ids, spread, rng) if spread is not None else {}
        items: list[DemoItem] = []
        predicates: list[DemoPredicate] = []
        for brief in briefs:
            # A brief effect shared by its items (rating): some briefs are simply harder.
            brief_effect = {d: rng.gauss(0.0, 0.35) for d in DIMENSIONS}
            for item_id, system in item_ids(brief, system_ids, rng):
                slot = ItemSlot(brief, item_id, system, system_ids, abilities, brief_effect)
                item = self.item_make(slot, rng)
                items.append(item)
                predicates.extend(
                    self.predicates_make(brief=brief, item=item, start=len(predicates) + 1, rng=rng)
                )
        return KindPlan(
            kind=kind,
            slug=slug,
            title=f"Demo: event posters ({kind}, seed {seed})",
            seed=seed,
            systems=tuple(systems),
            abilities=abilities,
            briefs=briefs,
            items=tuple(items),
            predicates=tuple(predicates),
        )

    # --- the bundle and the truth (pure) ---

    def bundle_section(self, plan: KindPlan) -> dict[str, Any]:
        """The kind's part of ``study.json`` after the items (predicates, options)."""
        return {}

    def bundle_write(self, plan: KindPlan, folder: Path) -> Path:
        return kind_bundle_write(
            plan, folder, instructions=self.instructions, section=self.bundle_section(plan)
        )

    def truth_section(self, plan: KindPlan) -> dict[str, Any]:
        """What the simulation knows of this kind beyond the raters."""
        return {}

    def truth(
        self, plan: KindPlan, raters: tuple[KindRater, ...], screened: tuple[KindRater, ...]
    ) -> dict[str, Any]:
        """What the simulation knows, for ``Study.options["demo"]`` (checks of later analyses)."""
        truth: dict[str, Any] = {
            "kind": plan.kind,
            "seed": plan.seed,
            "raters": {
                r.id: {
                    "careless": r.careless,
                    "median_ms": r.median_ms,
                    "noise": r.noise,
                    "tie_band": r.tie_band,
                    "accuracy": r.accuracy,
                    "unclear_rate": r.unclear_rate,
                    "bias": r.bias,
                    "comprehension_attempts": r.comprehension_attempts,
                }
                for r in raters
            },
            "careless": [r.id for r in raters if r.careless],
            "screened_out": [r.id for r in screened],
        }
        truth.update(self.truth_section(plan))
        return truth

    # --- the simulated participants ---

    @abstractmethod
    def fresh_answer(
        self, *, rater: KindRater, trial: Trial, units: StudyUnits, rng: random.Random
    ) -> KindAnswer:
        """The rater's own answer to the trial's unit (no repeat, no attention check)."""

    @abstractmethod
    def attention_answer(
        self, *, rater: KindRater, expected: str, habit: KindAnswer, fail: bool, rng: random.Random
    ) -> KindAnswer:
        """The answer to an instructed-response check: as instructed, or (``fail``) the rater's habit."""

    def made_line(self, counts: dict[str, int]) -> str:
        """The summary's end of the "briefs: …, systems: …, items: …" line."""
        return ""
