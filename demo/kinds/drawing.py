"""Drawing the posters of the kind demos (pure): one 480×360 PNG per item, and the bundle's ``study.json``."""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from demo.kinds.plan import POSTER_HEIGHT, POSTER_WIDTH, DemoBrief, KindPlan, PosterLook

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


def kind_bundle_write(plan: KindPlan, folder: Path, *, instructions: str, section: dict[str, Any]) -> Path:
    """Draw every poster and write ``study.json`` (docs/bundle-kinds.md) with the kind's ``section``
    (its predicates, options) after the items; returns the file's path."""
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
        "instructions_md": instructions,
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
    study.update(section)
    path = folder / "study.json"
    path.write_text(json.dumps(study, indent=1))
    return path
