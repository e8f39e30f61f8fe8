"""ORM factories for judge tests: a study shaped like the docs/protocol.md "Files" example bundle.

Images are synthetic and tell their origin by colour (the fake provider reads it back): reference
pages are light grey with a dark band, alpha red, beta blue, gamma green. Media regions are
neutralized with ``annotation.images.neutralize_media`` (a flat (200, 200, 200) box).
"""

from __future__ import annotations

import io
from pathlib import Path

from django.conf import settings
from PIL import Image, ImageDraw

from annotation.images import clean_image, neutralize_media
from annotation.media import media_exists, media_is_local, save_media
from annotation.models import Axis, Candidate, Comparison, Page, StoredImage, Study, System
from judges.models import Judge
from tests.judges.fake_provider import REFERENCE_COLOUR, SYSTEM_COLOURS

SYSTEM_NAMES = {"alpha": "Alpha Parser v2", "beta": "Beta Render 7B", "gamma": "Gamma Doc Large"}
MEDIA = [{"kind": "photo", "bbox_1000": [600, 725, 934, 950]}]
TABLE_TARGET = {"axis": "TABLE", "role": "table", "bbox_1000": [66, 450, 934, 650], "description": "results table"}
AXES = [
    ("GLOBAL_LAYOUT_FIDELITY", "fixed", "Regions, columns, spacing, reading order."),
    ("TEXT_VISUAL_PRESENTATION", "fixed", "Wrapping, typography, emphasis."),
    ("TABLE", "conditional", "Rows, columns, cell alignment."),
]


def image_bytes(colour: tuple[int, int, int], size: tuple[int, int] = (400, 520), noise: bool = False) -> bytes:
    image = Image.new("RGB", size, colour)
    draw = ImageDraw.Draw(image)
    draw.rectangle((20, 20, size[0] - 20, 60), fill=(40, 40, 40))
    if noise:  # incompressible content, for byte-limit tests
        import random

        rng = random.Random(7)
        pixels = image.load()
        for y in range(80, size[1], 2):
            for x in range(0, size[0], 2):
                pixels[x, y] = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def store(data: bytes, *, media: list | None = None) -> tuple[StoredImage, StoredImage | None]:
    clean = clean_image(data, where="factory")
    stored = _save(clean)
    neutral = neutralize_media(clean, media or [])
    return stored, (_save(neutral) if neutral else None)


def _save(clean) -> StoredImage:  # type: ignore[no-untyped-def]
    if media_is_local():
        path = Path(settings.MEDIA_ROOT) / clean.relative_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_bytes(clean.png)
    elif not media_exists(clean.relative_path):  # a bucket (the cluster's failure tests)
        save_media(clean.relative_path, io.BytesIO(clean.png))
    stored, _ = StoredImage.objects.get_or_create(
        sha256=clean.sha256,
        defaults={"file": clean.relative_path, "width": clean.width, "height": clean.height, "size_bytes": len(clean.png)},
    )
    return stored


def make_example_study(
    *, slug: str = "example", neutralize: bool = True, image_size: tuple[int, int] = (400, 520), noise: bool = False,
    extra_pages: int = 0, judge_prompt: str = "",
) -> Study:
    """The example bundle's study: axes, 3 systems, pages e00–e02 (+ extra), comparisons c1–c3 (+ extra)."""
    study = Study.objects.create(slug=slug, title="Example fidelity study", neutralize_media=neutralize, judge_prompt=judge_prompt)
    for i, (axis_id, scope, description) in enumerate(AXES):
        Axis.objects.create(study=study, axis_id=axis_id, scope=scope, description=description, position=i)
    systems = {
        sid: System.objects.create(study=study, external_id=sid, name=SYSTEM_NAMES[sid], position=i)
        for i, sid in enumerate(SYSTEM_COLOURS)
    }
    reference, reference_neutral = store(image_bytes(REFERENCE_COLOUR, image_size, noise), media=MEDIA)
    system_images = {sid: store(image_bytes(c, image_size, noise), media=MEDIA) for sid, c in SYSTEM_COLOURS.items()}
    page_specs = [("e00", [TABLE_TARGET]), ("e01", []), ("e02", [TABLE_TARGET])]
    page_specs += [(f"x{i:04d}", [TABLE_TARGET] if i % 2 else []) for i in range(extra_pages)]
    pages: dict[str, Page] = {}
    candidates: dict[tuple[str, str], Candidate] = {}
    for position, (pid, targets) in enumerate(page_specs):
        page = Page.objects.create(
            study=study, external_id=pid, image=reference, neutralized_image=reference_neutral,
            targets=targets, media=MEDIA, position=position,
        )
        pages[pid] = page
        for sid, system in systems.items():
            failed = pid == "e02" and sid == "gamma"
            image, neutral = system_images[sid]
            candidates[(pid, sid)] = Candidate.objects.create(
                page=page, system=system, image=None if failed else image,
                neutralized_image=None if failed else neutral, rendered=not failed, media=[] if failed else MEDIA,
            )
    specs = [("c1", "e00", "alpha", "beta", "human"), ("c2", "e01", "gamma", "alpha", "human"),
             ("c3", "e02", "beta", "alpha", "deployment")]
    specs += [(f"cx{i:04d}", f"x{i:04d}", "alpha", "beta", "deployment") for i in range(extra_pages)]
    for cid, pid, a, b, set_ in specs:
        Comparison.objects.create(
            study=study, external_id=cid, page=pages[pid], candidate_a=candidates[(pid, a)],
            candidate_b=candidates[(pid, b)], set=set_,
        )
    return study


def make_judge(name: str = "judge-x", *, base_url: str, **fields: object) -> Judge:
    defaults: dict[str, object] = {
        "family": "acme", "provider": "openai", "model": "vlm-1", "api_key_env": "ARBITER_TEST_JUDGE_KEY",
        "timeout_seconds": 5.0, "concurrency": 4,
    }
    defaults.update(fields)
    return Judge.objects.create(name=name, base_url=base_url, **defaults)
