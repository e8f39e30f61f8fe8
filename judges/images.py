"""Fitting images to a judge's limits (docs/protocol.md "Judges and calibration" (An image over a judge's
limits ...)).

Pure (Pillow only, no Django). The stored image is never modified: the judge gets, in order,
1. the stored PNG unchanged when it is within the limits;
2. otherwise a high-quality JPEG of the same pixels (edge-limited images are first downscaled to the
   edge limit, since re-encoding cannot fix an edge);
3. and, while it is still over the byte limit, the image downscaled on its long edge (aspect
   ratio kept).
Whenever the pixels change (a downscale), both a PNG and a JPEG are encoded and the smaller is
kept: flat document renderings are often smaller as PNG, photographic ones as JPEG.
Every repair is described by a :class:`PreparedImage` ``repair`` dict, stored on the output.
"""

from __future__ import annotations

import base64
import io
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

JPEG_QUALITY = 90
MIN_EDGE = 64


class ImageTooLarge(ValueError):
    """The image cannot be brought under the limits without shrinking it below ``MIN_EDGE``."""


@dataclass(frozen=True)
class PreparedImage:
    data: bytes
    mime: str
    width: int
    height: int
    repair: dict[str, Any] | None = field(default=None)
    encoded: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.encoded:  # encoded once per prepared image, not once per call
            object.__setattr__(self, "encoded", base64.b64encode(self.data).decode("ascii"))


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    rgb.save(buffer, format="JPEG", quality=JPEG_QUALITY, subsampling=0)
    return buffer.getvalue()


def _png(image: Image.Image) -> bytes:
    # Fast deflate: on renderings it is about as small as the default level, at half the CPU.
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _smallest(image: Image.Image) -> tuple[bytes, str]:
    """The smaller of a PNG and a JPEG of these pixels, and its format."""
    jpeg = _jpeg(image)
    png = _png(image)
    return (png, "png") if len(png) < len(jpeg) else (jpeg, "jpeg")


def _resized(image: Image.Image, long_edge: int) -> Image.Image:
    w, h = image.size
    scale = long_edge / max(w, h)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def prepare_image(png: bytes, width: int, height: int, *, max_edge: int | None, max_bytes: int | None) -> PreparedImage:
    """The image a judge gets under ``max_edge`` (pixels) and ``max_bytes`` (encoded bytes)."""
    edge_ok = not max_edge or max(width, height) <= max_edge
    bytes_ok = not max_bytes or len(png) <= max_bytes
    if edge_ok and bytes_ok:
        return PreparedImage(png, "image/png", width, height)
    steps: list[str] = []
    with Image.open(io.BytesIO(png)) as source:
        source.load()
        image = source.convert("RGB")
    if not edge_ok:
        assert max_edge is not None
        image = _resized(image, max_edge)
        steps.append(f"downscaled to long edge {max_edge}")
        data, fmt = _smallest(image)
    else:
        data, fmt = _jpeg(image), "jpeg"  # same pixels: the PNG is the original, already too large
    steps.insert(0, f"re-encoded as JPEG q{JPEG_QUALITY}" if fmt == "jpeg" else "re-encoded as PNG (smaller than JPEG)")
    while max_bytes and len(data) > max_bytes:
        long_edge = max(image.size)
        # Bytes scale roughly with area: shrink the edge by sqrt(ratio), with a margin.
        target = math.floor(long_edge * math.sqrt(max_bytes / len(data)) * 0.95)
        target = min(target, long_edge - 1)
        if target < MIN_EDGE:
            raise ImageTooLarge(
                f"the image cannot fit {max_bytes:,} bytes above {MIN_EDGE} px on its long edge"
            )
        image = _resized(image, target)
        data, fmt = _smallest(image)
        steps.append(f"downscaled to long edge {target} ({fmt.upper()}, the smaller encoding)")
    repair = {
        "original": {"width": width, "height": height, "bytes": len(png), "format": "png"},
        "sent": {"width": image.width, "height": image.height, "bytes": len(data), "format": fmt},
        "steps": steps,
        "limits": {"max_edge": max_edge, "max_bytes": max_bytes},
    }
    return PreparedImage(data, f"image/{fmt}", image.width, image.height, repair)


def prepare_images_alike(
    sources: Sequence[tuple[bytes, int, int]],
    prepared: Sequence[PreparedImage],
    *,
    max_edge: int | None,
    max_bytes: int | None,
) -> list[PreparedImage]:
    """The images of one request repaired alike (blinding, SECURITY.md row 16).

    ``prepared`` are the images each fitted on its own (:func:`prepare_image`). When none needed a
    repair they are returned as they are. Otherwise every image is scaled by one factor (the
    smallest any of them needed, smaller still while one is over ``max_bytes``) and encoded in one
    format: PNG or JPEG, whichever makes the three smaller together while each fits (issue 14:
    the repair keeps the smaller encoding). A candidate whose render compresses badly is then not
    the one JPEG, or the one at another width, beside PNGs of the others. ``sources`` are the
    stored ``(png, width, height)``.
    """
    if not any(p.repair for p in prepared):
        return list(prepared)
    scale = first_scale = min(p.width / w for p, (_, w, _) in zip(prepared, sources, strict=True))

    def encoded(png: bytes, size: tuple[int, int]) -> tuple[bytes, bytes]:
        # Decoded one at a time (a page can be 60 megapixels): only one image's pixels are held.
        with Image.open(io.BytesIO(png)) as source:
            source.load()
            image = source.convert("RGB")
        image = image if image.size == size else image.resize(size, Image.Resampling.LANCZOS)
        return _png(image), _jpeg(image)

    while True:
        sizes = [(max(1, round(w * scale)), max(1, round(h * scale))) for _, w, h in sources]
        # As prepare_image: only shrinking for the byte limit stops at MIN_EDGE (an edge limit is the judge's).
        if scale < first_scale and any(max(size) < MIN_EDGE for size in sizes):
            limits = ", ".join(
                part for part in (f"{max_bytes:,} bytes" if max_bytes else "", f"{max_edge} px" if max_edge else "") if part
            )
            raise ImageTooLarge(f"the images of the request cannot fit the judge's limits ({limits}) above {MIN_EDGE} px")
        pairs = [encoded(png, size) for (png, _, _), size in zip(sources, sizes, strict=True)]
        fitting = [
            (sum(len(d) for d in datas), fmt, datas)
            for fmt, datas in (("png", [p for p, _ in pairs]), ("jpeg", [j for _, j in pairs]))
            if not max_bytes or all(len(d) <= max_bytes for d in datas)
        ]
        if fitting:
            _, fmt, datas = min(fitting, key=lambda option: option[0])
            break
        assert max_bytes is not None
        smallest_over = max(min(len(p), len(j)) for p, j in pairs)
        scale = min(scale * math.sqrt(max_bytes / smallest_over) * 0.95, scale * 0.99)
    encoding = "PNG" if fmt == "png" else f"JPEG q{JPEG_QUALITY}"
    steps = [f"re-encoded as {encoding}, the smaller encoding (every image of the request, as one needed a repair)"]
    if scale < 1:
        steps.append(f"downscaled by {scale:.4f} (every image of the request alike)")
    out = []
    for (png, w, h), data, size in zip(sources, datas, sizes, strict=True):
        repair = {
            "original": {"width": w, "height": h, "bytes": len(png), "format": "png"},
            "sent": {"width": size[0], "height": size[1], "bytes": len(data), "format": fmt},
            "steps": steps,
            "limits": {"max_edge": max_edge, "max_bytes": max_bytes},
        }
        out.append(PreparedImage(data, f"image/{fmt}", size[0], size[1], repair))
    return out


def _held_bytes(item: PreparedImage | tuple[PreparedImage, ...]) -> int:
    images = item if isinstance(item, tuple) else (item,)
    return sum(len(image.data) + len(image.encoded) for image in images)


class PreparedImageCache:
    """A small thread-safe LRU of prepared images keyed on (sha256, limits), or of a request's
    images repaired alike keyed on (their sha256s, limits).

    A study's reference image is sent with every comparison of its page; preparing it once per
    process saves the decode/re-encode. Bounded by total bytes held.
    """

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], Any] = OrderedDict()  # a PreparedImage or a tuple of them
        self._size = 0
        self._lock = threading.Lock()
        self._inflight: dict[tuple[Any, ...], threading.Lock] = {}

    def get_or_prepare[T: (PreparedImage, tuple[PreparedImage, ...])](self, key: tuple[Any, ...], prepare: Callable[[], T]) -> T:
        """The cached image, or ``prepare()`` run once for concurrent callers asking for the same key.

        The calls of one comparison (2 orders × repeats) start together; without this each of them
        would re-encode the same three images.
        """
        item = self.get(key)
        if item is not None:
            return item
        with self._lock:
            key_lock = self._inflight.setdefault(key, threading.Lock())
        try:
            with key_lock:
                item = self.get(key)
                if item is None:
                    item = prepare()
                    self.put(key, item)
        finally:
            with self._lock:
                self._inflight.pop(key, None)
        return item

    def get(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: tuple[Any, ...], item: PreparedImage | tuple[PreparedImage, ...]) -> None:
        size = _held_bytes(item)
        with self._lock:
            if key in self._items or size > self.max_bytes:
                return
            self._items[key] = item
            self._size += size
            while self._size > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._size -= _held_bytes(old)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0
