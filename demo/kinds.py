"""Demo studies of the SPEC §11 kinds: ``make_demo_study --kind pairwise|checklist|rating``.

The same road as the ``pairwise_reference`` demo (``demo.service``): draw a bundle of the kind
(docs/bundle-kinds.md) in a temporary folder, import it with ``study_import_bundle``, record the
ground truth in ``Study.options["demo"]``, schedule two blocks with ``blocks_schedule`` (targets:
simulated raters + 1, two attention checks per assignment), then let simulated study-link
participants pass the comprehension check (``comprehension_submit``), claim a slot
(``participant_claim``) and answer every trial (``trial_next`` / ``vote_submit``). One open slot
per block is left for a person clicking through the demo.

What is drawn (pure part: :func:`kind_plan_make`, :func:`poster_draw`, :func:`kind_bundle_write`):
small 480×360 posters for event briefs. A poster's look (palette, where the headline sits, how
readable it is, the main shape and its side, the date line, the ticket button, clutter) is drawn
from two latent scores — how good it looks and how faithful to the brief it is — so every answer
the simulated raters give can be checked against a known truth:

- ``pairwise``: each system has an ability θ, each item a latent quality ``q = θ + noise`` that
  drives both its look and its two metrics (``aesthetic``, ``clip``, noisy increasing functions of
  q). Every pair of a brief's items is compared (the bundle leaves ``comparisons`` out). Raters
  answer the displayed pair with the ordered-logit model of ``demo.simulation``.
- ``checklist``: six yes/no predicates per item (types Content / Layout / Style), whose true
  answer is read off the drawn look; element boxes where the question is about a drawn element;
  an imported ``automatic`` answer that is right 85 % of the time. Raters answer the truth with
  their accuracy (~0.85), sometimes Unclear (more often on borderline predicates).
- ``rating``: two systems, dimensions ``aesthetics`` and ``brief_fidelity`` on 1–5 (margin 0.5);
  the planted system difference is small on ``aesthetics`` (equivalent) and large on
  ``brief_fidelity``. Raters give latent + their own bias + noise, rounded and clipped.

Every kind has one careless rater (the last one): a straight-liner answering in well under a
second, who fails the first attention check; the hygiene rules (``too_fast_median``,
``straight_lining_share``, ``attention``) find them and nobody else. The second rater passes the
comprehension check only at the second attempt; in the ``pairwise`` demo one extra participant
fails it twice and is screened out (never claims a slot).

Simulated response times: the server measures a vote's ``response_ms`` from ``Trial.shown_at``;
like the reference demo, the simulation back-dates ``shown_at`` by the simulated time.

No system id or name is drawn in an image or written in a brief, question, item id or the
instructions: raters see trial tokens, the brief, the question and the pixels only.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from PIL import Image, ImageDraw, ImageFont

from annotation.errors import ArbiterError, Conflict
from annotation.models import Candidate, Comparison, Predicate, Study, Trial
from annotation.services.answers import trial_next, vote_submit
from annotation.services.bundles.exchange import study_import_bundle
from annotation.services.comprehension import comprehension_question, comprehension_submit
from annotation.services.participants import (
    participant_claim,
    participant_rater_get_or_create,
    study_link_url,
)
from annotation.services.scheduling import blocks_schedule, schedule_units
from demo.service import DEMO_RESEARCHER, DemoStudyResult, demo_access_lines, demo_researcher_ensure
from demo.simulation import call_rng

KINDS = ("pairwise", "checklist", "rating")
POSTER_WIDTH = 480
POSTER_HEIGHT = 360
DEMO_BLOCKS = 2
SIMULATED_RATERS_PER_BLOCK = 3  # checklist: k = 3 raters per predicate
ATTENTION_CHECKS = 2
AUTOMATIC_ACCURACY = 0.85
DIMENSIONS = ("aesthetics", "brief_fidelity")
RATING_SCALE = (1, 5)
RATING_MARGIN = 0.5
# Planted system means per dimension (rating demo): close on aesthetics, apart on fidelity.
RATING_MEANS = {
    "aesthetics": (3.5, 3.4),
    "brief_fidelity": (3.9, 2.8),
}
QUALITY_NOISE = 0.35  # sd of an item's quality around its system's ability (pairwise, checklist)

# Defaults and limits per kind: (briefs, systems), (min briefs, max briefs), (min systems, max systems).
DEFAULT_SIZES = {"pairwise": (16, 4), "checklist": (12, 2), "rating": (16, 2)}
BRIEF_LIMITS = {"pairwise": (2, 60), "checklist": (2, 60), "rating": (4, 60)}
SYSTEM_LIMITS = {"pairwise": (2, 6), "checklist": (1, 6), "rating": (2, 2)}

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

INSTRUCTIONS = {
    "pairwise": """\
Each trial shows an event brief and two posters, **A** (left) and **B** (right).
Pick the poster that answers the brief better: a clear, readable headline, the requested colours,
the date and a ticket button, a tidy layout. Answer **Tie** when you see no stable difference, and
*Cannot judge* only when an image does not load. Then say how confident you are (1–5); a short
reason is welcome but optional.

Some trials are attention checks that tell you which answer to give: please give it.
""",
    "checklist": """\
Each trial shows a poster (with its brief when there is one) and one yes/no question about it.
Outlined boxes, when shown, mark the element the question is about.
Answer **Yes** or **No**; answer **Unclear** only when the image does not show enough to tell.
Always note the evidence you see in a few words (e.g. "headline visible top left").

Some trials are attention checks that tell you which answer to give: please give it.
""",
    "rating": """\
Each trial shows a poster and the brief it was made for. Rate it on both dimensions from
**1 (poor)** to **5 (excellent)**:

- *Aesthetics*: is it pleasant, tidy and readable?
- *Brief fidelity*: does it give what the brief asks for (colours, date, ticket button)?

Some trials are attention checks that tell you which value to give: please give it.
""",
}


# --- the plan (pure) ----------------------------------------------------------------------------


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
        return sum(n * (n - 1) // 2 for n in per_brief.values()) if self.kind == "pairwise" else 0


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _briefs_make(kind: str, n: int, rng: random.Random) -> tuple[DemoBrief, ...]:
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
        if kind == "checklist" and k % 4 == 3:
            text = ""  # checklist and rating briefs may be empty: the image is shown alone
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


def _abilities(systems: list[str], spread: float, rng: random.Random) -> dict[str, float]:
    n = len(systems)
    values = [0.0] if n == 1 else [spread - 2 * spread * k / (n - 1) for k in range(n)]
    rng.shuffle(values)
    return {s: round(v, 4) for s, v in zip(systems, values, strict=True)}


def _item_ids(brief: DemoBrief, systems: list[str], rng: random.Random) -> list[tuple[str, str]]:
    """(item id, system) of a brief's items in a shuffled order; ids carry no system name."""
    order = systems[:]
    rng.shuffle(order)
    return [(f"{brief.id}-{k + 1}", s) for k, s in enumerate(order)]


QUESTION_BANK: tuple[tuple[str, str, str], ...] = (
    # (topic, type, question)
    ("headline_top", "Layout", "Is the headline at the top of the poster?"),
    ("date", "Content", "Does the poster show the date of the event?"),
    ("warm", "Style", "Is the colour palette warm (reds, oranges, beige)?"),
    ("shape_right", "Layout", "Is the main shape on the right half of the poster?"),
    ("readable", "Style", "Is the headline easy to read against its background?"),
    ("button", "Content", "Is there a ticket button at the bottom?"),
)
BOTTOM_BAND = (0, 780, 1000, 1000)


def _predicates_for(
    item: DemoItem, boxes: dict[str, tuple[int, int, int, int]], start: int, rng: random.Random
) -> list[DemoPredicate]:
    look = item.look
    truths = {
        "headline_top": look.headline_top,
        "date": look.date_shown,
        "warm": look.warm,
        "shape_right": look.shape_right,
        "readable": look.contrast >= 0.5,
        "button": look.button_shown,
    }
    element_boxes = {
        "headline_top": (boxes["headline"],),
        "shape_right": (boxes["shape"],),
        "readable": (boxes["headline"],),
        "button": (BOTTOM_BAND,),
    }
    out = []
    for k, (topic, qtype, question) in enumerate(QUESTION_BANK):
        truth = "YES" if truths[topic] else "NO"
        if rng.random() < AUTOMATIC_ACCURACY:
            automatic = truth
        else:
            automatic = "UNCLEAR" if rng.random() < 0.4 else ("NO" if truth == "YES" else "YES")
        out.append(
            DemoPredicate(
                id=f"p{start + k:03d}",
                item=item.id,
                question=question,
                type=qtype,
                boxes=element_boxes.get(topic, ()),
                truth=truth,
                automatic=automatic,
                borderline=topic == "readable" and 0.35 < look.contrast < 0.65,
                topic=topic,
            )
        )
    return out


def kind_plan_make(
    *, kind: str, slug: str, seed: int = 1, n_briefs: int | None = None, n_systems: int | None = None
) -> KindPlan:
    """Everything a kind demo contains, decided from ``seed`` (deterministic; module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"--kind must be one of pairwise_reference, {', '.join(KINDS)}; got {kind!r}")
    default_briefs, default_systems = DEFAULT_SIZES[kind]
    n_briefs = default_briefs if n_briefs is None else n_briefs
    n_systems = default_systems if n_systems is None else n_systems
    low, high = BRIEF_LIMITS[kind]
    if not low <= n_briefs <= high:
        raise ValueError(
            f"--pages (briefs) must be between {low} and {high} for a {kind} demo, got {n_briefs}"
        )
    low, high = SYSTEM_LIMITS[kind]
    if not low <= n_systems <= high:
        what = f"exactly {low}" if low == high else f"between {low} and {high}"
        raise ValueError(f"--systems must be {what} for a {kind} demo, got {n_systems}")
    rng = random.Random(f"arbiter-demo-{kind}:{seed}")
    systems = SYSTEM_NAMES[:n_systems]
    system_ids = [s for s, _ in systems]
    briefs = _briefs_make(kind, n_briefs, rng)
    abilities = _abilities(system_ids, 1.2 if kind == "pairwise" else 0.8, rng) if kind != "rating" else {}
    items: list[DemoItem] = []
    predicates: list[DemoPredicate] = []
    for brief in briefs:
        # A brief effect shared by its items (rating): some briefs are simply harder.
        brief_effect = {d: rng.gauss(0.0, 0.35) for d in DIMENSIONS}
        for item_id, system in _item_ids(brief, system_ids, rng):
            if kind == "rating":
                k = system_ids.index(system)
                latent = {
                    d: round(
                        min(4.4, max(1.6, RATING_MEANS[d][k] + brief_effect[d] + rng.gauss(0.0, 0.2))), 4
                    )
                    for d in DIMENSIONS
                }
                look = look_sample(
                    brief,
                    aesthetics=(latent["aesthetics"] - 3.3) * 1.3,
                    fidelity=(latent["brief_fidelity"] - 3.3) * 1.3,
                    rng=rng,
                )
                items.append(DemoItem(id=item_id, brief=brief.id, system=system, look=look, latent=latent))
                continue
            quality = round(abilities[system] + rng.gauss(0.0, QUALITY_NOISE), 4)
            look = look_sample(brief, aesthetics=quality, fidelity=quality, rng=rng)
            metrics: dict[str, float] = {}
            if kind == "pairwise":
                metrics = {
                    "aesthetic": round(5.5 + 0.9 * quality + rng.gauss(0.0, 0.35), 3),
                    "clip": round(0.30 + 0.02 * quality + rng.gauss(0.0, 0.01), 4),
                }
            item = DemoItem(
                id=item_id, brief=brief.id, system=system, look=look, quality=quality, metrics=metrics
            )
            items.append(item)
            if kind == "checklist":
                boxes = poster_layout(brief, look)
                predicates.extend(_predicates_for(item, boxes, len(predicates) + 1, rng))
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


# --- drawing (pure) ----------------------------------------------------------------------------

WARM_BACKGROUNDS = ((250, 228, 204), (247, 214, 176), (252, 236, 222))
COOL_BACKGROUNDS = ((214, 230, 246), (216, 238, 230), (230, 226, 246))
WARM_ACCENTS = ((206, 74, 44), (224, 128, 36), (178, 52, 72))
COOL_ACCENTS = ((44, 92, 172), (30, 128, 118), (86, 70, 160))
INK = (26, 26, 36)
HEADLINE_Y = {True: 24, False: 128}
SHAPE_BOX = {False: (58, 150, 182, 274), True: (298, 150, 422, 274)}
BUTTON_BOX = (318, 298, 452, 338)


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _mix(a: tuple[int, ...], b: tuple[int, ...], t: float) -> tuple[int, int, int]:
    r, g, bl = (round(x + (y - x) * t) for x, y in zip(a, b, strict=True))
    return (r, g, bl)


def _box_1000(box: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box

    def clamp(v: float) -> int:
        return max(0, min(1000, round(v)))

    return (
        clamp(x0 * 1000 / POSTER_WIDTH),
        clamp(y0 * 1000 / POSTER_HEIGHT),
        clamp(x1 * 1000 / POSTER_WIDTH),
        clamp(y1 * 1000 / POSTER_HEIGHT),
    )


def _headline_size(text: str) -> int:
    size = 34
    while size > 16 and _font(size).getlength(text) > POSTER_WIDTH - 70:
        size -= 2
    return size


def _headline_box(brief: DemoBrief, look: PosterLook) -> tuple[int, int, int, int]:
    size = _headline_size(brief.event)
    x, y = 28 + look.headline_dx, HEADLINE_Y[look.headline_top]
    left, top, right, bottom = ImageDraw.Draw(Image.new("L", (1, 1))).textbbox(
        (x, y), brief.event, font=_font(size), stroke_width=1
    )
    return (int(left), int(top), int(right), int(bottom))


def poster_layout(brief: DemoBrief, look: PosterLook) -> dict[str, tuple[int, int, int, int]]:
    """Where the headline and the main shape are drawn (0…1000 boxes), without drawing."""
    return {
        "headline": _box_1000(_headline_box(brief, look)),
        "shape": _box_1000(SHAPE_BOX[look.shape_right]),
    }


def poster_draw(brief: DemoBrief, look: PosterLook) -> Image.Image:
    """Draw one poster: background, clutter, main shape, headline, place line, date, button."""
    background = (WARM_BACKGROUNDS if look.warm else COOL_BACKGROUNDS)[look.tint]
    accent = (WARM_ACCENTS if look.warm else COOL_ACCENTS)[look.tint]
    image = Image.new("RGB", (POSTER_WIDTH, POSTER_HEIGHT), background)
    draw = ImageDraw.Draw(image)
    rng = random.Random(look.seed)
    # A frame band in the accent colour.
    draw.rectangle((0, 0, POSTER_WIDTH - 1, POSTER_HEIGHT - 1), outline=accent, width=6)
    for _ in range(look.clutter):
        x, y = rng.randrange(10, POSTER_WIDTH - 60), rng.randrange(10, POSTER_HEIGHT - 40)
        w, h = rng.randrange(12, 70), rng.randrange(6, 36)
        colour = (rng.randrange(60, 240), rng.randrange(60, 240), rng.randrange(60, 240))
        if rng.random() < 0.5:
            draw.rectangle((x, y, x + w, y + h), fill=colour)
        else:
            draw.line((x, y, x + w, y + h), fill=colour, width=rng.randrange(2, 6))
    shape_box = SHAPE_BOX[look.shape_right]
    if look.shape == "circle":
        draw.ellipse(shape_box, fill=accent)
    else:
        draw.rounded_rectangle(shape_box, radius=14, fill=accent)
    size = _headline_size(brief.event)
    x, y = 28 + look.headline_dx, HEADLINE_Y[look.headline_top]
    colour = _mix(background, INK, look.contrast)
    draw.text((x, y), brief.event, font=_font(size), fill=colour, stroke_width=1, stroke_fill=colour)
    draw.text(
        (30 + look.headline_dx, y + size + 10),
        f"at {brief.place}",
        font=_font(16),
        fill=_mix(background, INK, 0.7),
    )
    if look.date_shown:
        draw.text((28, 306), brief.day, font=_font(20), fill=INK)
    if look.button_shown:
        draw.rounded_rectangle(BUTTON_BOX, radius=10, fill=_mix(accent, INK, 0.25))
        label = "TICKETS"
        width = _font(16).getlength(label)
        draw.text(
            ((BUTTON_BOX[0] + BUTTON_BOX[2] - width) / 2, BUTTON_BOX[1] + 11),
            label,
            font=_font(16),
            fill=(255, 255, 255),
        )
    return image


def kind_bundle_write(plan: KindPlan, folder: Path) -> Path:
    """Draw every poster and write ``study.json`` (docs/bundle-kinds.md); returns its path."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    briefs = {b.id: b for b in plan.briefs}
    for item in plan.items:
        poster_draw(briefs[item.brief], item.look).save(
            folder / "images" / f"{item.id}.png", compress_level=1
        )
    study: dict[str, Any] = {
        "slug": plan.slug,
        "title": plan.title,
        "kind": plan.kind,
        "instructions_md": INSTRUCTIONS[plan.kind],
        "systems": [{"id": s, "name": name} for s, name in plan.systems],
        "briefs": [{"id": b.id, "text": b.text} for b in plan.briefs],
        "items": [
            {
                "id": i.id,
                "image": f"images/{i.id}.png",
                "brief": i.brief,
                "system": i.system,
                "metrics": i.metrics,
            }
            for i in plan.items
        ],
    }
    if plan.kind == "checklist":
        study["predicates"] = [
            {
                "id": p.id,
                "item": p.item,
                "question": p.question,
                "boxes": [list(b) for b in p.boxes],
                "automatic": p.automatic,
                "type": p.type,
            }
            for p in plan.predicates
        ]
        study["options"] = {"k": SIMULATED_RATERS_PER_BLOCK}
    elif plan.kind == "rating":
        study["options"] = {
            "dimensions": list(DIMENSIONS),
            "scale": list(RATING_SCALE),
            "margin": RATING_MARGIN,
        }
    # pairwise: "comparisons" left out, so every pair of a brief's items is compared.
    path = folder / "study.json"
    path.write_text(json.dumps(study, indent=1))
    return path


# --- simulated raters (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class KindRater:
    id: str
    careless: bool
    median_ms: int
    noise: float  # pairwise: latent scale; rating: sd of a rating around the latent
    tie_band: float  # pairwise
    accuracy: float  # checklist
    unclear_rate: float  # checklist
    bias: float  # rating: added to every rating
    comprehension_attempts: int  # 1: right at once; 2: right at the second try; 0: fails twice


@dataclass(frozen=True)
class KindAnswer:
    """An answer as the trial page submits it (display terms)."""

    verdict: str
    confidence: int | None
    rationale: str
    ratings: dict[str, int] | None
    response_ms: int


def kind_raters(kind: str, n: int, seed: int) -> tuple[KindRater, ...]:
    """``n`` simulated raters: the second needs two comprehension attempts, the last is careless."""
    rng = random.Random(f"arbiter-demo-{kind}-raters:{seed}")
    raters = []
    for k in range(n):
        careless = k == n - 1 and n > 2
        raters.append(
            KindRater(
                id=f"sim-rater-{k + 1:02d}",
                careless=careless,
                median_ms=rng.randint(650, 900) if careless else rng.randint(4000, 9000),
                noise=round(rng.uniform(0.45, 0.7), 3),
                tie_band=round(rng.uniform(0.3, 0.6), 3),
                accuracy=round(rng.uniform(0.82, 0.92), 3),
                unclear_rate=round(rng.uniform(0.02, 0.06), 3),
                bias=round(rng.gauss(0.0, 0.2), 3),
                comprehension_attempts=2 if k == 1 else 1,
            )
        )
    return tuple(raters)


def screened_out_rater() -> KindRater:
    """The participant who fails the comprehension check twice (pairwise demo)."""
    return KindRater(
        id="sim-screened-01",
        careless=True,
        median_ms=800,
        noise=1.0,
        tie_band=0.5,
        accuracy=0.5,
        unclear_rate=0.0,
        bias=0.0,
        comprehension_attempts=0,
    )


def _response_ms(rater: KindRater, rng: random.Random) -> int:
    if rater.careless:
        return int(rater.median_ms * math.exp(rng.gauss(0.0, 0.15)))
    return max(1500, int(rater.median_ms * math.exp(rng.gauss(0.0, 0.4))))


def _logistic(rng: random.Random) -> float:
    p = min(max(rng.random(), 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


PAIRWISE_REASONS = {
    "A": ("left headline easier to read", "left has the date and the button", "left is tidier", ""),
    "B": ("right headline easier to read", "right has the date and the button", "right is tidier", ""),
    "TIE": ("both about the same", ""),
}


def pairwise_answer(*, rater: KindRater, q_left: float, q_right: float, rng: random.Random) -> KindAnswer:
    """Ordered logit on the displayed pair (``demo.simulation``): left wins when z > tie band."""
    ms = _response_ms(rater, rng)
    if rater.careless:
        return KindAnswer("A", 5, "", None, ms)
    if rng.random() < 0.01:
        return KindAnswer("CANNOT_JUDGE", 1, "image did not load", None, ms)
    z = (q_left - q_right) / rater.noise + _logistic(rng)
    verdict = "A" if z > rater.tie_band else "B" if z < -rater.tie_band else "TIE"
    confidence = max(1, min(5, 1 + int(abs(z) - rater.tie_band + 1.2)))
    reason = rng.choice(PAIRWISE_REASONS[verdict]) if rng.random() < 0.4 else ""
    return KindAnswer(verdict, confidence, reason, None, ms)


EVIDENCE = {
    "headline_top": {
        "YES": "headline visible top left",
        "NO": "headline sits in the middle",
        "UNCLEAR": "cannot tell where the headline starts",
    },
    "date": {
        "YES": "date shown bottom left",
        "NO": "no date anywhere",
        "UNCLEAR": "small text, not sure it is a date",
    },
    "warm": {"YES": "oranges and beige", "NO": "blues and greens", "UNCLEAR": "mixed colours"},
    "shape_right": {
        "YES": "shape on the right side",
        "NO": "shape on the left side",
        "UNCLEAR": "shape near the centre",
    },
    "readable": {
        "YES": "dark headline on a light background",
        "NO": "headline faint against the background",
        "UNCLEAR": "readable but low contrast",
    },
    "button": {
        "YES": "button bottom right",
        "NO": "no button at the bottom",
        "UNCLEAR": "a box at the bottom, no label",
    },
}


def checklist_answer(*, rater: KindRater, predicate: DemoPredicate, rng: random.Random) -> KindAnswer:
    """The truth with the rater's accuracy, else the opposite; Unclear sometimes (borderline: often)."""
    ms = _response_ms(rater, rng)
    if rater.careless:
        return KindAnswer("YES", None, "ok", None, ms)
    unclear = rater.unclear_rate + (0.25 if predicate.borderline else 0.0)
    accuracy = rater.accuracy - (0.15 if predicate.borderline else 0.0)
    u = rng.random()
    if u < unclear:
        answer = "UNCLEAR"
    elif rng.random() < accuracy:
        answer = predicate.truth
    else:
        answer = "NO" if predicate.truth == "YES" else "YES"
    return KindAnswer(answer, None, EVIDENCE[predicate.topic][answer], None, ms)


def rating_answer(*, rater: KindRater, latent: dict[str, float], rng: random.Random) -> KindAnswer:
    """Latent + the rater's bias + noise, rounded and clipped to the scale, per dimension."""
    ms = _response_ms(rater, rng)
    low, high = RATING_SCALE
    if rater.careless:
        return KindAnswer("", None, "", dict.fromkeys(DIMENSIONS, 3), ms)
    ratings = {
        d: int(max(low, min(high, round(latent[d] + rater.bias + rng.gauss(0.0, rater.noise)))))
        for d in DIMENSIONS
    }
    return KindAnswer("", None, "", ratings, ms)


def attention_answer(
    *, kind: str, rater: KindRater, expected: str, habit: KindAnswer, fail: bool, rng: random.Random
) -> KindAnswer:
    """The answer to an instructed-response check: as instructed, or (``fail``) the rater's habit."""
    ms = _response_ms(rater, rng)
    if kind == "rating":
        value = int(expected)
        if fail:
            value = 3 if value != 3 else 4
        return KindAnswer("", None, "", dict.fromkeys(DIMENSIONS, value), ms)
    verdict = expected
    if fail:
        verdict = habit.verdict if habit.verdict != expected else ("B" if kind == "pairwise" else "NO")
    if kind == "checklist":
        return KindAnswer(verdict, None, "answered as the check asks" if not fail else "ok", None, ms)
    return KindAnswer(verdict, 5, "", None, ms)


# --- through the services ----------------------------------------------------------------------


def kind_truth(
    plan: KindPlan, raters: tuple[KindRater, ...], screened: tuple[KindRater, ...]
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
    if plan.kind in ("pairwise", "checklist"):
        truth["abilities"] = plan.abilities
        truth["item_quality"] = {i.id: i.quality for i in plan.items}
    if plan.kind == "checklist":
        truth["predicate_truth"] = {p.id: p.truth for p in plan.predicates}
        truth["borderline"] = [p.id for p in plan.predicates if p.borderline]
        truth["automatic_agreement"] = round(
            sum(p.automatic == p.truth for p in plan.predicates) / max(1, len(plan.predicates)), 4
        )
    if plan.kind == "rating":
        first, second = (s for s, _ in plan.systems)
        truth["system_means"] = {
            s: {d: RATING_MEANS[d][k] for d in DIMENSIONS} for k, (s, _) in enumerate(plan.systems)
        }
        truth["item_latent"] = {i.id: i.latent for i in plan.items}
        by = {(i.brief, i.system): i.latent for i in plan.items}
        truth["planted_difference"] = {
            "systems": [first, second],
            **{
                d: round(
                    sum(by[(b.id, first)][d] - by[(b.id, second)][d] for b in plan.briefs) / len(plan.briefs),
                    4,
                )
                for d in DIMENSIONS
            },
        }
        truth["equivalent_dimension"] = "aesthetics"
    return truth


def _comprehension_pass(*, study: Study, rater: Any, attempts: int) -> str:
    """Answer the comprehension question: right at attempt ``attempts`` (0: wrong twice)."""
    question = comprehension_question(study)
    wrong = next(value for value, _ in question.choices if value != question.answer)
    state = "retry"
    attempt = 0
    while state == "retry":
        attempt += 1
        state = comprehension_submit(rater=rater, answer=question.answer if attempt == attempts else wrong)
    return state


def kind_simulate(
    *, study: Study, plan: KindPlan, raters: tuple[KindRater, ...], screened: tuple[KindRater, ...], seed: int
) -> dict[str, int]:
    """Simulated participants: comprehension check, claim, every trial answered (module docstring)."""
    counts = {
        "votes": 0,
        "raters": 0,
        "repeats": 0,
        "attention": 0,
        "attention_failed": 0,
        "comprehension_second": 0,
        "screened_out": 0,
    }
    items = {i.id: i for i in plan.items}
    predicates = {p.id: p for p in plan.predicates}
    comparison_items = {
        c.pk: (c.candidate_a.external_id, c.candidate_b.external_id)
        for c in Comparison.objects.filter(study=study).select_related("candidate_a", "candidate_b")
    }
    item_of_candidate = dict(Candidate.objects.filter(page__study=study).values_list("pk", "external_id"))
    predicate_of = dict(Predicate.objects.filter(study=study).values_list("pk", "external_id"))
    for profile in screened:
        rater = participant_rater_get_or_create(
            study=study, external_id=profile.id, platform={"source": "demo simulation"}
        )
        if _comprehension_pass(study=study, rater=rater, attempts=0) == "failed":
            counts["screened_out"] += 1
    for profile in raters:
        rater = participant_rater_get_or_create(
            study=study, external_id=profile.id, platform={"source": "demo simulation"}
        )
        if _comprehension_pass(study=study, rater=rater, attempts=profile.comprehension_attempts) != "passed":
            raise ArbiterError(f"simulated rater {profile.id} did not pass the comprehension check")
        counts["comprehension_second"] += int(profile.comprehension_attempts == 2)
        assignment = participant_claim(study=study, rater=rater)
        answers: dict[int, KindAnswer] = {}
        checks_seen = 0
        while (view := trial_next(assignment=assignment)) is not None:
            trial = view.trial
            rng = call_rng(seed, plan.kind, "vote", profile.id, trial.position)
            if plan.kind == "pairwise":
                a, b = comparison_items[int(trial.comparison_id or 0)]
                left, right = (b, a) if trial.swapped else (a, b)
                fresh = pairwise_answer(
                    rater=profile, q_left=items[left].quality, q_right=items[right].quality, rng=rng
                )
            elif plan.kind == "checklist":
                fresh = checklist_answer(
                    rater=profile, predicate=predicates[predicate_of[int(trial.predicate_id or 0)]], rng=rng
                )
            else:
                fresh = rating_answer(
                    rater=profile,
                    latent=items[item_of_candidate[int(trial.candidate_id or 0)]].latent,
                    rng=rng,
                )
            original = answers.get(int(trial.repeat_of_id)) if trial.repeat_of_id is not None else None
            if trial.attention_expected:
                # The careless rater fails the first check they meet and passes the others.
                fail = profile.careless and checks_seen == 0
                answer = attention_answer(
                    kind=plan.kind,
                    rater=profile,
                    expected=trial.attention_expected,
                    habit=fresh,
                    fail=fail,
                    rng=rng,
                )
                checks_seen += 1
                counts["attention"] += 1
                counts["attention_failed"] += int(fail)
            elif original is not None and rng.random() < 0.8:
                # A hidden repeat mostly gets the same answer again (test–retest consistency).
                answer = KindAnswer(
                    original.verdict,
                    original.confidence,
                    original.rationale,
                    original.ratings,
                    fresh.response_ms,
                )
                counts["repeats"] += 1
            else:
                answer = fresh
                counts["repeats"] += int(trial.is_repeat)
            answers[trial.pk] = answer
            # Simulated time: the trial was shown response_ms ago (the server measures from shown_at).
            Trial.objects.filter(pk=trial.pk).update(
                shown_at=timezone.now() - timedelta(milliseconds=answer.response_ms)
            )
            vote_submit(
                trial_token=trial.token,
                rater_id=rater.pk,
                verdict=answer.verdict,
                confidence=answer.confidence,
                axes={},
                rationale=answer.rationale,
                idempotency_key=view.idempotency_key,
                ratings=answer.ratings,
            )
            counts["votes"] += 1
        counts["raters"] += 1
    return counts


def kind_schedule(*, study: Study, per_block: int, seed: int) -> dict[str, int]:
    """Two blocks of half the units each; targets = simulated raters + 1 (the open slot)."""
    units = len(schedule_units(study))
    block_size = units // DEMO_BLOCKS
    if block_size < 2:
        raise ArbiterError(
            f"the demo has {units} units, too few for {DEMO_BLOCKS} blocks (give more --pages)"
        )
    min_gap = max(1, min(10, block_size // 2))
    repeats = min(2, block_size - min_gap + 1)
    blocks_schedule(
        study=study,
        blocks=DEMO_BLOCKS,
        block_size=block_size,
        repeats=repeats,
        min_gap=min_gap,
        raters=[per_block + 1] * DEMO_BLOCKS,
        seed=seed,
        checks=ATTENTION_CHECKS,
    )
    return {
        "blocks": DEMO_BLOCKS,
        "block_size": block_size,
        "hidden_repeats": repeats,
        "checks": ATTENTION_CHECKS,
        "units": units,
    }


def kind_demo_create(
    *,
    kind: str,
    slug: str,
    seed: int = 1,
    n_briefs: int | None = None,
    n_systems: int | None = None,
    votes: bool = True,
    with_users: bool = False,
    participant_link: bool = True,
    user: AbstractBaseUser | None = None,
) -> DemoStudyResult:
    """Create a demo study of ``kind`` (module docstring). Deterministic in ``seed``; one transaction."""
    started = time.monotonic()
    if seed < 0:
        raise ArbiterError("--seed must be a non-negative integer")
    if Study.objects.filter(slug=slug).exists():
        raise Conflict(f"a study with slug {slug!r} already exists (choose another --slug)")
    try:
        plan = kind_plan_make(kind=kind, slug=slug, seed=seed, n_briefs=n_briefs, n_systems=n_systems)
    except ValueError as exc:
        raise ArbiterError(str(exc)) from None
    per_block = SIMULATED_RATERS_PER_BLOCK if votes else 0
    raters = kind_raters(kind, per_block * DEMO_BLOCKS, seed)
    screened = (screened_out_rater(),) if votes and kind == "pairwise" else ()
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix=f"arbiter-demo-{kind}-") as tmp:
        folder = Path(tmp) / "bundle"
        kind_bundle_write(plan, folder)
        with transaction.atomic():
            study = study_import_bundle(path=folder, user=user)
            Study.objects.filter(pk=study.pk).update(
                options={**(study.options or {}), "demo": kind_truth(plan, raters, screened)}
            )
            study.refresh_from_db(fields=["options"])
            counts.update(kind_schedule(study=study, per_block=per_block, seed=seed))
            if votes:
                counts.update(
                    kind_simulate(study=study, plan=plan, raters=raters, screened=screened, seed=seed)
                )
            logins = [demo_researcher_ensure(study=study)] if with_users else []
            if not with_users:
                # An existing demo login (make run) also gets this study, without a new password.
                study.researchers.add(*get_user_model().objects.filter(username=DEMO_RESEARCHER))
    result = DemoStudyResult(study=study, logins=logins)
    result.counts = {
        "briefs": len(plan.briefs),
        "systems": len(plan.systems),
        "items": len(plan.items),
        "predicates": len(plan.predicates),
        "comparisons": plan.n_comparisons(),
        **counts,
    }
    result.participant_url = study_link_url(study=study) if participant_link else None
    result.seconds = time.monotonic() - started
    return result


def kind_counts_lines(result: DemoStudyResult) -> list[str]:
    """Human-readable summary lines for the command."""
    c: dict[str, int] = result.counts
    kind = result.study.kind
    units = {"pairwise": "comparisons", "checklist": "predicates", "rating": "items"}[kind]
    made = f"briefs: {c['briefs']}, systems: {c['systems']}, items: {c['items']}"
    if kind == "pairwise":
        made += f", comparisons: {c['comparisons']} (every pair of a brief's items)"
    if kind == "checklist":
        made += f", predicates: {c['predicates']} (k = {SIMULATED_RATERS_PER_BLOCK})"
    lines = [f"study: {result.study.slug} (kind {kind})", made]
    if "blocks" in c:
        lines.append(
            f"blocks: {c['blocks']} of {c['block_size']} {units} ({c['hidden_repeats']} hidden repeats and "
            f"{c['checks']} attention checks per assignment); one open slot per block"
        )
    if "votes" in c:
        lines.append(
            f"simulated raters: {c['raters']}, votes: {c['votes']} (hidden repeats: {c['repeats']}, "
            f"attention checks: {c['attention']}, {c['attention_failed']} failed by the careless rater)"
        )
        lines.append(
            f"comprehension check: {c['raters']} passed ({c['comprehension_second']} at the second attempt), "
            f"{c['screened_out']} screened out"
        )
    return lines + demo_access_lines(result)
