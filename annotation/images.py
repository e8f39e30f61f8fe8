"""Safe image intake, content-addressed storage and media neutralization
(docs/protocol.md "The study model", "Files").

Every image that enters Arbiter is opened with Pillow restricted to PNG, JPEG and WebP, checked
against byte, edge and pixel limits *before* its pixels are decoded (so a decompression bomb is
refused, not loaded), decoded fully (a truncated file is refused), and re-encoded from pixels as
PNG: no metadata chunk, no trailing bytes, no name from the bundle survives. The file is stored
under the SHA-256 of the re-encoded bytes, so re-encoding the same pixels gives the same name.

Writes are staged: :class:`ImageStaging` writes new files under a staging folder and moves them
into place only when the caller commits; on any error nothing new is left in the media folder.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from PIL import Image, ImageDraw, ImageFile, ImageOps

from annotation.errors import ValidationFailed

if TYPE_CHECKING:
    import numpy as np

ALLOWED_FORMATS = ("PNG", "JPEG", "WEBP")
ImageFile.LOAD_TRUNCATED_IMAGES = False
# Our own limit (checked before decoding) is the one that matters; keep Pillow's bomb guard on too.
Image.MAX_IMAGE_PIXELS = max(int(getattr(settings, "ARBITER_IMAGE_MAX_PIXELS", 60_000_000)), 1)

NEUTRAL_FILL = (200, 200, 200)
NEUTRAL_EDGE = (120, 120, 120)


@dataclass(frozen=True)
class CleanImage:
    """A validated image, re-encoded as metadata-free PNG."""

    sha256: str
    png: bytes
    width: int
    height: int
    # The pixel mode kept from the upload (RGB, RGBA or L); display images are always RGB.
    mode: str = "RGB"

    @property
    def relative_path(self) -> str:
        return f"images/{self.sha256[:2]}/{self.sha256}.png"


def _limits() -> tuple[int, int, int]:
    return (
        int(settings.ARBITER_IMAGE_MAX_BYTES),
        int(settings.ARBITER_IMAGE_MAX_PIXELS),
        int(settings.ARBITER_IMAGE_MAX_EDGE),
    )


# 8-bit pixel modes libpng writes straight from an array (channels per pixel).
_FAST_MODES = {"RGB": 3, "RGBA": 4, "L": 1}
# The libpng paths hold a whole copy of the pixels (as an array) beside Pillow's; above this size
# (a 4,000 × 4,000 page) Pillow's row-streaming decoder and encoder keep the peak memory down
# (tests/security/test_zip_bundles.py: a 60-megapixel page stays under 512 MB).
_FAST_MAX_PIXELS = 16_000_000
# zlib level of every PNG libpng writes (see encode_png).
PNG_LEVEL = 2


def encode_png(image: Image.Image, *, array: np.ndarray | None = None) -> bytes:
    """Deterministic PNG bytes of an image's pixels (no text, EXIF, ICC or time chunks).

    8-bit RGB, RGBA and L pixels go through libpng (``imagecodecs``) at zlib level 2 with the Up
    filter on every row: Pillow's encoder tries all five filters on every row, which cost 85 % of
    a bundle import's image time, and level 2 takes half the time of level 6 for files about a
    sixth larger (benchmarks/bench_new_study.py, docs/decisions/0002-images-stored-as-png.md). One level and
    one filter for every image: the bytes depend on the pixels only, never on the encoder of the upload.
    A colour key (``transparency``) needs a tRNS chunk that only Pillow writes; such images, rare,
    keep Pillow's encoder. ``array``: the same pixels as a NumPy array, when the caller has them
    (a copy out of Pillow costs as much as the encoding).
    """
    if image.mode in _FAST_MODES and "transparency" not in image.info and image.width * image.height <= _FAST_MAX_PIXELS:
        import imagecodecs  # with NumPy: loaded by the processes that encode images only
        import numpy as np

        pixels = array if array is not None else np.asarray(image)
        return bytes(imagecodecs.png_encode(pixels, level=PNG_LEVEL, filter=imagecodecs.PNG.FILTER.UP))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def _fast_png_array(image: Image.Image, data: bytes) -> np.ndarray | None:
    """The pixels of a plain 8-bit PNG decoded by libpng, or None to let Pillow decode it.

    Only when Pillow's header reading gives an 8-bit RGB, RGBA or L PNG with no colour key and
    no EXIF rotation (the cases where both decoders give the same pixels, asserted by
    tests/annotation/test_images.py); libpng is several times faster and refuses truncated or
    corrupt data the same way.
    """
    if image.format != "PNG" or image.mode not in _FAST_MODES or "transparency" in image.info:
        return None
    if image.width * image.height > _FAST_MAX_PIXELS:
        return None
    # An eXIf chunk may follow the pixels, where a header read does not see it; the bytes may
    # also occur inside compressed data, which only sends the image to Pillow.
    if "exif" in image.info or b"eXIf" in data:
        return None
    import imagecodecs
    import numpy as np

    try:
        array = imagecodecs.png_decode(data)
    except imagecodecs.PngError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    channels = _FAST_MODES[image.mode]
    expected = (image.height, image.width) if channels == 1 else (image.height, image.width, channels)
    if array.dtype != np.uint8 or array.shape != expected:
        return None
    return array


def _normalized_mode(image: Image.Image) -> Image.Image:
    if image.mode in ("RGB", "RGBA", "L"):
        return image
    has_alpha = image.mode in ("LA", "PA", "RGBa", "La") or (image.mode == "P" and "transparency" in image.info)
    return image.convert("RGBA" if has_alpha else "RGB")


def clean_image(data: bytes, *, where: str) -> CleanImage:
    """Validate and re-encode image bytes. ``where`` names the source for error messages."""
    return decode_clean_image(data, where=where)[0]


@contextmanager
def _decoding(where: str) -> Iterator[None]:
    """Pillow's errors as one-line ValidationFailed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except ValidationFailed:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ValidationFailed(
            "the image is too large to decode safely (decompression bomb refused)", where=where
        ) from None
    except Image.UnidentifiedImageError:
        raise ValidationFailed("not a PNG, JPEG or WebP image", where=where) from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValidationFailed(f"the image cannot be decoded ({' '.join(str(exc).split())})", where=where) from None


def _open_checked(data: bytes, *, where: str) -> Image.Image:
    """The image opened lazily (header only) once its bytes and pixel counts are within limits.

    Call inside :func:`_decoding`.
    """
    max_bytes, max_pixels, max_edge = _limits()
    if not data:
        raise ValidationFailed("the image file is empty", where=where)
    if len(data) > max_bytes:
        raise ValidationFailed(f"the image is {len(data):,} bytes, over the {max_bytes:,}-byte limit", where=where)
    # The buffer is in memory: nothing to close, and the pixels outlive the caller's block.
    image = Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
    width, height = image.size
    if width < 1 or height < 1:
        raise ValidationFailed("the image has no pixels", where=where)
    if width > max_edge or height > max_edge or width * height > max_pixels:
        raise ValidationFailed(
            f"the image is too large: {width} × {height} pixels, over the limit "
            f"({max_edge} px per edge, {max_pixels:,} pixels)",
            where=where,
        )
    return image


def decode_clean_image(data: bytes, *, where: str) -> tuple[CleanImage, Image.Image]:
    """:func:`clean_image` that also returns the decoded pixels (for neutralization without a
    second decode: a 60-megapixel page costs 180 MB per copy)."""
    with _decoding(where):
        image = _open_checked(data, where=where)
        array = _fast_png_array(image, data)
        if array is not None:
            pixels = Image.fromarray(array, image.mode)
        else:
            image.load()
            # In place: a copy would double the peak memory of a large page.
            ImageOps.exif_transpose(image, in_place=True)
            pixels = _normalized_mode(image)
        # Nothing but pixels survives: no ICC profile, EXIF, XMP or text (a colour key stays).
        pixels.info = {k: v for k, v in pixels.info.items() if k == "transparency"}
        png = encode_png(pixels, array=array)
        width, height = pixels.size
    clean = CleanImage(sha256=hashlib.sha256(png).hexdigest(), png=png, width=width, height=height, mode=pixels.mode)
    return clean, pixels


def clean_image_shown_as_is(data: bytes, *, where: str, width: int) -> CleanImage | None:
    """The clean image when it is also its own shown variant at ``width`` (a plain 8-bit RGB PNG
    of that width, no colour key), without making a Pillow copy of its pixels; else None.

    The common candidate of a bundle: decoded once by libpng and encoded once from the array.
    """
    with _decoding(where):
        image = _open_checked(data, where=where)
        if image.mode != "RGB" or image.width != width:
            return None
        array = _fast_png_array(image, data)
        if array is None:
            return None
        png = encode_png(image, array=array)
    return CleanImage(sha256=hashlib.sha256(png).hexdigest(), png=png, width=image.width, height=image.height)


# --- blinding by geometry and encoding (SECURITY.md row 16) -----------------------------------
#
# What raters and judges see of a page is never the upload itself: a renderer's pixel size
# (viewport, device pixel ratio), its colour mode (alpha, greyscale) and its file format would
# follow one system across every trial. Every shown image is 8-bit RGB with alpha composited on
# white, encoded by :func:`encode_png` (one compression level, no ancillary chunks), and every
# candidate is scaled to its page reference's pixel width, aspect kept. The original stays
# stored for researchers (and the bundle export).

DISPLAY_BACKGROUND = (255, 255, 255)


def display_width(reference_width: int) -> int:
    """The width every image of a page is shown at: its reference's, at most
    ``ARBITER_DISPLAY_MAX_WIDTH`` (a 7,745 px page would otherwise scale its candidates up to it)."""
    return max(1, min(int(reference_width), int(getattr(settings, "ARBITER_DISPLAY_MAX_WIDTH", 4096))))


def display_width_of(widths: Sequence[int]) -> int:
    """The one display width of a study without reference images: the lower median of its items'."""
    ordered = sorted(w for w in widths if w > 0)
    if not ordered:
        raise ValueError("no image widths")
    return display_width(ordered[(len(ordered) - 1) // 2])


def probe_width(data: bytes, *, where: str) -> int:
    """An image's pixel width after its EXIF orientation, read from the header (no decoding);
    refuses what :func:`decode_clean_image` would refuse before decoding, with its messages."""
    with _decoding(where):
        image = _open_checked(data, where=where)
        width, height = image.size
        # Pillow reads a PNG's EXIF by decoding the whole image (the chunk may follow the pixels):
        # a PNG without an eXIf chunk has no orientation to read.
        if image.format == "PNG" and "exif" not in image.info and b"eXIf" not in data:
            return width
        orientation = image.getexif().get(0x0112, 1)
    return height if orientation in (5, 6, 7, 8) else width


def display_pixels(pixels: Image.Image, width: int, *, where: str) -> Image.Image:
    """``pixels`` as shown: 8-bit RGB on white, scaled to ``width`` (aspect kept).

    RGB pixels already at ``width`` are returned as they are (no copy of a 60-megapixel page):
    the caller must copy before drawing on the result while it still needs ``pixels``.
    """
    image = pixels
    if image.mode in ("I", "I;16", "I;16L", "I;16B", "I;16N", "F"):
        image = image.point(lambda v: v / 256).convert("L") if image.mode != "F" else image.convert("L")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, (*DISPLAY_BACKGROUND, 255))
        canvas.alpha_composite(rgba)
        rgb = canvas.convert("RGB")
    else:
        rgb = image if image.mode == "RGB" else image.convert("RGB")
    if rgb.width != width:
        height = max(1, round(rgb.height * width / rgb.width))
        _, max_pixels, max_edge = _limits()
        if width * height > max_pixels or height > max_edge:
            raise ValidationFailed(
                f"scaled to the page's width of {width} px the image would be {width} × {height} pixels, "
                f"over the limit ({max_edge} px per edge, {max_pixels:,} pixels)",
                where=where,
            )
        rgb = rgb.resize((width, height), Image.Resampling.LANCZOS)
    rgb.info = {}
    return rgb


def display_image(
    pixels: Image.Image, width: int, *, where: str, clean: CleanImage | None = None
) -> tuple[CleanImage, Image.Image]:
    """The shown variant of decoded ``pixels`` and its RGB pixels (see :func:`display_pixels`).

    ``clean`` (the PNG of ``pixels``) is reused when nothing changes: an RGB page at its own width
    is not encoded twice.
    """
    rgb = display_pixels(pixels, width, where=where)
    if rgb is pixels and clean is not None and clean.mode == "RGB":
        return clean, rgb
    png = encode_png(rgb)
    return CleanImage(sha256=hashlib.sha256(png).hexdigest(), png=png, width=rgb.width, height=rgb.height), rgb


def decode_stored_png(png: bytes) -> Image.Image:
    """The pixels of a stored (already clean) PNG."""
    with Image.open(io.BytesIO(png), formats=("PNG",)) as image:
        image.load()
        return image.copy() if image.mode != "P" else image.convert("RGBA" if "transparency" in image.info else "RGB")


def _box_pixels(bbox_1000: Sequence[float], width: int, height: int) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = bbox_1000
    return (
        round(x0 * width / 1000),
        round(y0 * height / 1000),
        round(x1 * width / 1000) - 1,
        round(y1 * height / 1000) - 1,
    )


def neutralize_media(
    image: CleanImage, media: Sequence[dict[str, Any]], *, pixels: Image.Image | None = None
) -> CleanImage | None:
    """Hide photograph and chart interiors, keep their presence and geometry
    (docs/protocol.md "The study model" settings).

    Each region becomes a flat grey box with its outline and a diagonal cross, so a rater or a
    judge still sees that a picture is there and where, but not what it shows. ``None`` when the
    image has no media regions. ``pixels`` (from :func:`decode_clean_image`) saves decoding the
    PNG again; RGB pixels are drawn on in place, so the caller must not use them afterwards.
    """
    if not media:
        return None
    if pixels is not None and pixels.mode == "RGB":
        canvas = pixels
    elif pixels is not None:
        canvas = pixels.convert("RGB")
    else:
        with Image.open(io.BytesIO(image.png)) as source:
            canvas = source.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    for region in media:
        box = _box_pixels(region["bbox_1000"], canvas.width, canvas.height)
        if box[2] < box[0] or box[3] < box[1]:
            continue
        draw.rectangle(box, fill=NEUTRAL_FILL, outline=NEUTRAL_EDGE, width=2)
        draw.line((box[0], box[1], box[2], box[3]), fill=NEUTRAL_EDGE, width=1)
        draw.line((box[0], box[3], box[2], box[1]), fill=NEUTRAL_EDGE, width=1)
    png = encode_png(canvas)
    return CleanImage(sha256=hashlib.sha256(png).hexdigest(), png=png, width=canvas.width, height=canvas.height)


def stage_png(image: CleanImage, *, staging: Path, root: Path) -> None:
    """Write ``image`` into a local staging folder, unless the media folder or the staging folder
    already holds it. Safe in worker processes: same name, same bytes (content addressed), and
    each file appears whole (written under a private name, then renamed)."""
    target = staging / f"{image.sha256}.png"
    if target.exists() or (root / image.relative_path).exists():
        return
    private = staging / f".{image.sha256}.{os.getpid()}.{threading.get_ident()}"
    private.write_bytes(image.png)
    os.replace(private, target)


@dataclass
class ImageStaging:
    """Collects new image files under a staging folder; :meth:`publish` moves them into place.

    Use through :func:`staged_images`. Files that already exist (same content hash) are not
    rewritten, so publishing is idempotent and a rollback only removes what this import added.

    On local disk (``root`` set) the staging folder is inside the media folder and publishing is a
    rename; in a bucket (``root`` is ``None``) each new object is uploaded under its content-hash
    key as it is added (annotation/media.py), and removed again if the import fails.
    """

    root: Path | None
    staging: Path
    # sha256 → relative path; the pixel bytes are on disk, not kept here (imports of 10,000 images).
    staged: dict[str, str] = field(default_factory=dict)
    published: list[Path] = field(default_factory=list)
    created_dirs: list[Path] = field(default_factory=list)
    # Keys this import uploaded to the bucket (removed again on rollback).
    uploaded: list[str] = field(default_factory=list)

    def add(self, image: CleanImage) -> CleanImage:
        if self.root is None:
            return self._upload(image)
        if image.sha256 not in self.staged:
            stage_png(image, staging=self.staging, root=self.root)
            self.staged[image.sha256] = image.relative_path
        return image

    def local_folders(self) -> tuple[Path, Path] | None:
        """(staging folder, media folder) when staging on local disk, where worker processes may
        write files themselves (:func:`stage_png`, then :meth:`add_written`); None in a bucket."""
        return None if self.root is None else (self.staging, self.root)

    def add_written(self, sha256: str, relative_path: str) -> None:
        """An image that :func:`stage_png` already put into this staging folder (or found published)."""
        assert self.root is not None, "a bucket's images are uploaded by add()"
        self.staged.setdefault(sha256, relative_path)

    def _upload(self, image: CleanImage) -> CleanImage:
        """In a bucket the object is written at once, before the caller's transaction (an upload
        inside it would hold the database's write lock): a failure later removes it again."""
        from annotation.media import media_exists, save_media

        if image.sha256 in self.staged:
            return image
        key = image.relative_path
        if not media_exists(key):
            save_media(key, io.BytesIO(image.png))
            self.uploaded.append(key)
        self.staged[image.sha256] = key
        return image

    def publish(self) -> None:
        if self.root is None:
            return  # uploaded by add()
        # One link per file (it fails if the file is there: the media folder's copy is kept, and
        # is not this import's to remove on a rollback); the staging folder goes afterwards. Plain
        # strings and one check per folder: this runs in the caller's transaction, 10,989 times
        # for 1,000 pages × 10 systems.
        staging, root = str(self.staging), str(self.root)
        ready: set[str] = set()
        for sha, relative_path in self.staged.items():
            source, target = f"{staging}/{sha}.png", f"{root}/{relative_path}"
            folder = os.path.dirname(target)
            if folder not in ready:
                self._make_folders(Path(folder))
                ready.add(folder)
            try:
                os.link(source, target)
            except FileExistsError:
                continue
            except FileNotFoundError:
                if not os.path.exists(source):
                    continue  # already in the media folder when it was staged
                # Another import's rollback removed the (then empty) folder meanwhile.
                self._make_folders(Path(folder))
                os.link(source, target)
            self.published.append(Path(target))

    def _make_folders(self, folder: Path) -> None:
        for path in (folder.parent, folder):
            if not path.is_dir():
                path.mkdir(exist_ok=True)
                self.created_dirs.append(path)

    def unpublish(self) -> None:
        for path in self.published:
            path.unlink(missing_ok=True)
        self.published.clear()
        for folder in reversed(self.created_dirs):
            with suppress(OSError):
                folder.rmdir()
        self.created_dirs.clear()
        if self.uploaded:
            from annotation.media import MediaUnavailable, delete_media

            # With the bucket gone the objects stay: unreferenced content-hash keys, harmless, and
            # reused by the next import of the same pixels (README "Object storage").
            for key in self.uploaded:
                try:
                    delete_media(key)
                except MediaUnavailable:
                    break  # the bucket is away: waiting out a time-out per object would change nothing
            self.uploaded.clear()


@contextmanager
def staged_images() -> Iterator[ImageStaging]:
    """Stage image files for one all-or-nothing import.

    The caller adds images, writes its rows inside ``transaction.atomic()`` and calls
    ``publish()`` just before leaving the atomic block; if the block raises, published files are
    removed again. The staging folder is always deleted.
    """
    from annotation.media import media_is_local

    if not media_is_local():
        stage = ImageStaging(root=None, staging=Path(tempfile.gettempdir()))
        try:
            yield stage
        except BaseException:
            stage.unpublish()
            raise
        return
    root = Path(settings.MEDIA_ROOT)
    staging_parent = root / ".staging"
    staging_parent.mkdir(parents=True, exist_ok=True)
    staging = staging_parent / uuid.uuid4().hex
    staging.mkdir()
    stage = ImageStaging(root=root, staging=staging)
    try:
        yield stage
    except BaseException:
        stage.unpublish()
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        with suppress(OSError):
            staging_parent.rmdir()


def stored_image_path(relative: str) -> Path:
    """A stored image's file on local disk (only when the media storage is the local folder)."""
    return Path(settings.MEDIA_ROOT) / relative
