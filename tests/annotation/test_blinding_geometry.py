"""Blinding by image geometry and encoding (SECURITY.md row 16).

A bundle whose systems render differently — one at 2x as RGBA PNG with a 144-dpi pHYs chunk,
one as a greyscale 300-dpi JPEG, one as a WebP at another size — is imported; every image a
rater is served (through the trial pages) and every image a judge request carries must have the
same PNG header (width, bit depth, colour type, no ancillary chunks) within a trial and across
systems. Researchers keep the originals (size and mode) and the export round-trips them.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from PIL import Image, ImageDraw

from annotation.images import neutralize_media
from annotation.models import Candidate, Comparison, Page, StoredImage, Study
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.scheduling import blocks_schedule
from judges.models import Order
from judges.request_building import build_judge_request, study_axes
from tests.judges.factories import make_judge

pytestmark = pytest.mark.django_db

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_header(data: bytes) -> tuple[int, int, int, int, list[str]]:
    """(width, height, bit depth, colour type, chunk types) read from the PNG bytes themselves."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    chunks: list[str] = []
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        chunks.append(data[offset + 4 : offset + 8].decode("ascii"))
        offset += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    return width, height, depth, colour, chunks


def _page(size: tuple[int, int], colour: tuple[int, ...], mode: str) -> Image.Image:
    image = Image.new(mode, size, colour)
    draw = ImageDraw.Draw(image)
    w, h = size
    draw.rectangle((w // 10, h // 10, w * 9 // 10, h // 5), fill=(20, 20, 20) if mode != "L" else 20)
    draw.rectangle((w // 10, h // 3, w // 2, h // 2), fill=(60, 120, 200) if mode != "L" else 90)
    return image


def _save(image: Image.Image, path: Path, **options: Any) -> None:
    buffer = io.BytesIO()
    image.save(buffer, **options)
    path.write_bytes(buffer.getvalue())


def hostile_bundle(examples_dir: Path, target: Path) -> Path:
    """The example bundle with systems that differ in pixel size, DPI, alpha and format."""
    bundle = target / "bundle"
    shutil.copytree(examples_dir / "bundle", bundle)
    doc = json.loads((bundle / "study.json").read_text())
    doc["slug"] = "geometry"
    for page in doc["pages"]:
        _save(_page((400, 520), (250, 250, 250), "RGB"), bundle / page["image"], format="PNG")
    for c in doc["candidates"]:
        if c["image"] is None:
            continue
        path = bundle / c["image"]
        if c["system"] == "alpha":  # 2x device pixel ratio, transparent background
            _save(_page((800, 1040), (255, 255, 255, 0), "RGBA"), path, format="PNG", dpi=(144, 144))
        elif c["system"] == "beta":  # greyscale JPEG at 300 dpi
            path = path.with_suffix(".jpg")
            _save(_page((400, 520), 240, "L"), path, format="JPEG", dpi=(300, 300), quality=85)
            c["image"] = c["image"][:-4] + ".jpg"
        else:  # WebP at another size
            path = path.with_suffix(".webp")
            _save(_page((500, 650), (245, 245, 245), "RGB"), path, format="WEBP", lossless=True)
            c["image"] = c["image"][:-4] + ".webp"
    (bundle / "study.json").write_text(json.dumps(doc))
    return bundle


def _walk_rater_images(study: Study) -> list[list[bytes]]:
    """Every trial's images as a rater's browser receives them (HTML flow, all slots)."""
    client = Client()
    r = client.get(f"/s/{study.link_token}/?participant=geometry-1")
    html = client.get(r["Location"]).content.decode()
    trials: list[list[bytes]] = []
    while True:
        m = re.search(r'action="/t/([^/"]+)/vote/"', html)
        if not m:
            break
        token = m.group(1)
        images = []
        for slot in ("ref", "left", "right"):
            response = client.get(f"/t/{token}/{slot}.png")
            assert response.status_code == 200
            images.append(b"".join(response.streaming_content))
        trials.append(images)
        axes = re.findall(r'name="axis:([A-Z_]+)" value="0"', html)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
        r = client.post(f"/t/{token}/vote/", {"verdict": "TIE", "confidence": "2", "idempotency_key": key,
                                              **{f"axis:{a}": "0" for a in axes}}, HTTP_HX_REQUEST="true")
        html = r.content.decode()
    return trials


def _assert_same_encoding(images: list[bytes], width: int) -> None:
    headers = [png_header(data) for data in images]
    for w, _h, depth, colour, chunks in headers:
        assert (w, depth, colour) == (width, 8, 2)
        assert set(chunks) == {"IHDR", "IDAT", "IEND"}, chunks  # no pHYs, gAMA, iCCP, tRNS, text


@pytest.mark.parametrize("neutralize", [False, True])
def test_every_image_a_rater_sees_of_a_page_has_one_geometry_and_encoding(
    tmp_path: Path, examples_dir: Path, neutralize: bool
) -> None:
    study = study_import_bundle(path=hostile_bundle(examples_dir, tmp_path))
    Study.objects.filter(pk=study.pk).update(neutralize_media=neutralize)
    study.refresh_from_db()
    blocks_schedule(study=study, blocks=1, block_size=2, repeats=0, min_gap=1, raters=[1], seed=3)
    trials = _walk_rater_images(study)
    assert len(trials) == 2
    served_widths = set()
    for images in trials:
        _assert_same_encoding(images, 400)
        served_widths.update(png_header(d)[:2] for d in images[1:])
    # the 2x RGBA system, the greyscale JPEG and the WebP all come out 400 × 520
    assert served_widths == {(400, 520)}


def test_judge_requests_carry_the_same_geometry_for_every_system(tmp_path: Path, examples_dir: Path) -> None:
    study = study_import_bundle(path=hostile_bundle(examples_dir, tmp_path))
    judge = make_judge(base_url="http://127.0.0.1:9/v1")
    axes = study_axes(study.pk)
    for comparison in Comparison.objects.filter(study=study):
        for order in (Order.PRIMARY, Order.SWAPPED):
            built = build_judge_request(judge=judge, comparison=comparison, order=order, axes=axes)
            images = [image.data for image in built.request.images]
            assert [image.mime for image in built.request.images] == ["image/png"] * 3
            _assert_same_encoding(images, 400)
            assert len({png_header(d)[:4] for d in images[1:]}) == 1


def test_researchers_keep_the_originals_and_the_export_round_trips_them(tmp_path: Path, examples_dir: Path) -> None:
    study = study_import_bundle(path=hostile_bundle(examples_dir, tmp_path))
    originals = {
        c.system.external_id: (c.original_image.width, c.original_image.height, c.original_image.mode)
        for c in Candidate.objects.filter(page__study=study, page__external_id="e00").select_related("system", "original_image")
    }
    assert originals == {"alpha": (800, 1040, "RGBA"), "beta": (400, 520, "L"), "gamma": (500, 650, "RGB")}
    shown = {
        (c.image.width, c.image.height, c.image.mode)
        for c in Candidate.objects.filter(page__study=study, rendered=True).select_related("image")
    }
    assert shown == {(400, 520, "RGB")}

    archive = tmp_path / "export.zip"
    study_export_bundle(study=study, path=archive)
    with zipfile.ZipFile(archive) as z:
        doc = json.loads(z.read("study.json"))
        alpha = next(c for c in doc["candidates"] if c["page"] == "e00" and c["system"] == "alpha")
        with Image.open(io.BytesIO(z.read(alpha["image"]))) as exported:
            assert (exported.size, exported.mode) == ((800, 1040), "RGBA")
    before = {
        (c.page.external_id, c.system.external_id): (c.original_image.sha256, c.image.sha256)
        for c in Candidate.objects.filter(page__study=study, rendered=True).select_related("page", "system", "original_image", "image")
    }
    study.delete()
    again = study_import_bundle(path=archive)
    after = {
        (c.page.external_id, c.system.external_id): (c.original_image.sha256, c.image.sha256)
        for c in Candidate.objects.filter(page__study=again, rendered=True).select_related("page", "system", "original_image", "image")
    }
    assert after == before


def test_the_study_page_shows_original_sizes_and_modes(tmp_path: Path, examples_dir: Path, researcher: Any) -> None:
    study = study_import_bundle(path=hostile_bundle(examples_dir, tmp_path), user=researcher)
    client = Client()
    client.force_login(researcher)
    html = client.get(f"/studies/{study.slug}/").content.decode()
    table = html[html.index('id="original-images"'):]
    assert "800×1040" in table and "RGBA" in table and "L" in table and "500×650" in table


def test_kinds_without_a_reference_show_every_item_at_one_width(tmp_path: Path) -> None:
    bundle = tmp_path / "pairwise"
    shutil.copytree(Path(settings.BASE_DIR) / "fixtures" / "bundles" / "pairwise", bundle)
    sizes = {"b1-alpha.png": ((800, 1200), "RGBA"), "b1-beta.png": ((400, 600), "L"), "b1-gamma.png": ((500, 700), "RGB")}
    for name, (size, mode) in sizes.items():
        _save(_page(size, (200, 200, 200, 0) if mode == "RGBA" else (200 if mode == "L" else (200, 200, 200)), mode),
              bundle / "images" / name, format="PNG")
    study = study_import_bundle(path=bundle)
    headers = {
        png_header((Path(settings.MEDIA_ROOT) / c.image.file.name).read_bytes())[:4]
        for c in Candidate.objects.filter(page__study=study).select_related("image")
    }
    originals = sorted(c.original_image.width for c in Candidate.objects.filter(page__study=study).select_related("original_image"))
    assert {800, 400, 500} <= set(originals)
    assert {h[0] for h in headers} == {originals[(len(originals) - 1) // 2]}  # one study-wide width
    assert {h[2:] for h in headers} == {(8, 2)}


def test_blind_images_converts_a_study_stored_before_display_variants(tmp_path: Path, examples_dir: Path) -> None:
    study = study_import_bundle(path=hostile_bundle(examples_dir, tmp_path))
    expected = {
        c.pk: (c.image_id, c.original_image_id, c.neutralized_image_id)
        for c in Candidate.objects.filter(page__study=study)
    }
    # As a study imported before migration 0005 was stored: the shown image is the original.
    for model in (Page, Candidate):
        for holder in model.objects.filter(pk__in=[h.pk for h in model.objects.all()]).exclude(original_image=None):
            old_neutral = neutralize_media(_clean_of(holder.original_image), holder.media)
            model.objects.filter(pk=holder.pk).update(
                image=holder.original_image, original_image=None,
                neutralized_image=_row(old_neutral) if old_neutral else None,
            )
    assert {c.image.width for c in Candidate.objects.filter(page__study=study, rendered=True)} == {400, 500, 800}
    out = io.StringIO()
    call_command("blind_images", study.slug, stdout=out)
    assert out.getvalue().startswith("geometry: ")
    got = {
        c.pk: (c.image_id, c.original_image_id, c.neutralized_image_id)
        for c in Candidate.objects.filter(page__study=study)
    }
    assert got == expected
    out = io.StringIO()
    call_command("blind_images", stdout=out)
    assert out.getvalue().strip().endswith("0 changed")  # idempotent


def _clean_of(stored: StoredImage):  # type: ignore[no-untyped-def]
    from annotation.images import clean_image

    return clean_image((Path(settings.MEDIA_ROOT) / stored.file.name).read_bytes(), where="stored")


def _row(clean) -> StoredImage:  # type: ignore[no-untyped-def]
    path = Path(settings.MEDIA_ROOT) / clean.relative_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(clean.png)
    row, _ = StoredImage.objects.get_or_create(
        sha256=clean.sha256,
        defaults={"file": clean.relative_path, "width": clean.width, "height": clean.height, "size_bytes": len(clean.png)},
    )
    return row


def test_a_page_wider_than_the_display_cap_is_shown_with_its_candidates_at_the_cap(
    tmp_path: Path, examples_dir: Path, settings: Any
) -> None:
    settings.ARBITER_DISPLAY_MAX_WIDTH = 300
    study = study_import_bundle(path=hostile_bundle(examples_dir, tmp_path))
    shown = {(p.image.width, p.image.height) for p in Page.objects.filter(study=study).select_related("image")}
    shown |= {(c.image.width, c.image.height) for c in Candidate.objects.filter(page__study=study, rendered=True).select_related("image")}
    assert shown == {(300, 390)}
    assert {p.original_image.width for p in Page.objects.filter(study=study).select_related("original_image")} == {400}


def test_an_rgb_page_at_its_own_width_is_its_own_display_image() -> None:
    from annotation.services.bundles.images import process_image

    buffer = io.BytesIO()
    _page((400, 520), (250, 250, 250), "RGB").save(buffer, format="PNG")
    clean, shown = process_image(buffer.getvalue(), "p.png", [(400, ()), (300, ())])
    assert shown[(400, ())] is clean  # not encoded twice
    assert png_header(shown[(300, ())].png)[:4] == (300, 390, 8, 2)
