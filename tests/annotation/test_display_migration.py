"""Migration 0005 converts studies stored before display images existed (SECURITY.md row 16)."""

from __future__ import annotations

import hashlib
import io
import struct
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from PIL import Image

BEFORE = [("annotation", "0004_kind_hygiene")]


def _stored(model, image: Image.Image):  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    relative = f"images/{sha[:2]}/{sha}.png"
    path = Path(settings.MEDIA_ROOT) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return model.objects.create(sha256=sha, file=relative, width=image.width, height=image.height, size_bytes=len(data))


def _ihdr(path: Path) -> tuple[int, int, int, int]:
    return struct.unpack(">IIBB", path.read_bytes()[16:26])


@pytest.mark.django_db(transaction=True)
def test_migration_0005_gives_a_stored_study_display_images_and_keeps_its_originals() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        Study, System = old.get_model("annotation", "Study"), old.get_model("annotation", "System")
        Page, Candidate = old.get_model("annotation", "Page"), old.get_model("annotation", "Candidate")
        StoredImage = old.get_model("annotation", "StoredImage")
        study = Study.objects.create(slug="stored-before", title="Stored before 0005", link_token="tok-before-0005")
        page = Page.objects.create(study=study, external_id="p1", image=_stored(StoredImage, Image.new("RGB", (400, 520), "white")),
                                   media=[{"kind": "photo", "bbox_1000": [100, 100, 500, 500]}])
        sizes = {"alpha": Image.new("RGBA", (800, 1040), (0, 0, 0, 0)), "beta": Image.new("L", (400, 520), 128)}
        for i, (sid, image) in enumerate(sizes.items()):
            system = System.objects.create(study=study, external_id=sid, name=sid, position=i)
            Candidate.objects.create(page=page, system=system, image=_stored(StoredImage, image), media=[])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)

    from annotation.models import Candidate as NewCandidate
    from annotation.models import Page as NewPage

    media = Path(settings.MEDIA_ROOT)
    for candidate in NewCandidate.objects.filter(page__study__slug="stored-before").select_related("image", "original_image"):
        assert _ihdr(media / candidate.image.file.name) == (400, 520, 8, 2)
        assert candidate.original_image.mode in ("RGBA", "L")
        assert candidate.original_image.width in (800, 400)
    page = NewPage.objects.select_related("image", "neutralized_image", "original_image").get(study__slug="stored-before")
    assert _ihdr(media / page.image.file.name) == (400, 520, 8, 2)
    assert page.neutralized_image is not None and page.original_image is not None
