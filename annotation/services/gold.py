"""Gold trials of a ``pairwise_reference`` study (issue 30; docs/protocol.md "Gold trials").

A gold trial shows a page's reference, the reference itself as one candidate and a visibly
degraded copy of it as the other; the known answer is the identical side. The degraded copy is
made here from the page's own display image (same width and height, 8-bit RGB PNG, stored under
its content hash like every other shown image, through ``annotation.images.staged_images`` and the media storage, as
``display_images`` stores the display variants): a heavy Gaussian blur, a shuffle of a 4×4 grid
of tiles and a grey patch over the middle third. The tiles are shuffled from a seed derived from
the study seed and the page, so the same study always gets the same gold images.

Pillow does the pixel work (blur, crop/paste, draw); nothing here is hand-rolled image maths.
"""

from __future__ import annotations

import hashlib

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from annotation.errors import ArbiterError
from annotation.images import CleanImage, decode_stored_png, encode_png, staged_images
from annotation.media import read_media
from annotation.models import Page, StoredImage, Study
from annotation.services.display_images import stored_image_staged

GRID = 4
GREY = (128, 128, 128)


def degraded_pixels(rgb: Image.Image, *, seed: int) -> Image.Image:
    """A visibly degraded copy of ``rgb`` of the same size: blur, tile shuffle, grey patch."""
    rgb = rgb.convert("RGB")
    width, height = rgb.size
    blurred = rgb.filter(ImageFilter.GaussianBlur(radius=max(4.0, width / 60)))
    out = blurred.copy()
    xs = [width * i // GRID for i in range(GRID + 1)]
    ys = [height * i // GRID for i in range(GRID + 1)]
    cells = [(c, r) for r in range(GRID) for c in range(GRID)]
    order = np.random.default_rng(seed).permutation(len(cells))
    if (order == np.arange(len(cells))).all():  # never leave the tiles in place
        order = np.roll(order, 1)
    for target, source in zip(cells, (cells[int(i)] for i in order), strict=True):
        tc, tr = target
        sc, sr = source
        tile = blurred.crop((xs[sc], ys[sr], xs[sc + 1], ys[sr + 1]))
        tile = tile.resize((max(xs[tc + 1] - xs[tc], 1), max(ys[tr + 1] - ys[tr], 1)))
        out.paste(tile, (xs[tc], ys[tr]))
    ImageDraw.Draw(out).rectangle(
        (width // 3, height // 3, max(2 * width // 3, width // 3 + 1), max(2 * height // 3, height // 3 + 1)),
        fill=GREY,
    )
    out.info = {}
    return out


def _page_seed(study: Study, page: Page) -> int:
    state = np.random.SeedSequence([int(study.seed or 0), int(page.pk), 30]).generate_state(1, dtype=np.uint32)
    return int(state[0])


def study_gold_images(*, study: Study, page_ids: set[int]) -> dict[int, StoredImage]:
    """page id → the stored degraded copy of that page's shown reference (created when missing).

    Call inside the caller's ``transaction.atomic()``: the files are published before it returns
    and removed again if the block raises (``staged_images``).
    """
    pages = list(Page.objects.filter(study=study, pk__in=page_ids).select_related("image"))
    out: dict[int, StoredImage] = {}
    with staged_images() as stage:
        for page in pages:
            if page.image is None:
                raise ArbiterError(f"page '{page.external_id}' has no reference image; a gold trial needs one")
            try:
                data = read_media(str(page.image.file.name))
            except OSError as exc:
                raise ArbiterError(
                    f"image {page.image.sha256[:12]} of page '{page.external_id}' cannot be read ({exc.strerror or exc})"
                ) from None
            pixels = degraded_pixels(decode_stored_png(data), seed=_page_seed(study, page))
            png = encode_png(pixels)
            clean = CleanImage(sha256=hashlib.sha256(png).hexdigest(), png=png, width=pixels.width,
                               height=pixels.height)
            out[page.pk] = stored_image_staged(stage, StoredImage, clean)
        stage.publish()
    return out

