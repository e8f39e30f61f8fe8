"""Rows for staged images (see ``annotation.images``)."""

from __future__ import annotations

from annotation.images import CleanImage, ImageStaging
from annotation.models import StoredImage


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
