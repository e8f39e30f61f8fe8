"""Image intake (annotation/images.py): formats, limits, metadata stripping, neutralization, staging."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image, PngImagePlugin

from annotation.errors import ValidationFailed
from annotation.images import clean_image, neutralize_media, staged_images


def png_bytes(size: tuple[int, int] = (40, 30), color: tuple[int, int, int] = (10, 120, 200), **save: object) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG", **save)
    return buffer.getvalue()


def huge_png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width × height pixels, with a tiny (invalid) body."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b"")


def test_reencoded_png_has_no_metadata_and_same_pixels() -> None:
    info = PngImagePlugin.PngInfo()
    info.add_text("Source", "alpha-parser-v2/e00.png")
    original = png_bytes(pnginfo=info)
    clean = clean_image(original, where="images/e00.png")
    assert b"alpha-parser" not in clean.png
    assert b"tEXt" not in clean.png and b"iTXt" not in clean.png and b"eXIf" not in clean.png
    with Image.open(io.BytesIO(clean.png)) as a, Image.open(io.BytesIO(original)) as b:
        assert a.tobytes() == b.convert("RGB").tobytes()
    # Same pixels again → same content hash (export/import stability).
    assert clean_image(clean.png, where="x").sha256 == clean.sha256


def test_jpeg_exif_is_dropped() -> None:
    buffer = io.BytesIO()
    exif = Image.Exif()
    exif[0x010E] = "made by beta-render-7b"  # ImageDescription
    Image.new("RGB", (20, 20), (200, 10, 10)).save(buffer, format="JPEG", exif=exif.tobytes())
    assert b"beta-render" in buffer.getvalue()
    clean = clean_image(buffer.getvalue(), where="c.jpg")
    assert b"beta-render" not in clean.png
    assert clean.png.startswith(b"\x89PNG")


def test_polyglot_trailing_html_is_removed() -> None:
    polyglot = png_bytes() + b"<html><script>alert('gamma-doc-large')</script></html>"
    clean = clean_image(polyglot, where="p.png")
    assert b"<script" not in clean.png and b"gamma" not in clean.png


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "empty"),
        (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n", "not a PNG, JPEG or WebP"),
        (b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>', "not a PNG, JPEG or WebP"),
        (png_bytes()[:60], "cannot be decoded"),
        (huge_png_header(30_000, 30_000), "too large"),
        (huge_png_header(15_000, 14_000), "too large"),
    ],
    ids=["empty", "eps", "svg", "truncated", "30k-square", "200-megapixel"],
)
def test_bad_images_are_refused_with_one_line(data: bytes, fragment: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        clean_image(data, where="images/bad.png")
    message = str(caught.value)
    assert fragment in message
    assert message.startswith("images/bad.png")
    assert "\n" not in message


def test_neutralization_hides_interior_and_keeps_outside() -> None:
    buffer = io.BytesIO()
    image = Image.new("RGB", (100, 100), (255, 255, 255))
    for x in range(50, 90):
        for y in range(50, 90):
            image.putpixel((x, y), (x * 2, y, 255 - x))  # a "photo"
    image.save(buffer, format="PNG")
    clean = clean_image(buffer.getvalue(), where="p.png")
    neutral = neutralize_media(clean, [{"kind": "photo", "bbox_1000": [500, 500, 900, 900]}])
    assert neutral is not None and neutral.sha256 != clean.sha256
    with Image.open(io.BytesIO(neutral.png)) as out:
        assert out.size == (100, 100)
        assert out.getpixel((10, 10)) == (255, 255, 255)  # outside untouched
        interior = {out.getpixel((x, y)) for x in range(55, 85) for y in range(60, 62)}
        assert len(interior) <= 2  # flat fill (plus the diagonal cross)
    assert neutralize_media(clean, []) is None


def test_staging_publishes_on_success_and_cleans_on_error(settings: object, tmp_path: Path) -> None:
    media = Path(settings.MEDIA_ROOT)  # type: ignore[attr-defined]
    first = clean_image(png_bytes(color=(1, 2, 3)), where="a.png")
    with staged_images() as stage:
        stage.add(first)
        stage.publish()
    assert (media / first.relative_path).exists()

    second = clean_image(png_bytes(color=(4, 5, 6)), where="b.png")
    before = sorted(p.relative_to(media) for p in media.rglob("*"))
    with pytest.raises(RuntimeError), staged_images() as stage:
        stage.add(second)
        stage.publish()
        raise RuntimeError("the database write failed")
    after = sorted(p.relative_to(media) for p in media.rglob("*"))
    assert after == before


def test_icc_profile_and_xmp_are_dropped() -> None:
    buffer = io.BytesIO()
    fake_icc = b"\x00" * 128 + b"desc-alpha-parser-profile"
    Image.new("RGB", (16, 16), (0, 200, 0)).save(buffer, format="PNG", icc_profile=fake_icc)
    clean = clean_image(buffer.getvalue(), where="i.png")
    assert b"iCCP" not in clean.png and b"alpha-parser" not in clean.png


def _noisy(mode: str, size: tuple[int, int] = (37, 23)) -> Image.Image:
    import numpy as np

    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    values = np.random.default_rng(7).integers(0, 256, size=(size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(values[:, :, 0] if channels == 1 else values, mode)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
@pytest.mark.parametrize("interlace", [False, True])
def test_libpng_path_gives_pillows_pixels_and_a_pure_png(mode: str, interlace: bool) -> None:
    """The fast decoder and encoder (libpng through imagecodecs) give exactly Pillow's pixels."""
    source = _noisy(mode)
    buffer = io.BytesIO()
    source.save(buffer, format="PNG", interlace=interlace)  # Pillow ignores interlace on save; libpng reads both
    clean = clean_image(buffer.getvalue(), where="x.png")
    assert clean.mode == mode and (clean.width, clean.height) == source.size
    with Image.open(io.BytesIO(clean.png)) as stored:
        assert stored.mode == mode and stored.tobytes() == source.tobytes()
    chunks = []
    position = 8
    while position < len(clean.png):
        length = struct.unpack(">I", clean.png[position : position + 4])[0]
        chunks.append(clean.png[position + 4 : position + 8])
        position += 12 + length
    assert set(chunks) == {b"IHDR", b"IDAT", b"IEND"}
    # Deterministic: the same pixels give the same bytes, hence the same stored name.
    assert clean_image(buffer.getvalue(), where="x.png").sha256 == clean.sha256


def test_libpng_path_refuses_a_truncated_png_in_one_line() -> None:
    buffer = io.BytesIO()
    _noisy("RGB", (200, 150)).save(buffer, format="PNG")
    data = buffer.getvalue()
    with pytest.raises(ValidationFailed) as caught:
        clean_image(data[: len(data) // 2], where="images/cut.png")
    assert str(caught.value).startswith("images/cut.png: the image cannot be decoded")
    assert "\n" not in str(caught.value)


def test_png_with_exif_rotation_is_still_rotated() -> None:
    """An eXIf chunk sends the PNG to Pillow, which applies the orientation."""
    source = _noisy("RGB", (30, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise when shown
    buffer = io.BytesIO()
    source.save(buffer, format="PNG", exif=exif.tobytes())
    clean = clean_image(buffer.getvalue(), where="r.png")
    assert (clean.width, clean.height) == (10, 30)


@pytest.mark.parametrize("width", [37, 20])
def test_an_image_shown_as_it_is_skips_no_check_and_matches_the_full_path(width: int) -> None:
    """process_image's short cut (RGB at its page's width, no media) gives what the full path gives."""
    from annotation.images import decode_clean_image, display_image
    from annotation.services.bundles.images import process_image

    buffer = io.BytesIO()
    _noisy("RGB").save(buffer, format="PNG")
    data = buffer.getvalue()
    clean, shown = process_image(data, "x.png", [(width, ())])
    full, pixels = decode_clean_image(data, where="x.png")
    expected, _ = display_image(pixels, width, where="x.png", clean=full)
    assert clean.sha256 == full.sha256 and shown[(width, ())].sha256 == expected.sha256
    with pytest.raises(ValidationFailed):
        process_image(data[:-30], "cut.png", [(37, ())])


def test_png_with_gamma_and_srgb_chunks_keeps_pillows_pixels() -> None:
    """libpng applies no gAMA or sRGB chunk to the pixels, as Pillow does not: the same bytes."""
    source = _noisy("RGB")
    buffer = io.BytesIO()
    source.save(buffer, format="PNG")
    data = buffer.getvalue()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr_end = 8 + 25  # signature, then IHDR (4 length + 4 type + 13 data + 4 CRC)
    tagged = data[:ihdr_end] + chunk(b"gAMA", struct.pack(">I", 45455)) + chunk(b"sRGB", b"\x00") + data[ihdr_end:]
    clean = clean_image(tagged, where="g.png")
    assert b"gAMA" not in clean.png and b"sRGB" not in clean.png
    assert clean.sha256 == clean_image(data, where="g.png").sha256
    with Image.open(io.BytesIO(clean.png)) as stored:
        assert stored.tobytes() == source.tobytes()


def test_the_shown_bytes_do_not_depend_on_the_encoder_of_the_upload() -> None:
    """One zlib level and filter for every image: the same pixels written by different encoders
    (Pillow at levels 0 and 9, one with a Software chunk, libpng with Sub rows, lossless WebP) are shown, and
    stored, as the very same bytes, so a file's size cannot tell which system made it."""
    import imagecodecs
    import numpy as np

    from annotation.services.bundles.images import process_image

    source = _noisy("RGB", size=(64, 40))
    uploads = [png_bytes_of(source, compress_level=0), png_bytes_of(source, compress_level=9),
               png_bytes_of(source, pnginfo=_software_chunk("renderer-x")),
               bytes(imagecodecs.png_encode(np.asarray(source), level=1, filter=imagecodecs.PNG.FILTER.SUB))]
    webp = io.BytesIO()
    source.save(webp, format="WEBP", lossless=True)
    uploads.append(webp.getvalue())
    assert len(set(uploads)) == len(uploads)  # the uploads differ
    results = [process_image(data, "x", [(64, ())]) for data in uploads]
    assert len({clean.png for clean, _ in results}) == 1
    assert len({shown[(64, ())].png for _, shown in results}) == 1


def png_bytes_of(image: Image.Image, **save: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **save)
    return buffer.getvalue()


def _software_chunk(name: str) -> PngImagePlugin.PngInfo:
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", name)
    return info
