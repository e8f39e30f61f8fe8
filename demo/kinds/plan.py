"""What a poster demo contains (pure): briefs, poster looks, items, predicates, the plan.

Every kind's plan is drawn the same way from ``seed`` (``PosterKind.plan_make`` in
``demo.kinds.base``): briefs, then the systems' abilities, then per brief its items in a shuffled
order. A poster's look (palette, where the headline sits, how readable it is, the main shape and
its side, the date line, the ticket button, clutter) is drawn from two latent scores — how good it
looks and how faithful to the brief it is — so every answer the simulated raters give can be
checked against a known truth. No system id or name is written in a brief or an item id.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from annotation.kinds import design_of

POSTER_WIDTH = 480
POSTER_HEIGHT = 360
# The rating dimensions. Every kind draws a brief effect on them (two draws per brief), so the
# plans of the other kinds depend on this too.
DIMENSIONS = ("aesthetics", "brief_fidelity")
QUALITY_NOISE = 0.35  # sd of an item's quality around its system's ability (pairwise, checklist)

SYSTEM_NAMES = (
    ("aurora", "Aurora Poster Agent"),
    ("basalt", "Basalt Design 7B"),
    ("cinder", "Cinder Canvas"),
    ("dahlia", "Dahlia Layout Pro"),
    ("eskar", "Eskar Graphic 2"),
    ("fennel", "Fennel Visual Mini"),
)
EVENTS = (
    "Jazz Festival",
    "Book Fair",
    "Farmers Market",
    "Film Night",
    "Charity Run",
    "Science Talk",
    "Street Food Week",
    "Chess Open",
    "Pottery Class",
    "Choir Concert",
    "Comedy Night",
    "Flea Market",
    "Poetry Slam",
    "Tango Evening",
    "Robotics Fair",
    "Garden Tour",
    "Photo Walk",
    "Kite Festival",
    "Quiz Night",
    "Cider Tasting",
)
PLACES = (
    "Riverside Park",
    "the Old Library",
    "Market Square",
    "the Town Hall",
    "Harbour Pier",
    "the Community Centre",
    "Hill Street",
    "the Botanical Garden",
    "Station Yard",
    "the Art School",
)
DAYS = ("Sat 14 June", "Fri 3 May", "Sun 21 Sept", "Thu 9 Oct", "Sat 2 Aug", "Wed 18 March")


@dataclass(frozen=True)
class DemoBrief:
    id: str
    event: str
    place: str
    day: str
    warm: bool  # the brief asks for warm colours (else cool)
    text: str


@dataclass(frozen=True)
class PosterLook:
    """What one poster shows; :func:`poster_draw` draws exactly this."""

    warm: bool
    headline_top: bool
    headline_dx: int
    contrast: float  # 0 (headline invisible) … 1 (dark on light)
    shape: str  # "circle" | "square"
    shape_right: bool
    date_shown: bool
    button_shown: bool
    clutter: int
    tint: int
    seed: int


@dataclass(frozen=True)
class DemoItem:
    id: str
    brief: str
    system: str
    look: PosterLook
    quality: float = 0.0  # pairwise / checklist latent quality (logits)
    latent: dict[str, float] = field(default_factory=dict)  # rating: latent score per dimension
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoPredicate:
    id: str
    item: str
    question: str
    type: str
    boxes: tuple[tuple[int, int, int, int], ...]
    truth: str  # YES | NO
    automatic: str  # YES | NO | UNCLEAR
    borderline: bool  # hard to tell from the image: raters answer Unclear more often
    topic: str  # which question of the bank (evidence notes)


@dataclass(frozen=True)
class KindPlan:
    kind: str
    slug: str
    title: str
    seed: int
    systems: tuple[tuple[str, str], ...]
    abilities: dict[str, float]
    briefs: tuple[DemoBrief, ...]
    items: tuple[DemoItem, ...]
    predicates: tuple[DemoPredicate, ...] = ()

    def item(self, item_id: str) -> DemoItem:
        return self._items()[item_id]

    def _items(self) -> dict[str, DemoItem]:
        return {i.id: i for i in self.items}

    def n_comparisons(self) -> int:
        per_brief: dict[str, int] = {}
        for item in self.items:
            per_brief[item.brief] = per_brief.get(item.brief, 0) + 1
        return sum(n * (n - 1) // 2 for n in per_brief.values()) if design_of(self.kind).pairwise else 0


@dataclass(frozen=True)
class ItemSlot:
    """Where an item of the plan goes: its brief, id and system, with what the plan drew before it."""

    brief: DemoBrief
    item_id: str
    system: str
    systems: list[str]
    abilities: dict[str, float]
    brief_effect: dict[str, float]  # per rating dimension: some briefs are simply harder


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def briefs_make(n: int, rng: random.Random, *, blank_every: int = 0) -> tuple[DemoBrief, ...]:
    """``n`` event briefs; with ``blank_every`` = k, every k-th brief's text is empty (image shown alone)."""
    events = list(EVENTS)
    rng.shuffle(events)
    briefs = []
    for k in range(n):
        event = events[k % len(events)] + (f" {k // len(events) + 1}" if k >= len(events) else "")
        place, day, warm = rng.choice(PLACES), rng.choice(DAYS), rng.random() < 0.5
        colours = "warm" if warm else "cool"
        text = (
            f"A poster for the {event} at {place} on {day}, in {colours} colours, "
            "showing the date and a ticket button."
        )
        if blank_every and k % blank_every == blank_every - 1:
            text = ""
        briefs.append(DemoBrief(id=f"b{k + 1:02d}", event=event, place=place, day=day, warm=warm, text=text))
    return tuple(briefs)


def look_sample(brief: DemoBrief, *, aesthetics: float, fidelity: float, rng: random.Random) -> PosterLook:
    """A poster's look from its latent scores (logits, 0 = average): better scores, fewer faults.

    ``aesthetics`` drives readability, headline placement, alignment and clutter; ``fidelity``
    drives what the brief asks for (its colours, the date, the ticket button).
    """

    def good(base: float, x: float) -> bool:
        return rng.random() < _sigmoid(base + 1.5 * x)

    return PosterLook(
        warm=brief.warm if good(1.4, fidelity) else not brief.warm,
        headline_top=good(1.0, aesthetics),
        headline_dx=round(rng.gauss(0.0, 2.0 + 14.0 * _sigmoid(-1.5 * aesthetics))),
        contrast=round(min(0.98, max(0.05, _sigmoid(0.8 + 1.6 * aesthetics + rng.gauss(0.0, 0.9)))), 3),
        shape=rng.choice(("circle", "square")),
        shape_right=rng.random() < 0.5,
        date_shown=good(0.9, fidelity),
        button_shown=good(0.6, fidelity),
        clutter=max(0, min(10, round(rng.gauss(3.0 - 2.5 * aesthetics, 1.2)))),
        tint=rng.randrange(3),
        seed=rng.randrange(1 << 30),
    )


def abilities_draw(systems: list[str], spread: float, rng: random.Random) -> dict[str, float]:
    n = len(systems)
    values = [0.0] if n == 1 else [spread - 2 * spread * k / (n - 1) for k in range(n)]
    rng.shuffle(values)
    return {s: round(v, 4) for s, v in zip(systems, values, strict=True)}


def item_ids(brief: DemoBrief, systems: list[str], rng: random.Random) -> list[tuple[str, str]]:
    """(item id, system) of a brief's items in a shuffled order; ids carry no system name."""
    order = systems[:]
    rng.shuffle(order)
    return [(f"{brief.id}-{k + 1}", s) for k, s in enumerate(order)]


def quality_look(brief: DemoBrief, ability: float, rng: random.Random) -> tuple[float, PosterLook]:
    """An item's latent quality around its system's ability, and the look it gives (pairwise, checklist)."""
    quality = round(ability + rng.gauss(0.0, QUALITY_NOISE), 4)
    return quality, look_sample(brief, aesthetics=quality, fidelity=quality, rng=rng)


def quality_truth(plan: KindPlan) -> dict[str, Any]:
    """The truth of the kinds whose items have a latent quality: the abilities and each item's quality."""
    return {"abilities": plan.abilities, "item_quality": {i.id: i.quality for i in plan.items}}
