"""A page as the objective protocol sees it: its size and its blocks (docs/protocol.md "The objective
protocol", "Ground truth blocks").

Two sources give the same :class:`PageBlocks`:

- a ground-truth JSON, ``{"page": {"width", "height"}, "blocks": [{"type", "text", "html"?,
  "latex"?, "bbox"}]}`` with ``bbox`` = ``[x0, y0, x1, y1]`` in the page's own units, read by
  :func:`parse_truth`, which checks every field and raises :class:`TruthError` naming the first bad
  one;
- a render's JSON (docs/rendering.md "The JSON of a render"): its ``dom.blocks`` (docs/protocol.md
  "Blocks from the DOM") with their ``box`` in CSS pixels of the captured image, read by
  :func:`from_render`.

:func:`load_page` reads either from a file, telling them apart by shape. Pure Python: no Django,
no app code, so a study's services, the command and the tests use it alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import lxml.etree
import lxml.html

BLOCK_TYPES = ("text", "title", "list", "table", "formula", "figure")
#: A ground-truth file larger than this is refused before it is read (bytes).
MAX_FILE_BYTES = 50 * 1024 * 1024
#: More blocks than this on one page is refused (the renderer keeps at most 2,000).
MAX_BLOCKS = 20_000
#: The largest page side accepted, in the page's units.
MAX_SIDE = 1_000_000.0
#: How far a ground-truth box may stick out of the page (annotation tools round), in page units;
#: such a box is cut to the page, a box further out is an error.
BOX_TOLERANCE = 1.0


class TruthError(ValueError):
    """A page that does not follow the format. The message is one line naming the field
    (``blocks[3].bbox: outside the page 0..1000 x 0..1400``) and quotes no file content beyond
    short values such as a type name."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


@dataclass(frozen=True, slots=True)
class Block:
    """One block: its category, visible text, box ``(x0, y0, x1, y1)`` in the page's units, a table's
    raw HTML and a formula's LaTeX where known."""

    type: str
    text: str
    bbox: tuple[float, float, float, float]
    html: str | None = None
    latex: str | None = None


@dataclass(frozen=True, slots=True)
class PageBlocks:
    """A page's size (the unit of its blocks' boxes) and its blocks in file order."""

    width: float
    height: float
    blocks: tuple[Block, ...]


def _short(value: object) -> str:
    """A value's type for an error message (never the value itself, which may be long or private)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _fmt(value: float) -> str:
    return f"{value:g}"


def table_cells_parse(html: str) -> bool:
    """Whether a table's HTML parses and holds at least one cell (``td``/``th``)."""
    try:
        root = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return False
    return root.tag in ("td", "th") or next(root.iter("td", "th"), None) is not None


def _side(page: Mapping[str, object], key: str) -> float:
    value = _number(page.get(key))
    if value is None:
        raise TruthError(f"page.{key}: expected a number, got {_short(page.get(key))}")
    if not 0 < value <= MAX_SIDE:
        raise TruthError(
            f"page.{key}: expected a number above 0 and at most {_fmt(MAX_SIDE)}, got {_fmt(value)}"
        )
    return value


def _optional_text(block: Mapping[str, object], key: str, where: str) -> str | None:
    value = block.get(key)
    if value is None or isinstance(value, str):
        return value
    raise TruthError(f"{where}.{key}: expected a string or null, got {_short(value)}")


def parse_truth(data: object, *, lenient: bool = False) -> PageBlocks:
    """A ground-truth page from its decoded JSON; :class:`TruthError` names the first bad field.

    ``lenient`` reads a prediction given in this format: a block that does not follow it is
    skipped, a box is cut to the page however far it sticks out, and a table's HTML is not
    checked (a table without cells is scored by its text); only a bad ``page`` or ``blocks`` is
    an error."""
    if not isinstance(data, Mapping):
        raise TruthError(f"expected an object {{page, blocks}}, got {_short(data)}")
    page = data.get("page")
    if not isinstance(page, Mapping):
        raise TruthError(f"page: expected an object {{width, height}}, got {_short(page)}")
    width, height = _side(page, "width"), _side(page, "height")
    found = data.get("blocks")
    if not isinstance(found, list):
        raise TruthError(f"blocks: expected a list, got {_short(found)}")
    if len(found) > MAX_BLOCKS:
        raise TruthError(f"blocks: {len(found)} blocks, more than the {MAX_BLOCKS} accepted")
    blocks: list[Block] = []
    for i, block in enumerate(found):
        try:
            blocks.append(_truth_block(f"blocks[{i}]", block, width, height, lenient))
        except TruthError:
            if not lenient:
                raise
    return PageBlocks(width=width, height=height, blocks=tuple(blocks))


def _truth_block(where: str, block: object, width: float, height: float, lenient: bool) -> Block:
    if not isinstance(block, Mapping):
        raise TruthError(f"{where}: expected an object {{type, text, bbox}}, got {_short(block)}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise TruthError(f"{where}.type: expected one of {', '.join(BLOCK_TYPES)}, got {_short(kind)}")
    if kind not in BLOCK_TYPES:
        shown = (
            kind
            if len(kind) <= 20 and kind.isprintable()
            else kind[:20].encode("unicode_escape").decode() + "…"
        )
        raise TruthError(f"{where}.type: expected one of {', '.join(BLOCK_TYPES)}, got {shown!r}")
    text = block.get("text")
    if not isinstance(text, str):
        raise TruthError(f"{where}.text: expected a string, got {_short(text)}")
    html = _optional_text(block, "html", where)
    latex = _optional_text(block, "latex", where)
    if kind == "table" and not lenient:
        if not html:
            raise TruthError(f"{where}.html: a table block needs its HTML (tr/td/th)")
        if not table_cells_parse(html):
            raise TruthError(f"{where}.html: the table HTML does not parse into cells (tr/td/th)")
    box = block.get("bbox")
    if not isinstance(box, list) or len(box) != 4:
        raise TruthError(f"{where}.bbox: expected [x0, y0, x1, y1], got {_short(box)}")
    coords = [_number(v) for v in box]
    for j, v in enumerate(coords):
        if v is None:
            raise TruthError(f"{where}.bbox[{j}]: expected a number, got {_short(box[j])}")
    x0, y0, x1, y1 = (float(v) for v in coords)  # type: ignore[arg-type]
    if not (x0 < x1 and y0 < y1):
        raise TruthError(f"{where}.bbox: expected x0 < x1 and y0 < y1, got an empty box")
    outside = (
        x0 < -BOX_TOLERANCE
        or y0 < -BOX_TOLERANCE
        or x1 > width + BOX_TOLERANCE
        or y1 > height + BOX_TOLERANCE
    )
    clipped = (max(x0, 0.0), max(y0, 0.0), min(x1, width), min(y1, height))
    if (outside and not lenient) or not (clipped[0] < clipped[2] and clipped[1] < clipped[3]):
        raise TruthError(f"{where}.bbox: outside the page 0..{_fmt(width)} x 0..{_fmt(height)}")
    return Block(type=kind, text=text, bbox=clipped, html=html, latex=latex)


def from_render(render: Mapping[str, object]) -> PageBlocks:
    """A rendered page's blocks (``dom.blocks``) in CSS pixels of its captured image. A failed
    render, or one made before blocks existed, raises :class:`TruthError`; malformed blocks are
    skipped (the renderer writes none) and boxes are cut to the image."""
    if render.get("status") != "ok":
        raise TruthError("status: the render failed, it has no blocks")
    dom = render.get("dom")
    if not isinstance(dom, Mapping):
        raise TruthError("dom: expected an object, got " + _short(dom))
    width, height = _number(render.get("width")), _number(render.get("height"))
    canvas = dom.get("canvas")
    if (width is None or height is None) and isinstance(canvas, list) and len(canvas) == 2:
        width, height = _number(canvas[0]), _number(canvas[1])
    if width is None or height is None or width <= 0 or height <= 0:
        raise TruthError("width, height: the render states no image size")
    found = dom.get("blocks")
    if not isinstance(found, list):
        raise TruthError("dom.blocks: missing (rendered before blocks existed: render the page again)")
    blocks: list[Block] = []
    for block in found[:MAX_BLOCKS]:
        if not isinstance(block, Mapping) or block.get("type") not in BLOCK_TYPES:
            continue
        text = block.get("text")
        html, latex = block.get("html"), block.get("latex")
        box = block.get("box")
        if not isinstance(box, list) or len(box) != 4:
            scaled = block.get("bbox_1000")
            if not isinstance(scaled, list) or len(scaled) != 4:
                continue
            box = [
                v * side / 1000 if _number(v) is not None else None
                for v, side in zip(scaled, (width, height, width, height), strict=True)
            ]
        coords = [_number(v) for v in box]
        if any(v is None for v in coords):
            continue
        x0, y0, x1, y1 = (float(v) for v in coords)  # type: ignore[arg-type]
        x0, y0, x1, y1 = max(x0, 0.0), max(y0, 0.0), min(x1, width), min(y1, height)
        if not (x0 < x1 and y0 < y1):
            continue
        blocks.append(
            Block(
                type=str(block["type"]),
                text=text if isinstance(text, str) else "",
                bbox=(x0, y0, x1, y1),
                html=html if isinstance(html, str) else None,
                latex=latex if isinstance(latex, str) else None,
            )
        )
    return PageBlocks(width=width, height=height, blocks=tuple(blocks))


def is_render(data: object) -> bool:
    """Whether decoded JSON is a render's (it has ``status`` and ``dom``) rather than ground truth."""
    return isinstance(data, Mapping) and "status" in data and "dom" in data and "blocks" not in data


def load_page(path: str | Path, *, lenient: bool = False) -> PageBlocks:
    """A page from a JSON file: ground truth ``{page, blocks}`` or a render's JSON, by shape
    (``lenient``: a prediction, read as :func:`parse_truth` says). Errors name the file (by its
    name only) and the field."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise TruthError(f"{path.name}: {size} bytes, more than the {MAX_FILE_BYTES} accepted")
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        raise TruthError(f"{path.name}: not JSON (line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError:
        raise TruthError(f"{path.name}: not UTF-8 text") from None
    except OSError as exc:
        raise TruthError(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        return from_render(data) if is_render(data) else parse_truth(data, lenient=lenient)
    except TruthError as exc:
        raise TruthError(f"{path.name}: {exc}") from None
