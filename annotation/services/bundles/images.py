"""Image work of a bundle import, runnable in worker processes (docs/protocol.md "Files").

Kept apart from ``bundles.py`` so a fresh worker process can import it without the Django app
registry: it needs only settings (``DJANGO_SETTINGS_MODULE`` from the environment, the image
limits from the parent) and ``annotation.images``.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
from collections.abc import Iterable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from PIL import Image

from annotation.errors import ValidationFailed
from annotation.images import (
    CleanImage,
    clean_image_shown_as_is,
    decode_clean_image,
    display_image,
    neutralize_media,
    stage_png,
)

if TYPE_CHECKING:
    from annotation.services.bundles.reference_format import MediaRegion

# Image work is CPU-bound and Pillow holds the GIL while it encodes PNG into memory, so large
# imports clean their images in worker processes (one per core, at most 4). Workers are started
# fresh (forkserver/spawn, not fork: the web server may be multi-threaded) and get the image
# limits passed explicitly. Small imports (tests, the examples) stay in this process, where
# starting workers would cost more than it saves.
IMAGE_WORKERS = max(1, min(4, os.cpu_count() or 1))
PROCESS_POOL_MIN_IMAGES = 300
IMAGE_SETTINGS = ("ARBITER_IMAGE_MAX_BYTES", "ARBITER_IMAGE_MAX_PIXELS", "ARBITER_IMAGE_MAX_EDGE")

MediaKey = tuple[tuple[str, tuple[float, ...]], ...]


def media_key(media: Iterable[MediaRegion]) -> MediaKey:
    return tuple((m.kind, tuple(m.bbox_1000)) for m in media)


# What a rater or a judge is shown of one image: (display width, media regions); () = no regions.
Variant = tuple[int, MediaKey]


def process_image(data: bytes, where: str, variants: list[Variant]) -> tuple[CleanImage, dict[Variant, CleanImage]]:
    """The clean original and each shown variant: display geometry (``annotation.images``),
    media-neutralized when the variant has regions.

    Pixels are copied only when a later variant still needs them: a 60-megapixel page that is
    shown at its own width is decoded once and neutralized in place, as before display variants.
    """
    if len(variants) == 1 and not variants[0][1]:
        # Shown as it is (RGB at its page's width, no media): no Pillow copy of the pixels at all.
        as_is = clean_image_shown_as_is(data, where=where, width=variants[0][0])
        if as_is is not None:
            return as_is, {variants[0]: as_is}
    clean, pixels = decode_clean_image(data, where=where)
    shown: dict[Variant, CleanImage] = {}
    widths = sorted({width for width, _ in variants})
    for wi, width in enumerate(widths):
        plain, rgb = display_image(pixels, width, where=where, clean=clean)
        keys = sorted(key for w, key in variants if w == width)
        if () in keys:
            shown[(width, ())] = plain
        regions = [key for key in keys if key]
        for ki, key in enumerate(regions):
            in_place = ki == len(regions) - 1 and (rgb is not pixels or wi == len(widths) - 1)
            variant = neutralize_media(
                plain, [{"kind": kind, "bbox_1000": list(box)} for kind, box in key],
                pixels=rgb if in_place else rgb.copy(),
            )
            if variant is not None:
                shown[(width, key)] = variant
    return clean, shown


@dataclass(frozen=True)
class ImageInfo:
    """What the rows need to know about a staged image (no pixel bytes kept)."""

    sha256: str
    relative_path: str
    width: int
    height: int
    size_bytes: int
    mode: str = "RGB"

    @classmethod
    def of(cls, image: CleanImage) -> ImageInfo:
        return cls(image.sha256, image.relative_path, image.width, image.height, len(image.png), image.mode)


@dataclass(frozen=True)
class ImageJob:
    """One bundle image to clean: its bundle path (what errors name), the variants to make, and
    either the file to read (a folder bundle: the worker reads it) or its bytes (a ZIP member)."""

    where: str
    variants: tuple[Variant, ...]
    path: str | None = None
    data: bytes | None = None


# (the original, its shown variants): ImageInfo when the worker staged the files itself, else the
# CleanImage bytes for the parent to stage (a bucket is written by the parent only).
JobResult = tuple[CleanImage | ImageInfo, dict[Variant, CleanImage | ImageInfo]]


def read_capped(path: str | Path, *, where: str, limit: int) -> bytes:
    """A file's bytes, refused when over ``limit`` bytes (its size is checked before reading and
    never more than one byte past the cap is read)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                raise ValidationFailed(f"the file is {size:,} bytes, over the {limit:,}-byte limit", where=where)
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ValidationFailed(f"the file cannot be read ({exc.strerror or exc})", where=where) from None
    if len(data) > limit:
        raise ValidationFailed(f"the file is over the {limit:,}-byte limit", where=where)
    return data


def process_images(jobs: list[ImageJob], folders: tuple[str, str] | None) -> list[JobResult]:
    """:func:`process_image` for a batch of images, in a worker. With ``folders`` (staging folder,
    media folder: local media) the worker reads each file and writes the staged PNGs itself and
    returns only their hashes and sizes, so no pixel bytes cross between processes; otherwise it
    returns the PNGs. The first image that fails raises, as it would alone."""
    limit = int(settings.ARBITER_IMAGE_MAX_BYTES)
    staging, root = (Path(folders[0]), Path(folders[1])) if folders is not None else (None, None)
    results: list[JobResult] = []
    for job in jobs:
        data = job.data if job.data is not None else read_capped(str(job.path), where=job.where, limit=limit)
        clean, shown = process_image(data, job.where, list(job.variants))
        if staging is None or root is None:
            results.append((clean, dict(shown)))
            continue
        for image in (clean, *shown.values()):
            stage_png(image, staging=staging, root=root)
        results.append((ImageInfo.of(clean), {key: ImageInfo.of(image) for key, image in shown.items()}))
    return results


# glibc's malloc gives each buffer over its threshold fresh pages from the kernel and hands them
# back when it is freed: a 600 × 800 page's 1.4 MB of pixels (and the encoder's buffers) were
# faulted in anew for every image. Kept in the worker's heap instead (up to 128 MB left untrimmed;
# a 60-megapixel page, over 32 MB, still gets pages of its own), a worker's CPU per benchmark page
# fell from 5.4-6.5 to 3.8-4.0 ms (benchmarks/bench_new_study.py's pages).
_MALLOC_MMAP_THRESHOLD = 32 << 20
_MALLOC_TRIM_THRESHOLD = 128 << 20


def _keep_freed_memory() -> None:
    """``mallopt`` in this process when the C library is glibc; elsewhere nothing."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, _MALLOC_MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, _MALLOC_TRIM_THRESHOLD)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def _start_image_worker(limits: dict[str, int], max_image_pixels: int | None) -> None:
    """Give a fresh worker the parent's image limits (its settings module comes from the environment)."""
    for name, value in limits.items():
        setattr(settings, name, value)
    Image.MAX_IMAGE_PIXELS = max_image_pixels
    _keep_freed_memory()


def image_pool(n_images: int) -> Executor:
    """Where ``process_image`` runs: worker processes for big imports, one helper thread otherwise."""
    if n_images < PROCESS_POOL_MIN_IMAGES or IMAGE_WORKERS < 2:
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="bundle-image")
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(
        max_workers=IMAGE_WORKERS,
        mp_context=mp.get_context(method),
        initializer=_start_image_worker,
        initargs=({name: int(getattr(settings, name)) for name in IMAGE_SETTINGS}, Image.MAX_IMAGE_PIXELS),
    )
