"""Bring a stored study's shown images to the display geometry (SECURITY.md row 16).

Studies imported before display variants existed show each upload as it came (its own pixel size
and colour mode), so a rater could follow one system by its image geometry. This rebuilds, for
every page and candidate, the shown image (8-bit RGB on white, scaled to the page reference's
width, or for kinds without a reference to the study-wide lower-median width) and its
media-neutralized variant from the original, and keeps the original in ``original_image``.

Idempotent: the shown images are always rebuilt from the originals, so running it again changes
nothing. Used by the ``blind_images`` command and by migration ``0006_blind_existing_studies`` (which
passes its historical models).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from annotation.errors import ArbiterError
from annotation.images import (
    CleanImage,
    ImageStaging,
    decode_stored_png,
    display_image,
    display_width,
    display_width_of,
    neutralize_media,
    staged_images,
)
from annotation.media import read_media


@dataclass
class BlindResult:
    holders: int = 0
    changed: int = 0


def stored_image_staged(stage: ImageStaging, stored_model: Any, clean: CleanImage) -> Any:
    """``clean`` staged for publishing and its ``StoredImage`` row (an existing one for the same pixels)."""
    stage.add(clean)
    row, _ = stored_model.objects.get_or_create(
        sha256=clean.sha256,
        defaults={
            "file": clean.relative_path, "width": clean.width, "height": clean.height,
            "size_bytes": len(clean.png), "mode": clean.mode,
        },
    )
    return row


def study_images_blind(*, study: Any, page_model: Any = None, candidate_model: Any = None, stored_model: Any = None) -> BlindResult:
    """Rebuild the shown images of one study from its originals; all or nothing."""
    current = page_model is None  # not a migration's historical models
    if page_model is None:
        from annotation.models import Candidate, Page, StoredImage

        page_model, candidate_model, stored_model = Page, Candidate, StoredImage
    pages = list(page_model.objects.filter(study=study).select_related("image", "original_image"))
    candidates = list(
        candidate_model.objects.filter(page__study=study).select_related("image", "original_image", "page")
    )

    def original(holder: Any) -> Any:
        return holder.original_image or holder.image

    kind_widths = [original(c).width for c in candidates if original(c) is not None]
    study_width = display_width_of(kind_widths) if kind_widths else 1
    page_width = {p.pk: (display_width(original(p).width) if original(p) is not None else study_width) for p in pages}
    result = BlindResult()
    decoded: dict[tuple[str, int], tuple[CleanImage, Any]] = {}

    def shown(source: Any, width: int) -> tuple[CleanImage, Any]:
        key = (source.sha256, width)
        if key not in decoded:
            try:
                pixels = decode_stored_png(read_media(str(source.file.name)))
            except OSError as exc:
                raise ArbiterError(f"image {source.sha256[:12]} cannot be read ({exc.strerror or exc})") from None
            if not source.mode:
                source.mode = pixels.mode if pixels.mode in ("RGB", "RGBA", "L") else "RGB"
                stored_model.objects.filter(pk=source.pk).update(mode=source.mode)
            decoded.clear()  # one image's pixels at a time: pages can be 60 megapixels
            decoded[key] = display_image(pixels, width, where=str(source.file.name))
        return decoded[key]

    with staged_images() as stage, transaction.atomic():
        for holder in [*pages, *candidates]:
            source = original(holder)
            if source is None:
                continue
            result.holders += 1
            width = page_width[holder.page_id if hasattr(holder, "page_id") else holder.pk]
            plain, rgb = shown(source, width)
            image = stored_image_staged(stage, stored_model, plain)
            neutral = neutralize_media(plain, holder.media, pixels=rgb.copy()) if holder.media else None
            neutral_row = stored_image_staged(stage, stored_model, neutral) if neutral is not None else None
            if (holder.image_id, holder.original_image_id, holder.neutralized_image_id) != (
                image.pk, source.pk, neutral_row.pk if neutral_row else None
            ):
                result.changed += 1
                type(holder).objects.filter(pk=holder.pk).update(
                    image=image, original_image=source, neutralized_image=neutral_row
                )
        stage.publish()
    if current and result.changed:
        # The trials not shown yet show the new images: their stored screens are made again (decision 0079).
        from annotation.services.trial_screens import trial_screens_forget

        trial_screens_forget(study.pk)
    return result
