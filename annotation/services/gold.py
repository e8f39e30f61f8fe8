"""Gold trials of a ``pairwise_reference`` study (issue 30; docs/protocol.md "Planning the human study").

A gold trial shows a page's reference, a copy of the reference as one candidate and a visibly
degraded copy of it as the other; the known answer is the identical side. Both candidates are
made here from the page's shown reference (the media-neutralized one when the study neutralizes
media, as the reference slot shows; decision 0060), as 8-bit RGB PNGs stored under their content hash like every
other shown image (through ``annotation.images.staged_images`` and the media storage, as
``display_images`` stores the display variants).

Size blinding (SECURITY.md): real candidates of a page differ in height (renders of different
systems), so two candidates of exactly the reference's size would mark a gold trial. Each gold
candidate takes instead the pixel size of a real shown candidate of the same page (its
neutralized variant when the study neutralizes, as the candidate slots show): two distinct
candidates drawn with the page's seed (one when the page has a single rendered candidate), the
reference copy fitted to the first and the degraded copy to the second (``fitted``: scaled to the
width, then cropped or padded with white at the bottom, as a taller or shorter render would be).
The degradation is a heavy Gaussian blur, a shuffle of a 4×4 grid of tiles and a grey patch over
the middle third. Everything is drawn from a seed derived from the study seed and the page, so
the same study always gets the same gold images.

Byte-size blinding (issue 37 item 3): a blurred page compresses to about a quarter of its sharp
copy, so the two candidates' ``Content-Length`` told every gold trial apart. The degraded copy
therefore gets seeded pixel noise, its strength found by bisection, until its PNG has the byte
size that makes the pair's byte ratio the ratio of the two real candidates whose pixel sizes it
took (``bytes(second) / bytes(first)``). A gold pair's sizes and byte sizes are then those of a
real pair of the same page, and the PNG keeps only ``IHDR``/``IDAT``/``IEND`` (no padding chunk).

Pillow does the pixel work (blur, crop/paste, draw); nothing here is hand-rolled image maths.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from PIL import Image, ImageDraw, ImageFilter

from annotation.errors import ArbiterError
from annotation.images import CleanImage, ImageStaging, decode_stored_png, encode_png, staged_images
from annotation.media import read_media
from annotation.models import Candidate, Page, StoredImage, Study
from annotation.services.display_images import stored_image_staged

if TYPE_CHECKING:
    import numpy as np

GRID = 4
GREY = (128, 128, 128)


def degraded_pixels(rgb: Image.Image, *, seed: int) -> Image.Image:
    """A visibly degraded copy of ``rgb`` of the same size: blur, tile shuffle, grey patch."""
    import numpy as np

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


def fitted(rgb: Image.Image, size: tuple[int, int]) -> Image.Image:
    """``rgb`` at ``size``: scaled to its width (aspect kept), then cropped or padded with white at the bottom."""
    rgb = rgb.convert("RGB")
    width, height = size
    if rgb.width != width:
        rgb = rgb.resize((width, max(1, round(rgb.height * width / rgb.width))), Image.Resampling.LANCZOS)
    out = Image.new("RGB", (width, height), "white")
    out.paste(rgb.crop((0, 0, width, min(height, rgb.height))), (0, 0))
    out.info = {}
    return out


def _page_seed(study: Study, page: Page) -> int:
    import numpy as np

    state = np.random.SeedSequence([int(study.seed or 0), int(page.pk), 30]).generate_state(
        1, dtype=np.uint32
    )
    return int(state[0])


def _gold_sizes(
    sizes: list[tuple[int, int, int]], *, seed: int, fallback: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int], float]:
    """The pixel sizes of the reference copy and of the degraded copy, and the byte ratio the pair
    should have: those of two distinct real candidates ``(width, height, bytes)`` drawn at random
    (the same one twice, ratio 1, when the page has only one)."""
    import numpy as np

    if not sizes:
        return fallback, fallback, 1.0
    rng = np.random.default_rng([seed, 1])
    if len(sizes) == 1:
        return sizes[0][:2], sizes[0][:2], 1.0
    first, second = (sizes[int(i)] for i in rng.choice(len(sizes), size=2, replace=False))
    return first[:2], second[:2], second[2] / first[2] if first[2] else 1.0


NOISE = 40.0  # grey levels (standard deviation) of the noise on a noisy pixel
BYTES_TOLERANCE = 0.02


def degraded_at_byte_size(rgb: Image.Image, *, seed: int, target: int) -> Image.Image:
    """``degraded_pixels(rgb)`` brought within 2 % of ``target`` PNG bytes (the closest found when
    that cannot be reached), by one knob bisected over ``[0, 1]``:

    - too small (a blurred page compresses better than its sharp copy): seeded noise on a share of
      the pixels; the noisy pixels of a smaller share are among those of a larger one, so the size
      grows with the share in small steps, even for a page that compresses very well;
    - too large (the blur's gradients can compress worse than flat text): the grey band over the
      middle grows in height, one row at a time.
    """
    import numpy as np

    degraded = degraded_pixels(rgb, seed=seed)
    natural = len(encode_png(degraded))
    if abs(natural - target) <= target * BYTES_TOLERANCE:
        return degraded
    base = np.asarray(degraded, dtype=np.float32)
    height = base.shape[0]
    if natural < target:
        rng = np.random.default_rng([seed, 2])
        noise = NOISE * rng.standard_normal(base.shape, dtype=np.float32)
        rank = rng.random(base.shape[:2], dtype=np.float32)[..., None]  # noisy when rank < share

        def at(share: float) -> np.ndarray:
            return np.clip(base + np.where(rank < share, noise, 0), 0, 255).astype(np.uint8)

    else:
        rows = np.abs(np.arange(height) - (height - 1) / 2)  # grey from the middle outwards

        def at(share: float) -> np.ndarray:
            pixels = base.astype(np.uint8)
            pixels[rows < share * height / 2] = GREY
            return pixels

    low, high = 0.0, 1.0
    best, best_gap = degraded, abs(natural - target) / target
    for _ in range(20):
        share = (low + high) / 2
        pixels = at(share)
        size = len(encode_png(Image.fromarray(pixels, "RGB"), array=pixels))
        gap = abs(size - target) / target
        if gap < best_gap:
            best, best_gap = Image.fromarray(pixels, "RGB"), gap
        if gap <= BYTES_TOLERANCE:
            break
        grow = size < target  # more noise, or less grey
        low, high = ((share, high) if grow else (low, share)) if natural < target else (
            (low, share) if grow else (share, high))
    best.info = {}
    return best


def _stored(stage: ImageStaging, pixels: Image.Image) -> StoredImage:
    png = encode_png(pixels)
    clean = CleanImage(
        sha256=hashlib.sha256(png).hexdigest(), png=png, width=pixels.width, height=pixels.height
    )
    return stored_image_staged(stage, StoredImage, clean)


def study_gold_images(*, study: Study, page_ids: set[int]) -> dict[int, tuple[StoredImage, StoredImage]]:
    """page id → (the reference copy, the degraded copy) shown as canonical A and B of that page's
    gold trials (created when missing; module docstring for their sizes).

    Call inside the caller's ``transaction.atomic()``: the files are published before it returns
    and removed again if the block raises (``staged_images``).
    """
    pages = list(
        Page.objects.filter(study=study, pk__in=page_ids).select_related("image", "neutralized_image")
    )
    # The candidates as shown: their neutralized variant when the study neutralizes and they have one.
    sizes: dict[int, list[tuple[int, int, int]]] = {}
    for page_id, *plain, neutral_width, neutral_height, neutral_bytes in (
        Candidate.objects.filter(page__study=study, page_id__in=page_ids, rendered=True, image__isnull=False)
        .order_by("page_id", "system__position", "system_id")
        .values_list(
            "page_id", "image__width", "image__height", "image__size_bytes",
            "neutralized_image__width", "neutralized_image__height", "neutralized_image__size_bytes",
        )
    ):
        width, height, size_bytes = (
            (neutral_width, neutral_height, neutral_bytes) if study.neutralize_media and neutral_width else plain
        )
        sizes.setdefault(page_id, []).append((int(width), int(height), int(size_bytes)))
    out: dict[int, tuple[StoredImage, StoredImage]] = {}
    with staged_images() as stage:
        for page in pages:
            shown = (
                page.neutralized_image if study.neutralize_media and page.neutralized_image else page.image
            )
            if shown is None:
                raise ArbiterError(
                    f"page '{page.external_id}' has no reference image; a gold trial needs one"
                )
            try:
                data = read_media(str(shown.file.name))
            except OSError as exc:
                raise ArbiterError(
                    f"image {shown.sha256[:12]} of page '{page.external_id}' cannot be read ({exc.strerror or exc})"
                ) from None
            seed = _page_seed(study, page)
            reference = decode_stored_png(data)
            match_size, degraded_size, byte_ratio = _gold_sizes(
                sizes.get(page.pk, []), seed=seed, fallback=reference.size
            )
            match = _stored(stage, fitted(reference, match_size))
            degraded = _stored(
                stage,
                degraded_at_byte_size(
                    fitted(reference, degraded_size), seed=seed, target=round(match.size_bytes * byte_ratio)
                ),
            )
            out[page.pk] = (match, degraded)
        stage.publish()
    return out
