"""The local judge's answer to a checklist question from a rendering's page (docs/protocol.md "The
built-in local judge"; decision 0084).

The page is what a study keeps of an HTML output's render (``CandidateBlocks``): its blocks
``{type, text, bbox}`` in CSS px (``title``, ``text``, ``list``, ``table``, ``formula``, ``figure``,
docs/protocol.md "Blocks from the DOM") and its live ECharts charts ``{box, types, names,
categories}``. :func:`answer_question` reads one question and decides, in this order:

1. **Style**: a question about colour, typography, contrast, spacing, size, overlap or taste
   (:data:`STYLE_WORDS`) is ``unclear``: the DOM export keeps no colours or styles.
2. **Absence**: a question asking for absence (:data:`_NEGATION`) is answered as the same
   question without the negation, by the steps below, yes and no swapped.
3. **Relation** "X above / below / beside / left of / right of Y": both X and Y are located
   (:func:`_locate`) and their boxes compared; touching or overlapping boxes fail, as the seed's
   spatial checks do (AesCode §E.1).
4. **Position** "X at the top / bottom", "on the left / right (half)": X's box centre lies in the
   top or bottom third, or the left or right half, of the page.
5. **Columns** "N columns": the most blocks side by side along one horizontal line (no two
   overlapping horizontally) is N (at least N after "at least").
6. **Count** "[at least | at most | exactly | more than | fewer than] N <kind>": the number of
   blocks of that kind (charts: live charts).
7. **Presence**, otherwise: every quoted string is found in one element's text (rapidfuzz
   ``partial_ratio`` ≥ :data:`TEXT_MATCH`), every element kind named is on the page, every
   date, time, price, e-mail, phone number, web address and number asked for is written on the
   page, and of the question's other words (its key terms) at least half are words of the page
   (``ratio`` ≥ :data:`TEXT_MATCH` with one page word): rounded down when the question also
   named one of the things above, rounded up (at least one) when it did not. A question with none
   of these is ``unclear``.

"yes" quotes what was found (its text, its block type and its box); "no" names what was looked for
and not found. No Django here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rapidfuzz import fuzz, process

TEXT_MATCH = 85  # rapidfuzz score (0–100) from which two texts or two words match
QUOTE_SHOWN = 60  # characters of an element's text quoted in evidence
MAX_EVIDENCE = 1_000  # an answer's evidence is cut to this (a reply's evidence may hold 4,000)

STYLE_WORDS = re.compile(
    r"\b(colou?r\w*|palette|hues?|tones?|fonts?|typeface\w*|typograph\w*|serif|bold|italic\w*|underlin\w*|"
    r"contrast\w*|readab\w*|legib\w*|backgrounds?|shadows?|gradients?|aesthetic\w*|styl\w*|professional\w*|"
    r"polish\w*|beautiful\w*|elegan\w*|modern|harmon\w*|balanced|clean|clutter\w*|consisten\w*|hierarchy|"
    r"whitespace|white space|spacing|padding|margins?|rounded|borders?|warm|cool|vibrant|muted|dark|light|"
    r"sizes?|larger|smaller|bigger|large|small|prominen\w*|emphasi\w*|attractive|appeal\w*|good|nice|pretty|great|bad|ugly|overlap\w*|"
    r"cut off|clipped|crowded|spread|empty|blank|aligned|alignment|centred|centered|visually|look\w*)\b"
)

# Element kinds a question may name, and the block type (or chart) each is.
KIND_WORDS: dict[str, str] = {
    **dict.fromkeys(("table", "tables"), "table"),
    **dict.fromkeys(("chart", "charts", "graph", "graphs", "plot", "plots"), "chart"),
    **dict.fromkeys(("axis", "axes"), "axis"),
    **dict.fromkeys(
        ("figure", "figures", "picture", "pictures", "photo", "photos", "photograph", "photographs",
         "illustration", "illustrations", "diagram", "diagrams", "video", "videos"),
        "figure",
    ),
    **dict.fromkeys(("bullet", "bullets", "bulleted"), "list"),
    **dict.fromkeys(("title", "titles", "heading", "headings", "headline", "headlines", "header", "headers"), "title"),
    **dict.fromkeys(("formula", "formulas", "formulae", "equation", "equations"), "formula"),
}
# Words that name an element kind only after a determiner (module docstring of :func:`_kinds`).
DETERMINED = {"list": "list", "lists": "list", "image": "figure", "images": "figure"}
DETERMINERS = frozenset(
    "a an any some no there of with bulleted numbered ordered unordered another several many".split()  # noqa: SIM905
)
CHART_TYPES = ("bar", "line", "pie", "scatter", "radar", "funnel", "gauge", "heatmap", "candlestick", "boxplot")
CARTESIAN = frozenset({"bar", "line", "scatter", "candlestick", "boxplot", "heatmap"})
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12,
}
_NUMBER = r"(\d{1,2}|" + "|".join(NUMBER_WORDS) + r")"
# Words that carry no content of their own: function words, the page itself, and elements the DOM
# export does not tell apart (a button, a card, a legend is text or a box like any other).
GENERIC_WORDS = frozenset(
    """a an the is are was were be being been does do did has have had there this that these those it its
    of in on at to for with and or as by from into within inside onto any some each every all which what
    whether visible shown show shows showing display displays displayed include includes included including
    contain contains containing present presented appear appears appearing page pages poster posters slide
    slides image images rendering screen design brief element elements content contents section sections
    text texts main least most clearly somewhere area part parts label labelled labeled labels named
    called say says read reads mention mentions mentioned about their clear use uses used button buttons
    icon icons logo logos card cards banner banners legend legends block blocks box boxes than more less
    fewer exactly also both other per like such can least given written state states stated provide
    provides provided has feature features featured somewhere anywhere one item items point points entry
    entries row rows field fields data value values number numbers name names word words""".split()  # noqa: SIM905
)
_PATTERNS: dict[str, re.Pattern[str]] = {
    "date": re.compile(
        r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b|\b\d{1,2}(st|nd|rd|th)?\s+"
        r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b|\b\d{1,4}[/.-]\d{1,2}[/.-]\d{1,4}\b|"
        r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
        re.IGNORECASE,
    ),
    "time": re.compile(r"\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(am|pm|a\.m\.|p\.m\.)", re.IGNORECASE),
    "price": re.compile(r"[$€£¥]\s?\d[\d.,]*|\b\d+([.,]\d+)?\s?(usd|eur|gbp|dollars?|euros?)\b|\bfree\b", re.IGNORECASE),
    "e-mail address": re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b"),
    "phone number": re.compile(r"\+?\d[\d ().-]{6,}\d"),
    "web address": re.compile(r"\bhttps?://\S+|\bwww\.\S+|\b[\w-]+\.(com|org|net|io|dev|edu|gov)\b", re.IGNORECASE),
}
_ASKS_FOR: dict[str, str] = {
    **dict.fromkeys(("date", "dates", "day"), "date"),
    **dict.fromkeys(("time", "times", "hour", "hours"), "time"),
    **dict.fromkeys(("price", "prices", "cost", "costs", "fee", "fees"), "price"),
    **dict.fromkeys(("email", "e-mail"), "e-mail address"),
    **dict.fromkeys(("phone", "telephone"), "phone number"),
    **dict.fromkeys(("website", "url", "link", "links"), "web address"),
}
# A question asking for absence ("is there no …", "free of …", "does not show …"); "no more than"
# and the like are counts, not negations.
_NEGATION = re.compile(
    r"\b(?:no|not)\b(?!\s+(?:more|fewer|less)\s+than)|\b(?:without|free of|never|lacks?|lacking|absent|missing)\b"
)
_QUOTE = re.compile(r"\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|(?<![\w])'([^']+)'(?![\w])")
_RELATION = re.compile(
    r"\b(directly above|above|directly below|below|under|underneath|beneath|beside|next to|alongside|"
    r"to the left of|left of|to the right of|right of)\b"
)
_POSITION = re.compile(
    r"\b(?:at|on|in|near|along|across)\s+the\s+(top|bottom|left|right)(?:\s+(?:half|side|edge|part|third))?\b"
    r"|\b(top|bottom|left|right)\s+(?:half|side|edge|part|third)\b"
)
_COLUMNS = re.compile(r"(?:\b(at least)\s+)?\b" + _NUMBER + r"[\s-]+columns?\b")
_COUNT = re.compile(
    r"(?:\b(at least|at most|exactly|more than|fewer than|less than|no more than)\s+)?\b" + _NUMBER
    + r"\s+(?:[a-z-]+\s+)?(" + "|".join(sorted(KIND_WORDS, key=len, reverse=True)) + r")\b"
)


@dataclass(frozen=True)
class Element:
    """A block or a live chart of the page: its kind (a block type or ``chart``), its text, its box
    in CSS px, and for a chart its series types."""

    kind: str
    text: str
    box: tuple[float, float, float, float]
    chart_types: tuple[str, ...] = ()

    @cached_property
    def words(self) -> list[str]:
        return _words(self.text)

    @cached_property
    def joined(self) -> str:
        """Its words, lower-cased, one space apart (what a quoted string is matched against)."""
        return " ".join(self.words)

    def shown(self) -> str:
        text = " ".join(self.text.split())
        quoted = f'"{text[:QUOTE_SHOWN]}{"…" if len(text) > QUOTE_SHOWN else ""}"' if text else "(no text)"
        x0, y0, x1, y1 = (round(v) for v in self.box)
        kind = f"{'/'.join(self.chart_types)} chart" if self.kind == "chart" and self.chart_types else self.kind
        return f"{quoted} ({kind} block at x {x0}–{x1}, y {y0}–{y1} px)"


@dataclass(frozen=True)
class Page:
    width: float
    height: float
    elements: tuple[Element, ...]

    @cached_property
    def words(self) -> list[str]:
        return sorted({w for e in self.elements for w in e.words})

    def text(self) -> str:
        return "\n".join(e.text for e in self.elements if e.text)

    @cached_property
    def side_by_side(self) -> tuple[Element, ...]:
        """The most elements crossing one horizontal line (tried at every element's middle) whose
        horizontal extents do not overlap: the page's columns."""
        best: list[Element] = []
        for line in sorted({(e.box[1] + e.box[3]) / 2 for e in self.elements}):
            across = sorted((e for e in self.elements if e.box[1] <= line <= e.box[3]), key=lambda e: e.box[2])
            chosen: list[Element] = []
            for element in across:  # the most pairwise disjoint horizontal extents, by earliest end
                if not chosen or element.box[0] > chosen[-1].box[2]:
                    chosen.append(element)
            if len(chosen) > len(best):
                best = chosen
        return tuple(best)


@dataclass(frozen=True)
class PageAnswer:
    answer: str  # "yes", "no" or "unclear"
    evidence: str


def page_of(kept: Mapping[str, Any]) -> Page:
    """A kept page (``{page: {width, height}, blocks, charts?}``) as the rule reads it; a malformed
    block or chart is left out."""
    found = kept.get("page")
    size: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    width, height = (float(size.get(k) or 0) if isinstance(size.get(k), int | float) else 0.0 for k in ("width", "height"))
    elements: list[Element] = []
    for block in kept.get("blocks") or []:
        box = _box(block.get("bbox")) if isinstance(block, Mapping) else None
        if box is not None and isinstance(block.get("type"), str) and isinstance(block.get("text"), str):
            elements.append(Element(kind=block["type"], text=block["text"], box=box))
    for chart in kept.get("charts") or []:
        box = _box(chart.get("box")) if isinstance(chart, Mapping) else None
        if box is None:
            continue
        strings = [s for key in ("names", "categories") for s in chart.get(key) or [] if isinstance(s, str)]
        types = tuple(t for t in chart.get("types") or [] if isinstance(t, str))
        elements.append(Element(kind="chart", text=" ".join(strings), box=box, chart_types=types))
    return Page(width=width, height=height, elements=tuple(elements))


def answer_question(question: str, page: Page) -> PageAnswer:
    """The rule's answer to one question (module docstring), its evidence at most
    :data:`MAX_EVIDENCE` characters."""
    found = _answer(question, page)
    if len(found.evidence) <= MAX_EVIDENCE:
        return found
    return PageAnswer(found.answer, found.evidence[: MAX_EVIDENCE - 1] + "…")


def _answer(question: str, page: Page) -> PageAnswer:
    q = " ".join(question.lower().split())
    unquoted = _QUOTE.sub(" ", q)
    if style := STYLE_WORDS.search(unquoted):
        return PageAnswer(
            "unclear", f"asks about {style.group(0)!r}: the page's DOM export keeps text and element boxes, not colours or styles"
        )
    if negation := _NEGATION.search(unquoted):
        found = _affirmative(_outside_quotes(question, lambda part: _NEGATION.sub(" ", part)), page)
        if found.answer == "unclear":
            return found
        flipped = "no" if found.answer == "yes" else "yes"
        return PageAnswer(flipped, f"asks for the opposite ({negation.group(0)!r}) of: {found.evidence}")
    return _affirmative(question, page)


def _affirmative(question: str, page: Page) -> PageAnswer:
    unquoted = _QUOTE.sub(" ", " ".join(question.lower().split()))
    if relation := _RELATION.search(unquoted):
        return _relation(question, relation.group(1), page)
    if position := _POSITION.search(unquoted):
        return _position(question, position.group(1) or position.group(2), page)
    if columns := _COLUMNS.search(unquoted):
        return _columns(columns.group(1), _number(columns.group(2)), page)
    if count := _COUNT.search(unquoted):
        return _count(count.group(1), _number(count.group(2)), KIND_WORDS[count.group(3)], question, page)
    return _presence(question, page)


# ---------------------------------------------------------------------------------------------
# Presence
# ---------------------------------------------------------------------------------------------


def _presence(question: str, page: Page) -> PageAnswer:
    found: list[str] = []
    quotes = _quotes(question)
    for quote in quotes:
        element = _with_text(quote, page)
        if element is None:
            return PageAnswer("no", f'looked for the text "{quote}" and found it in no element of the page')
        found.append(f'"{quote}" in {element.shown()}')
    rest = _QUOTE.sub(" ", question.lower())
    kinds = _kinds(rest)
    for kind in kinds:
        element = _of_kind(kind, rest, page)
        if element is None:
            return PageAnswer("no", f"looked for {_kind_name(kind, rest)} and found none on the page")
        found.append(f"{_kind_name(kind, rest)}: {element.shown()}")
    text = page.text()
    words = _words(rest)
    for what in dict.fromkeys(_ASKS_FOR[w] for w in words if w in _ASKS_FOR):
        match = _PATTERNS[what].search(text)
        if match is None:
            return PageAnswer("no", f"looked for a {what} written on the page and found none")
        found.append(f'a {what}: "{match.group(0).strip()}"')
    numbers = [w for w in words if w.isdigit()]
    page_words = page.words
    for number in numbers:
        if number not in page_words:
            return PageAnswer("no", f"looked for the number {number} and found it nowhere on the page")
        found.append(f"the number {number}")
    terms = [w for w in dict.fromkeys(words) if w not in GENERIC_WORDS and w not in KIND_WORDS and w not in DETERMINED
             and w not in _ASKS_FOR and w not in NUMBER_WORDS and not w.isdigit() and len(w) > 2]
    if not terms and not found:
        return PageAnswer("unclear", "names no text, element or value the page's DOM export could show")
    hits = [(t, m[0]) for t in terms if (m := process.extractOne(t, page_words, scorer=fuzz.ratio,
                                                                  score_cutoff=TEXT_MATCH))]
    needed = len(terms) // 2 if found else max(1, math.ceil(len(terms) / 2))
    if len(hits) < needed:
        missing = [t for t in terms if t not in dict(hits)]
        return PageAnswer(
            "no", f"found {len(hits)} of the key terms {', '.join(terms)} on the page ({needed} needed); "
            f"not found: {', '.join(missing)}",
        )
    if hits:
        element = _best_for_terms([h for _, h in hits], page)
        found.append(
            "key terms " + ", ".join(f'"{t}"' + (f' as "{w}"' if w != t else "") for t, w in hits)
            + (f" in {element.shown()}" if element else "")
        )
    return PageAnswer("yes", "; ".join(found))


def _outside_quotes(question: str, change: Callable[[str], str]) -> str:
    """The question with ``change`` applied to its parts outside quoted strings."""
    out, at = [], 0
    for match in _QUOTE.finditer(question):
        out += [change(question[at:match.start()]), match.group(0)]
        at = match.end()
    return "".join([*out, change(question[at:])])


def _quotes(question: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _QUOTE.finditer(question)]


def _kinds(text: str) -> list[str]:
    """The element kinds a text names; "list" and "image" only as a noun after a determiner ("a
    list", "there are images"), since "does it list" and "the image" (the rendering) name none."""
    words = _words(text)
    kinds = []
    for i, word in enumerate(words):
        if word in DETERMINED:
            if i > 0 and (words[i - 1] in DETERMINERS or words[i - 1] in NUMBER_WORDS or words[i - 1].isdigit()):
                kinds.append(DETERMINED[word])
        elif word in KIND_WORDS:
            kinds.append(KIND_WORDS[word])
    return list(dict.fromkeys(kinds))


def _kind_name(kind: str, text: str) -> str:
    if kind == "chart" and (sub := _chart_type(text)):
        return f"a {sub} chart"
    return {"axis": "a chart axis", "figure": "a figure or image", "title": "a title or heading"}.get(kind, f"a {kind}")


def _chart_type(text: str) -> str | None:
    words = _words(text)
    return next((t for t in CHART_TYPES if t in words), None)


def _matches_kind(element: Element, kind: str, text: str) -> bool:
    if kind == "axis":
        return element.kind == "chart" and bool(CARTESIAN.intersection(element.chart_types))
    if kind == "chart":
        sub = _chart_type(text)
        return element.kind == "chart" and (sub is None or sub in element.chart_types)
    return element.kind == kind


def _of_kind(kind: str, text: str, page: Page) -> Element | None:
    """The element of that kind whose text best matches the phrase's key terms (the first on ties)."""
    candidates = [e for e in page.elements if _matches_kind(e, kind, text)]
    if not candidates:
        return None
    terms = [w for w in _words(text) if w not in GENERIC_WORDS and w not in KIND_WORDS and len(w) > 2]
    return max(candidates, key=lambda e: _term_score(terms, e)) if terms else candidates[0]


def _with_text(quote: str, page: Page) -> Element | None:
    """The element whose text holds the quoted string best (``partial_ratio`` ≥ :data:`TEXT_MATCH`)."""
    want = " ".join(_words(quote))
    if not want:
        return None
    best, best_score = None, float(TEXT_MATCH)
    for element in page.elements:
        score = fuzz.partial_ratio(want, element.joined)
        if score >= best_score and (best is None or score > best_score):
            best, best_score = element, score
    return best


def _term_score(terms: Sequence[str], element: Element) -> int:
    words = element.words
    return sum(1 for t in terms if words and process.extractOne(t, words, scorer=fuzz.ratio, score_cutoff=TEXT_MATCH))


def _best_for_terms(terms: Sequence[str], page: Page) -> Element | None:
    """The element holding most of the terms; on a tie the one with fewer words (a button's label
    rather than a paragraph that mentions it), then the first."""
    scored = [(_term_score(terms, e), -len(e.words), -i, e) for i, e in enumerate(page.elements)]
    best = max(scored, key=lambda s: s[:3], default=None)
    return best[3] if best and best[0] > 0 else None


# ---------------------------------------------------------------------------------------------
# Geometry
# ---------------------------------------------------------------------------------------------


def _locate(phrase: str, page: Page) -> tuple[Element | None, str]:
    """The element a phrase names, and how it was looked for: a quoted string, else an element kind
    (best by the phrase's key terms), else the element holding most of its key terms."""
    quotes = _quotes(phrase)
    if quotes:
        return _with_text(quotes[0], page), f'the text "{quotes[0]}"'
    rest = phrase.lower()
    kinds = _kinds(rest)
    if kinds:
        return _of_kind(kinds[0], rest, page), _kind_name(kinds[0], rest)
    terms = [w for w in _words(rest) if w not in GENERIC_WORDS and len(w) > 2]
    if not terms:
        return None, "an element it names"
    return _best_for_terms(terms, page), "an element with " + ", ".join(f'"{t}"' for t in terms)


def _relation(question: str, relation: str, page: Page) -> PageAnswer:
    lowered = question.lower()
    at = lowered.find(relation)
    first, first_how = _locate(question[:at], page)
    second, second_how = _locate(question[at + len(relation):], page)
    for element, how in ((first, first_how), (second, second_how)):
        if element is None:
            return PageAnswer("no", f"looked for {how} to check {relation!r} and found none on the page")
    assert first is not None and second is not None
    if first is second:
        return PageAnswer("unclear", f"both sides of {relation!r} name the same element, {first.shown()}")
    a, b = first.box, second.box
    side_by_side = a[1] < b[3] and b[1] < a[3]  # their vertical extents overlap
    holds = {
        "above": a[3] < b[1], "below": a[1] > b[3],
        "left": a[2] < b[0] and side_by_side, "right": a[0] > b[2] and side_by_side,
        "beside": side_by_side and (a[2] < b[0] or b[2] < a[0]),
    }[_relation_kind(relation)]
    return PageAnswer("yes" if holds else "no", f"{first.shown()} {'is' if holds else 'is not'} {relation} {second.shown()}")


def _relation_kind(relation: str) -> str:
    if "above" in relation:
        return "above"
    if any(w in relation for w in ("below", "under", "beneath")):
        return "below"
    if "left" in relation:
        return "left"
    if "right" in relation:
        return "right"
    return "beside"


def _position(question: str, where: str, page: Page) -> PageAnswer:
    phrase = _POSITION.sub(" ", question.lower())
    element, how = _locate(phrase, page)
    if element is None:
        return PageAnswer("no", f"looked for {how} and found none on the page")
    if page.width <= 0 or page.height <= 0:
        return PageAnswer("unclear", "the kept page states no size")
    x = (element.box[0] + element.box[2]) / 2
    y = (element.box[1] + element.box[3]) / 2
    holds, part = {
        "top": (y < page.height / 3, "top third"), "bottom": (y > 2 * page.height / 3, "bottom third"),
        "left": (x < page.width / 2, "left half"), "right": (x > page.width / 2, "right half"),
    }[where]
    return PageAnswer(
        "yes" if holds else "no",
        f"{element.shown()} is {'' if holds else 'not '}in the {part} of the {round(page.width)} × "
        f"{round(page.height)} px page",
    )


def _columns(at_least: str | None, wanted: int, page: Page) -> PageAnswer:
    """The most blocks side by side along one horizontal line (module docstring, 5)."""
    best = page.side_by_side
    holds = len(best) >= wanted if at_least else len(best) == wanted
    shown = "; ".join(e.shown() for e in best[:4])
    return PageAnswer(
        "yes" if holds else "no", f"at most {len(best)} blocks stand side by side on one line" + (f": {shown}" if best else "")
    )


def _count(qualifier: str | None, wanted: int, kind: str, question: str, page: Page) -> PageAnswer:
    rest = _QUOTE.sub(" ", question.lower())
    if kind == "list" and re.search(r"\b(bullet|bulleted)\b", rest):
        return PageAnswer("unclear", "the page's DOM export keeps a list's text, not its items: bullets cannot be counted")
    found = [e for e in page.elements if _matches_kind(e, kind, rest)]
    n = len(found)
    holds = {
        None: n == wanted, "exactly": n == wanted, "at least": n >= wanted, "at most": n <= wanted,
        "no more than": n <= wanted, "more than": n > wanted, "fewer than": n < wanted, "less than": n < wanted,
    }[qualifier]
    shown = "; ".join(e.shown() for e in found[:4])
    return PageAnswer(
        "yes" if holds else "no",
        f"counted {n} of {_kind_name(kind, rest)} on the page ({qualifier or 'exactly'} {wanted} asked)" + (f": {shown}" if found else ""),
    )


# ---------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9@.+-]*[a-z0-9]|[a-z0-9]", text.lower())


def _number(token: str) -> int:
    return int(token) if token.isdigit() else NUMBER_WORDS[token]


def _box(value: object) -> tuple[float, float, float, float] | None:
    if not isinstance(value, list | tuple) or len(value) != 4:
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return None
    x0, y0, x1, y1 = (float(v) for v in value)
    return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else None
