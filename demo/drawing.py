"""Synthetic document pages and their degraded renderings, drawn with Pillow (pure: no Django).

A page is described by its content (:class:`PageContent`: title, two sections of two-column
text, and optionally a table, a display formula, a photo and a bar chart) and drawn by
:func:`page_draw`. A system's candidate is the same content drawn with :class:`Defects` — the
visible failure modes a page-to-HTML system has: shifted or merged columns, a wrong font size,
dropped table rows or grid, a lost or flattened formula, a missing photo or chart, colour shifts,
truncated text. The drawing returns where the table, formula and media ended up, so the bundle
can give the reference page its targets (``bbox_1000``, docs/protocol.md "The study model") and each candidate
its media regions. Body text is drawn as grey word bars ("greeked"); titles, headings, captions, table cells
and the formula are real text. Only ASCII is drawn: Pillow's bundled font has no Greek or maths glyphs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

PAGE_WIDTH = 612
PAGE_HEIGHT = 792
MARGIN = 42
GUTTER = 22
BODY_SIZE = 9
TEXT_COLOUR = (38, 38, 42)
MUTED_COLOUR = (110, 110, 118)
BODY_COLOUR = (168, 170, 178)
RULE_COLOUR = (150, 150, 160)

_WORDS_TEXT = (
    "the of and to in we a is for that on with as are this by from be an which our model page layout "
    "document table figure results method data system each two these using can than at more first "
    "rendering reference candidate structure columns text section region visual alignment spacing "
    "reading order fidelity evaluation human raters judges score preference pairwise benchmark "
    "parsing markup recovery output input shown across both while when between under within also "
    "however only most such where their them has have been were not other same large small higher "
    "lower baseline proposed approach analysis sample samples error errors metric metrics robust "
    "typical dense sparse caption heading paragraph line lines width height margin block blocks"
)
WORDS: tuple[str, ...] = tuple(_WORDS_TEXT.split())
_TITLE_WORDS_TEXT = (
    "Adaptive Robust Structured Visual Layout Document Reconstruction Parsing Faithful Scalable "
    "Multi-Column Reports Scanned Pages Markup Rendering Evaluation Learning Tables Formulas "
    "Benchmarks Recovery Hierarchical Neural Fidelity"
)
TITLE_WORDS: tuple[str, ...] = tuple(_TITLE_WORDS_TEXT.split())
HEADINGS = ("Introduction", "Related Work", "Method", "Experiments", "Results", "Discussion", "Analysis")
ROW_LABELS = ("Baseline", "Ours", "Ablation", "No grid", "Small", "Large", "Scanned", "Digital", "Mixed")


@dataclass(frozen=True)
class TableContent:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class PageContent:
    """What a page shows; the reference and every candidate draw the same content."""

    page_id: str
    title: str
    subtitle: str
    headings: tuple[str, str]
    section_words: tuple[tuple[str, ...], tuple[str, ...]]
    accent: tuple[int, int, int]
    element_order: tuple[str, ...]  # a permutation of the present bands: "table", "formula", "figures"
    table: TableContent | None = None
    formula: bool = False
    photo_seed: int | None = None
    chart_values: tuple[float, ...] | None = None
    page_number: int = 1

    @property
    def has_figures(self) -> bool:
        return self.photo_seed is not None or self.chart_values is not None


@dataclass(frozen=True)
class Defects:
    """How a candidate differs from the reference. The default draws the reference itself."""

    jitter: tuple[int, int] = (0, 0)
    merged_columns: bool = False
    column_shift: int = 0
    font_scale: float = 1.0
    line_spacing: float = 1.0
    text_kept: float = 1.0
    dropped_table_rows: int = 0
    table_grid_lost: bool = False
    formula_lost: bool = False
    formula_flattened: bool = False
    photo_missing: bool = False
    chart_missing: bool = False
    figures_swapped: bool = False
    colour_shift: tuple[int, int, int] = (0, 0, 0)

    def names(self) -> tuple[str, ...]:
        """The visible failure modes present, for captions, judge reasons and tests."""
        out = []
        if self.merged_columns:
            out.append("merged columns")
        if self.column_shift:
            out.append("shifted columns")
        if abs(self.font_scale - 1.0) >= 0.1:
            out.append("wrong font size")
        if abs(self.line_spacing - 1.0) >= 0.15:
            out.append("line spacing")
        if self.text_kept < 0.95:
            out.append("missing text")
        if self.dropped_table_rows:
            out.append("dropped table rows")
        if self.table_grid_lost:
            out.append("table grid lost")
        if self.formula_lost:
            out.append("formula lost")
        if self.formula_flattened:
            out.append("formula flattened")
        if self.photo_missing:
            out.append("photo missing")
        if self.chart_missing:
            out.append("chart missing")
        if self.figures_swapped:
            out.append("figures swapped")
        if any(self.colour_shift):
            out.append("colour shift")
        return tuple(out)


@dataclass(frozen=True)
class Region:
    """A drawn element: ``role`` (table, formula, photo, chart) and its ``bbox_1000``."""

    role: str
    bbox_1000: tuple[int, int, int, int]


@dataclass
class DrawnPage:
    image: Image.Image
    regions: list[Region] = field(default_factory=list)

    def media(self) -> list[dict[str, object]]:
        """docs/protocol.md "The study model" media regions ``[{kind: photo|chart, bbox_1000}]``."""
        return [{"kind": r.role, "bbox_1000": list(r.bbox_1000)} for r in self.regions if r.role in ("photo", "chart")]


# --- content --------------------------------------------------------------------------------


def _sentence_words(rng: random.Random, n: int) -> tuple[str, ...]:
    words: list[str] = []
    while len(words) < n:
        length = rng.randint(6, 16)
        sentence = [rng.choice(WORDS) for _ in range(length)]
        sentence[0] = sentence[0].capitalize()
        sentence[-1] += "."
        words.extend(sentence)
    return tuple(words[:n])


def content_generate(page_id: str, rng: random.Random, *, page_number: int = 1) -> PageContent:
    """Random page content: which elements a page has is drawn here (table ~60%, formula ~40%,
    photo ~70%, chart ~30%), so conditional axes are active on some pages and not others."""
    title_words = rng.sample(TITLE_WORDS, rng.randint(3, 6))
    title = " ".join(title_words)
    subtitle = f"{rng.choice(HEADINGS)} report {rng.randint(2, 40)} - page {page_number}"
    headings = tuple(f"{i + 1} {h}" for i, h in enumerate(rng.sample(HEADINGS, 2)))
    table = None
    if rng.random() < 0.6:
        n_cols = rng.randint(3, 5)
        header = ("Setting", *rng.sample(("Accuracy", "F1", "Edit dist.", "BLEU", "Layout", "Score", "Time (s)"), n_cols - 1))
        rows = tuple(
            (rng.choice(ROW_LABELS), *(f"{rng.uniform(0.1, 0.99):.2f}" for _ in range(1, n_cols)))
            for _ in range(rng.randint(4, 7))
        )
        table = TableContent(header=header, rows=rows)
    formula = rng.random() < 0.4
    photo_seed = rng.randrange(1 << 30) if rng.random() < 0.7 else None
    chart_values = tuple(round(rng.uniform(0.2, 1.0), 2) for _ in range(rng.randint(4, 6))) if rng.random() < 0.3 else None
    bands = [b for b, present in (("table", table is not None), ("formula", formula), ("figures", photo_seed is not None or chart_values is not None)) if present]
    rng.shuffle(bands)
    accent = rng.choice(((24, 60, 130), (120, 30, 40), (20, 100, 70), (60, 60, 60), (90, 40, 120)))
    first = rng.randint(90, 150)
    second = rng.randint(220, 340)
    return PageContent(
        page_id=page_id,
        title=title,
        subtitle=subtitle,
        headings=(headings[0], headings[1]),
        section_words=(_sentence_words(rng, first), _sentence_words(rng, second)),
        accent=accent,
        element_order=tuple(bands),
        table=table,
        formula=formula,
        photo_seed=photo_seed,
        chart_values=chart_values,
        page_number=page_number,
    )


# --- drawing --------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=max(size, 6))


@lru_cache(maxsize=20000)
def _width(word: str, size: int) -> float:
    return float(_font(size).getlength(word))


@lru_cache(maxsize=8192)
def _text_mask(text: str, size: int, bold: bool) -> tuple[Image.Image, int, int]:
    """The glyph coverage of one line of text, cached: a page's candidates share most lines, and
    rasterizing glyphs is what drawing a page mostly costs. Returns the mask and its offset."""
    font = _font(size)
    stroke = 1 if bold else 0
    left, top, right, bottom = (int(v) for v in font.getbbox(text, stroke_width=stroke))
    mask = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, font=font, fill=255, stroke_width=stroke, stroke_fill=255)
    return mask, left, top


def text_cache_clear() -> None:
    """Forget cached line rasters (call between pages to bound memory)."""
    _text_mask.cache_clear()


def _wrap(words: tuple[str, ...], width: float, size: int) -> list[str]:
    space = _width(" ", size)
    lines: list[str] = []
    current: list[str] = []
    used = 0.0
    for word in words:
        w = _width(word, size)
        if current and used + space + w > width:
            lines.append(" ".join(current))
            current, used = [], 0.0
        used += (space if current else 0.0) + w
        current.append(word)
    if current:
        lines.append(" ".join(current))
    return lines


def _shift(colour: tuple[int, int, int], delta: tuple[int, int, int]) -> tuple[int, int, int]:
    r, g, b = (max(0, min(255, c + d)) for c, d in zip(colour, delta, strict=True))
    return (r, g, b)


def _bbox_1000(box: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box
    clamp = lambda v: max(0, min(1000, round(v)))  # noqa: E731
    return (
        clamp(x0 * 1000 / PAGE_WIDTH),
        clamp(y0 * 1000 / PAGE_HEIGHT),
        clamp(x1 * 1000 / PAGE_WIDTH),
        clamp(y1 * 1000 / PAGE_HEIGHT),
    )


class _Painter:
    def __init__(self, content: PageContent, defects: Defects) -> None:
        self.c = content
        self.d = defects
        self.image = Image.new("RGB", (PAGE_WIDTH, PAGE_HEIGHT), (255, 255, 255))
        self.draw = ImageDraw.Draw(self.image)
        self.x0 = MARGIN + defects.jitter[0]
        self.x1 = PAGE_WIDTH - MARGIN + defects.jitter[0]
        self.y: float = MARGIN + defects.jitter[1]
        self.bottom = PAGE_HEIGHT - MARGIN - 14
        self.size = max(6, round(BODY_SIZE * defects.font_scale))
        self.leading = max(self.size + 1, round((self.size + 3) * defects.line_spacing))
        self.accent = _shift(content.accent, defects.colour_shift)
        self.regions: list[Region] = []

    def text(self, xy: tuple[float, float], text: str, size: int, fill: tuple[int, int, int], *, bold: bool = False) -> None:
        if not text:
            return
        mask, left, top = _text_mask(text, size, bold)
        x, y = round(xy[0]) + left, round(xy[1]) + top
        self.image.paste(fill, (x, y, x + mask.width, y + mask.height), mask)

    def body_line(self, x: float, y: float, line: str) -> None:
        """Body text "greeked": each word a grey bar of the word's width at the current size.

        Wrapping, line count, density and size behave exactly like real text, at a fraction of the
        cost of rasterizing glyphs (the demo draws a few hundred pages in seconds).
        """
        size = self.size
        space = _width(" ", size)
        top, bottom = round(y + size * 0.35), round(y + size * 0.8)
        for word in line.split(" "):
            w = _width(word, size)
            self.draw.rectangle((round(x), top, round(x + w) - 1, bottom), fill=BODY_COLOUR)
            x += w + space

    def px(self, size: float) -> int:
        return max(6, round(size * self.d.font_scale))

    def title(self) -> None:
        size = self.px(19)
        for line in _wrap(tuple(self.c.title.split()), self.x1 - self.x0, size)[:2]:
            self.text((self.x0, self.y), line, size, self.accent, bold=True)
            self.y += size + 5
        self.text((self.x0, self.y), self.c.subtitle, self.px(10), MUTED_COLOUR)
        self.y += self.px(10) + 8
        self.draw.line((self.x0, self.y, self.x1, self.y), fill=RULE_COLOUR, width=1)
        self.y += 10

    def heading(self, text: str) -> None:
        size = self.px(12)
        self.text((self.x0, self.y), text, size, self.accent, bold=True)
        self.y += size + 7

    def columns(self, words: tuple[str, ...], *, fill_to_bottom: bool) -> None:
        kept = words[: max(1, round(len(words) * self.d.text_kept))]
        if self.d.merged_columns:
            lines = _wrap(kept, self.x1 - self.x0, self.size)
            for line in lines:
                if self.y + self.leading > self.bottom:
                    break
                self.body_line(self.x0, self.y, line)
                self.y += self.leading
            self.y += 8
            return
        col_w = (self.x1 - self.x0 - GUTTER) / 2
        lines = _wrap(kept, col_w, self.size)
        per_col = (len(lines) + 1) // 2
        if fill_to_bottom:
            per_col = min(per_col, max(1, int((self.bottom - self.y) // self.leading)))
        right_x = self.x0 + col_w + GUTTER + self.d.column_shift
        top = self.y
        for k, line in enumerate(lines[: 2 * per_col]):
            col, row = divmod(k, per_col)
            y = top + row * self.leading
            if y + self.leading > self.bottom:
                continue
            x = self.x0 if col == 0 else right_x
            self.body_line(x, y, line)
        self.y = top + per_col * self.leading + 10

    def table(self, table: TableContent, number: int) -> None:
        rows = table.rows[: max(1, len(table.rows) - self.d.dropped_table_rows)]
        size = self.px(9)
        row_h = size + 8
        width = self.x1 - self.x0
        first_w = width * 0.3
        other_w = (width - first_w) / (len(table.header) - 1)
        xs = [self.x0, self.x0 + first_w] + [self.x0 + first_w + other_w * j for j in range(1, len(table.header))]
        self.text((self.x0, self.y), f"Table {number}: results by setting.", self.px(9), MUTED_COLOUR)
        self.y += size + 6
        top = self.y
        bottom = top + row_h * (len(rows) + 1)
        header_fill = _shift((222, 228, 240), self.d.colour_shift)
        self.draw.rectangle((self.x0, top, self.x1, top + row_h), fill=header_fill)
        for r, cells in enumerate((table.header, *rows)):
            y = top + r * row_h + 4
            for j, cell in enumerate(cells):
                self.text((xs[j] + 5, y), cell, size, TEXT_COLOUR if r else self.accent)
        if self.d.table_grid_lost:
            self.draw.line((self.x0, top, self.x1, top), fill=RULE_COLOUR)
            self.draw.line((self.x0, bottom, self.x1, bottom), fill=RULE_COLOUR)
        else:
            for r in range(len(rows) + 2):
                y = top + r * row_h
                self.draw.line((self.x0, y, self.x1, y), fill=RULE_COLOUR)
            for x in [*xs, self.x1]:
                self.draw.line((x, top, x, bottom), fill=RULE_COLOUR)
        self.regions.append(Region("table", _bbox_1000((self.x0, top, self.x1, bottom))))
        self.y = bottom + 12

    def formula(self) -> None:
        if self.d.formula_lost:
            return
        if self.d.formula_flattened:
            size = self.size
            text = "f(x) = sum_k=1..n a_k x^k / (1 + k) + c"
            self.text((self.x0 + 30, self.y), text, size, TEXT_COLOUR)
            self.regions.append(Region("formula", _bbox_1000((self.x0 + 30, self.y, self.x0 + 30 + _width(text, size), self.y + size + 2))))
            self.y += size + 14
            return
        size = self.px(13)
        small = self.px(8)
        top = self.y
        mid = top + size + 6
        x = (self.x0 + self.x1) / 2 - 110
        start = x
        self.text((x, mid - size / 2 - 1), "f(x) =", size, TEXT_COLOUR)
        x += _width("f(x) =", size) + 10
        # A summation sign drawn as strokes, with limits above and below.
        sig_w, sig_h = size, size + 10
        self.draw.line(
            [(x + sig_w, mid - sig_h / 2), (x, mid - sig_h / 2), (x + sig_w * 0.55, mid), (x, mid + sig_h / 2), (x + sig_w, mid + sig_h / 2)],
            fill=TEXT_COLOUR,
            width=2,
        )
        self.text((x + 2, mid - sig_h / 2 - small - 2), "n", small, TEXT_COLOUR)
        self.text((x - 2, mid + sig_h / 2 + 1), "k=1", small, TEXT_COLOUR)
        x += sig_w + 10
        numerator, denominator = "a  x", "1 + k"
        frac_w = max(_width(numerator, size), _width(denominator, size)) + 12
        self.text((x + 6, mid - size - 3), "a", size, TEXT_COLOUR)
        self.text((x + 6 + _width("a", size), mid - size + 2), "k", small, TEXT_COLOUR)
        self.text((x + 12 + _width("a", size) + _width("k", small), mid - size - 3), "x", size, TEXT_COLOUR)
        self.text((x + 12 + _width("ax", size) + _width("k", small), mid - size - 8), "k", small, TEXT_COLOUR)
        self.draw.line((x, mid, x + frac_w, mid), fill=TEXT_COLOUR, width=1)
        self.text((x + (frac_w - _width(denominator, size)) / 2, mid + 3), denominator, size, TEXT_COLOUR)
        x += frac_w + 8
        self.text((x, mid - size / 2 - 1), "+ c", size, TEXT_COLOUR)
        x += _width("+ c", size)
        self.text((self.x1 - _width("(1)", size), mid - size / 2 - 1), "(1)", size, TEXT_COLOUR)
        bottom = mid + sig_h / 2 + small + 4
        self.regions.append(Region("formula", _bbox_1000((start - 4, top - 2, x + 4, bottom))))
        self.y = bottom + 10

    def photo(self, box: tuple[float, float, float, float], seed: int) -> None:
        """A landscape "photograph" (sky, sun, hills, ground), drawn on its own tile so nothing spills."""
        rng = random.Random(seed)
        x0, y0, x1, y1 = (round(v) for v in box)
        w, h = x1 - x0, y1 - y0
        tile = Image.new("RGB", (w, h))
        draw = ImageDraw.Draw(tile)
        top = _shift((rng.randint(60, 120), rng.randint(120, 170), rng.randint(190, 240)), self.d.colour_shift)
        low = _shift((rng.randint(200, 240), rng.randint(200, 230), rng.randint(190, 220)), self.d.colour_shift)
        horizon = h * rng.uniform(0.5, 0.7)
        for y in range(h):
            t = min(1.0, y / max(1.0, horizon))
            colour = tuple(round(a + (b - a) * t) for a, b in zip(top, low, strict=True))
            draw.line((0, y, w, y), fill=colour)
        sun_r = rng.randint(8, 16)
        sx, sy = rng.uniform(20, w - 20), rng.uniform(15, max(16.0, horizon - 20))
        draw.ellipse((sx - sun_r, sy - sun_r, sx + sun_r, sy + sun_r), fill=_shift((250, 220, 120), self.d.colour_shift))
        for k in range(rng.randint(2, 3)):
            peak_x = rng.uniform(0, w)
            peak_y = rng.uniform(h * 0.25, horizon)
            shade = 60 + 30 * k
            draw.polygon(
                [(peak_x - rng.uniform(60, 120), h), (peak_x, peak_y), (peak_x + rng.uniform(60, 120), h)],
                fill=_shift((shade, shade + 20, shade - 10), self.d.colour_shift),
            )
        draw.rectangle((0, round(h * 0.85), w, h), fill=_shift((70, 110, 60), self.d.colour_shift))
        self.image.paste(tile, (x0, y0))
        self.draw.rectangle((x0, y0, x1, y1), outline=(90, 90, 90))
        self.regions.append(Region("photo", _bbox_1000((x0, y0, x1, y1))))

    def chart(self, box: tuple[float, float, float, float], values: tuple[float, ...]) -> None:
        x0, y0, x1, y1 = (round(v) for v in box)
        self.draw.rectangle((x0, y0, x1, y1), fill=(250, 250, 252), outline=(200, 200, 205))
        left, base = x0 + 22, y1 - 16
        self.draw.line((left, y0 + 8, left, base), fill=TEXT_COLOUR)
        self.draw.line((left, base, x1 - 8, base), fill=TEXT_COLOUR)
        span = (x1 - 8 - left) / len(values)
        small_size = self.px(7)
        for k, v in enumerate(values):
            bx = left + k * span + span * 0.2
            top = base - v * (base - y0 - 14)
            self.draw.rectangle((bx, top, bx + span * 0.6, base), fill=self.accent if k % 2 == 0 else _shift(self.accent, (90, 90, 90)))
            self.text((bx, base + 3), f"S{k + 1}", small_size, MUTED_COLOUR)
        for t in (0.0, 0.5, 1.0):
            y = base - t * (base - y0 - 14)
            self.text((x0 + 3, y - 4), f"{t:.1f}", small_size, MUTED_COLOUR)
        self.regions.append(Region("chart", _bbox_1000((x0, y0, x1, y1))))

    def figures(self, number: int) -> None:
        show_photo = self.c.photo_seed is not None and not self.d.photo_missing
        show_chart = self.c.chart_values is not None and not self.d.chart_missing
        kinds = [k for k, shown in (("photo", show_photo), ("chart", show_chart)) if shown]
        if self.d.figures_swapped:
            kinds.reverse()
        if not kinds:
            return
        height = 150
        if self.y + height + 20 > self.bottom:
            height = max(60, int(self.bottom - self.y - 20))
        top, bottom = self.y, self.y + height
        half = (self.x1 - self.x0 - GUTTER) / 2
        if len(kinds) == 1:
            offset = half * 0.5 if not self.d.figures_swapped else 0
            boxes = [(self.x0 + offset, top, self.x0 + offset + half * 1.1, bottom)]
        else:
            boxes = [(self.x0, top, self.x0 + half, bottom), (self.x0 + half + GUTTER, top, self.x1, bottom)]
        for kind, box in zip(kinds, boxes, strict=True):
            if kind == "photo":
                assert self.c.photo_seed is not None
                self.photo(box, self.c.photo_seed)
            else:
                assert self.c.chart_values is not None
                self.chart(box, self.c.chart_values)
        self.y = bottom + 4
        self.text((self.x0, self.y), f"Figure {number}: example output and measured scores.", self.px(9), MUTED_COLOUR)
        self.y += self.px(9) + 12

    def footer(self) -> None:
        text = str(self.c.page_number)
        size = self.px(9)
        self.text(((PAGE_WIDTH - _width(text, size)) / 2 + self.d.jitter[0], PAGE_HEIGHT - MARGIN), text, size, MUTED_COLOUR)


def page_draw(content: PageContent, defects: Defects | None = None) -> DrawnPage:
    """Draw a page: the reference with ``defects=None``, a candidate with its defects."""
    painter = _Painter(content, defects or Defects())
    painter.title()
    painter.heading(content.headings[0])
    painter.columns(content.section_words[0], fill_to_bottom=False)
    for band in content.element_order:
        if band == "table" and content.table is not None:
            painter.table(content.table, 1)
        elif band == "formula" and content.formula:
            painter.formula()
        elif band == "figures":
            painter.figures(1)
    if painter.y < painter.bottom - 40:
        painter.heading(content.headings[1])
        painter.columns(content.section_words[1], fill_to_bottom=True)
    painter.footer()
    return DrawnPage(image=painter.image, regions=painter.regions)
