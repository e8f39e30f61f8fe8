"""ORM factories for rater-flow tests: a small pairwise-reference study with real stored images.

Images go through the real cleaning (``clean_image`` inside ``staged_images``), so what raters are
served is what production serves. Every system name,
system id, candidate id and source file name is distinctive, so blinding tests can search for them.
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass, field

from django.db import transaction
from PIL import Image, ImageDraw

from annotation.images import CleanImage, ImageStaging, clean_image, neutralize_media, staged_images
from annotation.models import (
    Axis,
    AxisScope,
    Candidate,
    Comparison,
    ComparisonSet,
    Page,
    StoredImage,
    Study,
    System,
)


def stored_image_get_or_create(*, staging: ImageStaging, image: CleanImage) -> StoredImage:
    """The StoredImage row for a clean image, staging its file when it is new."""
    staging.add(image)
    stored, _ = StoredImage.objects.get_or_create(
        sha256=image.sha256,
        defaults={
            "file": image.relative_path,
            "width": image.width,
            "height": image.height,
            "size_bytes": len(image.png),
        },
    )
    return stored


SYSTEMS = (
    ("sysalpha", "Alphaparser Zeta v2"),
    ("sysbeta", "Betarender Omega 7B"),
    ("sysgamma", "Gammadoc Largeish"),
)
AXES = (
    ("GLOBAL_LAYOUT_FIDELITY", AxisScope.FIXED, "Regions, columns, spacing, reading order."),
    ("TEXT_VISUAL_PRESENTATION", AxisScope.FIXED, "Wrapping, typography, emphasis."),
    ("TABLE", AxisScope.CONDITIONAL, "Rows, columns, cell alignment."),
)
TARGET = {"axis": "TABLE", "role": "table", "bbox_1000": [66, 450, 934, 650], "description": "results table"}
MEDIA = [{"kind": "photo", "bbox_1000": [600, 725, 934, 950]}]


@dataclass
class RaterStudy:
    study: Study
    systems: list[System]
    comparisons: list[Comparison]
    secrets: list[str] = field(default_factory=list)  # strings that must never reach a rater


def _png(seed: int, *, width: int = 120, height: int = 240) -> bytes:
    colour = ((seed * 67) % 256, (seed * 131) % 256, (seed * 199) % 256)
    image = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle((10, 10 + seed % 30, width - 10, 60 + seed % 30), fill=colour)
    draw.rectangle((8, 108, width - 8, 156), outline=(0, 0, 0), width=2)
    # "Text lines" below, so larger pages look (and compress) like documents.
    for y in range(170, height - 12, 14):
        x1 = 12 + (seed * 7919 + y * 31) % max(width - 24, 1)
        draw.rectangle((12, y, max(x1, 40), y + 6), fill=(60, 60, 60))
    buffer = io.BytesIO()
    # Metadata that must not survive intake: a text chunk naming the system.
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"renderer-{seed}")
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def make_rater_study(
    *,
    slug: str = "rater-study",
    pages: int = 6,
    targets_every: int = 2,
    failed_render: bool = True,
    neutralize: bool = True,
    instructions_md: str = "Compare each candidate with the **reference**.",
    completion_code: str = "",
    deployment_extra: int = 1,
    image_size: tuple[int, int] = (120, 240),
) -> RaterStudy:
    """A study with ``pages`` pages × all system pairs as human comparisons.

    Every ``targets_every``-th page has a TABLE target (so TABLE is active there only). With
    ``failed_render`` the last system failed on page 0 (its comparisons there are not eligible).
    ``deployment_extra`` deployment-set comparisons are added too (never scheduled for humans).
    """
    with staged_images() as staging, transaction.atomic():
        study = Study.objects.create(
            slug=slug, title=f"Fidelity study {slug}", instructions_md=instructions_md,
            neutralize_media=neutralize, completion_code=completion_code,
        )
        for position, (axis_id, scope, description) in enumerate(AXES):
            Axis.objects.create(study=study, axis_id=axis_id, scope=scope, description=description, position=position)
        systems = [
            System.objects.create(study=study, external_id=sid, name=name, position=i)
            for i, (sid, name) in enumerate(SYSTEMS)
        ]
        comparisons: list[Comparison] = []
        secrets = [s for pair in SYSTEMS for s in pair]
        seed = itertools.count(1)
        for p in range(pages):
            ref = clean_image(_png(next(seed), width=image_size[0], height=image_size[1]), where=f"images/page{p:03d}.png")
            ref_row = stored_image_get_or_create(staging=staging, image=ref)
            neutral = neutralize_media(ref, MEDIA) if neutralize else None
            page = Page.objects.create(
                study=study, external_id=f"pg{p:03d}", image=ref_row,
                neutralized_image=stored_image_get_or_create(staging=staging, image=neutral) if neutral else None,
                targets=[TARGET] if targets_every and p % targets_every == 0 else [],
                media=MEDIA, position=p,
            )
            secrets.append(f"page{p:03d}.png")
            candidates = []
            for system in systems:
                failed = failed_render and p == 0 and system is systems[-1]
                image_row = neutral_row = None
                if not failed:
                    img = clean_image(_png(next(seed), width=image_size[0],
                                           height=image_size[1] + 20 * (system.position + 1)),
                                      where=f"images/{system.external_id}-{p:03d}.png")
                    image_row = stored_image_get_or_create(staging=staging, image=img)
                    n = neutralize_media(img, MEDIA) if neutralize else None
                    neutral_row = stored_image_get_or_create(staging=staging, image=n) if n else None
                    secrets.append(f"{system.external_id}-{p:03d}.png")
                external = f"cand-{system.external_id}-{p:03d}"
                secrets.append(external)
                candidates.append(
                    Candidate.objects.create(
                        page=page, system=system, image=image_row, neutralized_image=neutral_row,
                        rendered=not failed, media=MEDIA, external_id=external,
                    )
                )
            for a, b in itertools.combinations(candidates, 2):
                comparisons.append(
                    Comparison.objects.create(
                        study=study, external_id=f"cmp-{page.external_id}-{a.system.external_id}-{b.system.external_id}",
                        page=page, candidate_a=a, candidate_b=b, set=ComparisonSet.HUMAN,
                    )
                )
        if deployment_extra and pages:
            page = Page.objects.get(study=study, external_id="pg001") if pages > 1 else page
            cands = list(page.candidates.order_by("system__position"))
            for i in range(min(deployment_extra, 1)):
                comparisons.append(
                    Comparison.objects.create(
                        study=study, external_id=f"dep-{i}", page=page, candidate_a=cands[-1],
                        candidate_b=cands[0], set=ComparisonSet.DEPLOYMENT,
                    )
                )
        staging.publish()
    return RaterStudy(study=study, systems=systems, comparisons=comparisons, secrets=secrets)


def eligible_count(pages: int, *, failed_render: bool = True, n_systems: int = len(SYSTEMS)) -> int:
    """Human comparisons with both candidates rendered: C(n, 2) per page, minus page 0's losses."""
    pairs = n_systems * (n_systems - 1) // 2
    return pages * pairs - ((n_systems - 1) if failed_render and pages else 0)
