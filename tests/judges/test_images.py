"""docs/protocol.md "Judges and calibration" image repairs: JPEG first, then downscaling on the long edge,
aspect ratio kept."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from judges.images import ImageTooLarge, prepare_image
from tests.judges.factories import image_bytes


def _open(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def test_within_limits_the_original_png_is_sent_unchanged() -> None:
    png = image_bytes((200, 10, 10), (300, 400))
    prepared = prepare_image(png, 300, 400, max_edge=400, max_bytes=len(png))
    assert prepared.data == png
    assert prepared.mime == "image/png"
    assert prepared.repair is None


def test_over_the_byte_limit_it_becomes_a_jpeg_of_the_same_size_first() -> None:
    png = image_bytes((200, 10, 10), (600, 800), noise=True)
    limit = len(png) - 1
    prepared = prepare_image(png, 600, 800, max_edge=None, max_bytes=limit)
    assert prepared.mime == "image/jpeg"
    assert _open(prepared.data).format == "JPEG"
    assert len(prepared.data) <= limit
    assert prepared.repair is not None
    assert prepared.repair["steps"][0].startswith("re-encoded as JPEG")
    assert prepared.repair["original"] == {"width": 600, "height": 800, "bytes": len(png), "format": "png"}


def test_still_too_large_it_is_downscaled_keeping_the_aspect_ratio() -> None:
    png = image_bytes((200, 10, 10), (600, 800), noise=True)
    prepared = prepare_image(png, 600, 800, max_edge=None, max_bytes=40_000)
    image = _open(prepared.data)
    assert len(prepared.data) <= 40_000
    assert max(image.size) < 800
    assert abs(image.size[0] / image.size[1] - 600 / 800) < 0.01
    assert any(step.startswith("downscaled") for step in prepared.repair["steps"])  # type: ignore[index]


def test_edge_limit_downscales_the_long_edge() -> None:
    png = image_bytes((10, 10, 200), (1000, 500))
    prepared = prepare_image(png, 1000, 500, max_edge=400, max_bytes=None)
    assert _open(prepared.data).size == (400, 200)
    assert prepared.repair["sent"]["width"] == 400  # type: ignore[index]


def test_impossible_limits_are_refused() -> None:
    png = image_bytes((10, 10, 200), (600, 800), noise=True)
    with pytest.raises(ImageTooLarge):
        prepare_image(png, 600, 800, max_edge=None, max_bytes=200)


def test_a_downscaled_flat_rendering_is_kept_as_png_when_that_is_smaller() -> None:
    png = image_bytes((10, 10, 200), (1000, 1300))  # flat colours, like a document rendering
    prepared = prepare_image(png, 1000, 1300, max_edge=500, max_bytes=None)
    assert prepared.mime == "image/png" and _open(prepared.data).format == "PNG"
    assert prepared.repair["sent"]["format"] == "png"  # type: ignore[index]
    assert prepared.repair["steps"][0] == "re-encoded as PNG (smaller than JPEG)"  # type: ignore[index]
    noisy = image_bytes((10, 10, 200), (1000, 1300), noise=True)
    photo = prepare_image(noisy, 1000, 1300, max_edge=500, max_bytes=None)
    assert photo.mime == "image/jpeg"


def test_anthropic_preset_counts_5_mb_on_the_base64_text() -> None:
    from judges.image_limits import preset_for

    anthropic = preset_for("anthropic")
    assert anthropic is not None and anthropic.raw_image_bytes() == 3_932_160  # 5,242,880 base64 characters
    openai = preset_for("openai")
    assert openai is not None and openai.raw_image_bytes() == 20 * 1024 * 1024


def test_images_repaired_alike_keep_the_smaller_format_for_all_three() -> None:
    """Issue 14 keeps the smaller of PNG and JPEG; blinding needs one format per request: flat
    renderings over an edge limit all go as PNG (smaller there), never one PNG beside JPEGs."""
    from judges.images import _jpeg, _png, prepare_image, prepare_images_alike

    images = [Image.new("RGB", (800, 1000), colour) for colour in ((250, 250, 250), (20, 30, 40), (200, 10, 10))]
    sources = []
    for image in images:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        sources.append((buffer.getvalue(), image.width, image.height))
    each = [prepare_image(png, w, h, max_edge=500, max_bytes=None) for png, w, h in sources]
    alike = prepare_images_alike(sources, each, max_edge=500, max_bytes=None)
    assert [p.mime for p in alike] == ["image/png"] * 3 and {(p.width, p.height) for p in alike} == {(400, 500)}
    resized = [image.resize((400, 500)) for image in images]
    assert sum(len(p.data) for p in alike) == sum(len(_png(i)) for i in resized) < sum(len(_jpeg(i)) for i in resized)
    assert all(p.repair and p.repair["sent"]["format"] == "png" for p in alike)


def test_images_repaired_alike_share_one_format_and_scale_and_stay_under_the_limits() -> None:
    from judges.images import ImageTooLarge, prepare_image, prepare_images_alike

    flat = Image.new("RGB", (300, 400), (200, 210, 220))
    noisy = Image.effect_noise((300, 500), 80).convert("RGB")
    sources = []
    for image in (flat, noisy, flat):
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        sources.append((buffer.getvalue(), image.width, image.height))
    limit = 60_000
    each = [prepare_image(png, w, h, max_edge=None, max_bytes=limit) for png, w, h in sources]
    assert [p.mime for p in each] == ["image/png", "image/jpeg", "image/png"]
    alike = prepare_images_alike(sources, each, max_edge=None, max_bytes=limit)
    assert [p.mime for p in alike] == ["image/jpeg"] * 3
    assert len({p.width for p in alike}) == 1 and all(len(p.data) <= limit for p in alike)
    assert all(p.repair and p.repair["original"]["width"] == 300 for p in alike)
    fitted = [prepare_image(png, w, h, max_edge=None, max_bytes=None) for png, w, h in sources]
    assert prepare_images_alike(sources, fitted, max_edge=None, max_bytes=None) == fitted  # nothing to repair
    edge = prepare_images_alike(
        sources, [prepare_image(png, w, h, max_edge=100, max_bytes=None) for png, w, h in sources], max_edge=100, max_bytes=None
    )
    assert [(p.width, p.height) for p in edge] == [(60, 80), (60, 100), (60, 80)]  # one factor: the tallest's
    with pytest.raises(ImageTooLarge, match="200 bytes"):
        prepare_images_alike(sources, each, max_edge=None, max_bytes=200)
