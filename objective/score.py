"""One page's objective scores against its ground truth (docs/protocol.md "The objective protocol",
after AmbiHTMLBench's Appendix A.1–A.4; the readings of its open points are decision 0073).

:func:`score_page` runs the protocol's three stages on two :class:`~objective.blocks.PageBlocks`:

1. Tables. Every truth/prediction table pair gets the candidate score
   ``0.45 TEDS + 0.25 TEDS-S + 0.20 s_partial + 0.10 s_ov``; pairs under
   :data:`TABLE_THRESHOLD` are unavailable; SciPy's ``linear_sum_assignment`` matches the rest one to
   one and each kept pair is checked against the threshold again. TEDS is a row/cell sequence edit:
   rows are aligned by an edit distance whose substitution is the edit distance of the two rows'
   cell sequences, a cell substitution costing the normalized character distance of the cells'
   text (1 when their tag or spans differ), and the distance is normalized by the larger table's
   node count (the table, its rows and its cells, as in tree-edit TEDS). TEDS-S is the same with
   each cell reduced to its structure token.
2. Text. Text, title, list and formula blocks, figures with a caption, and one block per row of
   each unmatched table form the text pool, normalized by removing whitespace and ``$``. A
   ``partial_ratio`` of at least :data:`TEXT_EDGE` links a truth and a predicted block; each
   connected component is put in the order (of four hypotheses, the same on both sides) with the
   lowest edit distance, then cut into groups by a monotone segmentation (segments of at most
   :data:`MAX_SEGMENT` blocks, two-sided only where every block has an edge inside the pair).
   All groups, in one page order, are concatenated per side and ``D_text`` is their edit distance
   over the longer side (a truth ``ξ`` matches any character).
3. Layout. One node per matched table and per two-sided text group (envelope boxes, on the page
   normalized to the unit square); edges to each truth node's 3 nearest truth nodes;
   ``S_layout = 0.55 s_edge + 0.30 s_node + 0.15 F1(coverage)``.

Every string distance is rapidfuzz's; no Django, no app code.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import lxml.etree
import lxml.html
import numpy as np
from rapidfuzz import fuzz, process
from rapidfuzz.distance import Levenshtein
from scipy.optimize import linear_sum_assignment
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from objective.blocks import PageBlocks

#: Changes when a change of the scoring changes its figures: cached scores of another version are
#: computed again.
SCORER_VERSION = "1"
TABLE_WEIGHTS = (0.45, 0.25, 0.20, 0.10)  # TEDS, TEDS-S, s_partial, s_ov
TABLE_THRESHOLD = 0.40
TEXT_EDGE = 66.0  # rapidfuzz's partial_ratio is 0..100; the seed's 0.66
MAX_SEGMENT = 3
WILDCARD = "ξ"
#: A component with more (truth blocks x predicted blocks) than this is one group in its best order,
#: not segmented (the segmentation's time grows with the product; decision 0073).
MAX_SEGMENTED = 2_500
K_NEIGHBOURS = 3
EDGE_WEIGHTS = (0.4, 0.3, 0.3)  # s_dir, s_len, s_vec
LAYOUT_WEIGHTS = (0.55, 0.30, 0.15)  # s_edge, s_node, F1(coverage)
WEAK_GROUP = 0.75  # a text group further apart than this is no layout node when a table anchors the page
TEXT_TYPES = frozenset({"text", "title", "list", "formula", "figure"})

Box = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class Match:
    """Blocks of the truth and of the prediction (indices into their ``blocks``) matched together:
    a table pair (``score`` its candidate score) or a text group (``score`` one minus its normalized
    edit distance). A text group with an empty side is a deletion or an insertion (score 0)."""

    kind: Literal["table", "text"]
    truth: list[int]
    pred: list[int]
    score: float


@dataclass(frozen=True, slots=True)
class PageScore:
    """A page's scores: ``teds``/``teds_s`` are None when its truth has no table; ``d_text`` is lower
    is better; the layout parts are kept for diagnosis."""

    teds: float | None
    teds_s: float | None
    d_text: float
    s_layout: float
    matches: list[Match]
    s_edge: float = 0.0
    s_node: float = 0.0
    coverage_f1: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageScore:
        """The inverse of :meth:`as_dict` (a cached score read back)."""
        return cls(**{**data, "matches": [Match(**m) for m in data["matches"]]})


# --- text ----------------------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """The seed's conservative normalization: whitespace (every Unicode space, and the zero-width
    space) and ``$`` removed, everything else kept."""
    return "".join(text.split()).replace("$", "").replace("\u200b", "")


def edit_distance(truth: str, pred: str) -> int:
    """Levenshtein distance where a truth ``ξ`` matches any one predicted character: the unit-cost
    alignment's substitutions of a ``ξ`` are not counted (decision 0073)."""
    if WILDCARD not in truth:
        return int(Levenshtein.distance(truth, pred))
    ops = Levenshtein.editops(truth, pred)
    free = sum(1 for op in ops if op.tag == "replace" and truth[op.src_pos] == WILDCARD)
    return len(ops) - free


# --- geometry ------------------------------------------------------------------------------------


def overlap_smaller(a: Box, b: Box) -> float:
    """A.1's overlap: the intersection's area over the smaller box's area (0 when disjoint)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return min(1.0, w * h / smaller) if smaller > 0 else 0.0


def _unit(box: Box, page: PageBlocks) -> Box:
    return (box[0] / page.width, box[1] / page.height, box[2] / page.width, box[3] / page.height)


def _envelope(boxes: Iterable[Box]) -> Box:
    xs0, ys0, xs1, ys1 = zip(*boxes, strict=True)
    return (min(xs0), min(ys0), max(xs1), max(ys1))


# --- tables --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Table:
    """A table as rows of cells: each cell's normalized text and structure token."""

    rows: tuple[tuple[tuple[str, str], ...], ...]
    size: int  # the table node, its rows and its cells
    text: str


@functools.lru_cache(maxsize=512)
def parse_table(html: str | None) -> Table | None:
    """The rows (``tr``) and cells (``td``/``th``) of a table's HTML, outer table only; None when it
    holds no cell."""
    if not html or not html.strip():
        return None
    try:
        root = lxml.html.fromstring(html)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None
    outer = root if root.tag == "table" else next(root.iter("table"), root)
    rows: list[tuple[tuple[str, str], ...]] = []
    for tr in outer.iter("tr"):
        if outer.tag == "table" and next(tr.iterancestors("table"), None) is not outer:
            continue  # a nested table's row: part of its cell's text
        cells = []
        for cell in tr:
            if not isinstance(cell.tag, str) or cell.tag not in ("td", "th"):
                continue
            token = f"{cell.tag}:{cell.get('rowspan', '1').strip() or '1'}x{cell.get('colspan', '1').strip() or '1'}"
            cells.append((normalize_text(cell.text_content()), token))
        rows.append(tuple(cells))
    n_cells = sum(len(r) for r in rows)
    if not n_cells:
        return None
    return Table(rows=tuple(rows), size=1 + len(rows) + n_cells, text="".join(t for r in rows for t, _ in r))


def _cell_sequence_distance(a: Sequence[int], b: Sequence[int], sub: list[list[float]]) -> float:
    """Edit distance of two rows' cells (indices into ``sub``, the cell substitution costs);
    inserting or deleting a cell costs 1."""
    previous = [float(j) for j in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        current = [float(i)]
        row = sub[ca]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1.0, current[j - 1] + 1.0, previous[j - 1] + row[cb]))
        previous = current
    return previous[-1]


def table_scores(truth: Table, pred: Table) -> tuple[float, float]:
    """TEDS and TEDS-S of two tables (A.2's row/cell sequence edit, normalized by the larger
    table's node count)."""
    g_cells = [c for r in truth.rows for c in r]
    p_cells = [c for r in pred.rows for c in r]
    text_cost = process.cdist(
        [t for t, _ in g_cells],
        [t for t, _ in p_cells],
        scorer=Levenshtein.normalized_distance,
        dtype=np.float64,
    )
    same = np.array([[tg == tp for _, tp in p_cells] for _, tg in g_cells], dtype=bool).reshape(
        text_cost.shape
    )
    teds_sub = np.where(same, text_cost, 1.0).tolist()
    struct_sub = np.where(same, 0.0, 1.0).tolist()
    g_rows, p_rows = _row_indices(truth.rows), _row_indices(pred.rows)
    biggest = max(truth.size, pred.size, 1)
    out = []
    for sub in (teds_sub, struct_sub):
        distance = _row_sequence_distance(g_rows, p_rows, sub)
        out.append(max(0.0, 1.0 - distance / biggest))
    return out[0], out[1]


def _row_indices(rows: Sequence[Sequence[object]]) -> list[list[int]]:
    out, k = [], 0
    for row in rows:
        out.append(list(range(k, k + len(row))))
        k += len(row)
    return out


def _row_sequence_distance(g_rows: list[list[int]], p_rows: list[list[int]], sub: list[list[float]]) -> float:
    """Rows aligned by edit distance: a row inserted or deleted costs itself and its cells, a row
    substituted costs its cells' sequence distance."""
    previous = [0.0]
    for row in p_rows:
        previous.append(previous[-1] + 1 + len(row))
    for g in g_rows:
        current = [previous[0] + 1 + len(g)]
        for j, p in enumerate(p_rows, 1):
            current.append(
                min(
                    previous[j] + 1 + len(g),
                    current[j - 1] + 1 + len(p),
                    previous[j - 1] + _cell_sequence_distance(g, p, sub),
                )
            )
        previous = current
    return previous[-1]


# --- the text pool ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Item:
    """One text-pool object: its block's index, normalized text and box on the unit page."""

    block: int
    text: str
    box: Box


def _reading_key(item: _Item) -> tuple[float, float, float, float, str]:
    return (item.box[1], item.box[0], item.box[3], item.box[2], item.text)


def _horizontal_key(item: _Item) -> tuple[float, float, float, float, str]:
    return (item.box[0], item.box[1], item.box[2], item.box[3], item.text)


def _text_pool(page: PageBlocks, unmatched_tables: dict[int, Table | None]) -> list[_Item]:
    items: list[_Item] = []
    for i, block in enumerate(page.blocks):
        if block.type == "table":
            if i not in unmatched_tables:
                continue
            table = unmatched_tables[i]
            if table is None or not table.rows:
                text = normalize_text(block.text)
                if text:
                    items.append(_Item(i, text, _unit(block.bbox, page)))
                continue
            # Each row a block, its box a band of the table's box (the DOM gives no row boxes).
            x0, y0, x1, y1 = block.bbox
            step = (y1 - y0) / len(table.rows)
            for r, row in enumerate(table.rows):
                text = "".join(t for t, _ in row)
                if text:
                    band = (x0, y0 + r * step, x1, y0 + (r + 1) * step)
                    items.append(_Item(i, text, _unit(band, page)))
            continue
        if block.type not in TEXT_TYPES:
            continue
        source = block.latex if block.type == "formula" and block.latex else block.text
        text = normalize_text(source)
        if text:
            items.append(_Item(i, text, _unit(block.bbox, page)))
    items.sort(key=_reading_key)
    return items


@dataclass(slots=True)
class _Group:
    truth: list[_Item] = field(default_factory=list)
    pred: list[_Item] = field(default_factory=list)
    cost: int = 0

    def texts(self) -> tuple[str, str]:
        return "".join(i.text for i in self.truth), "".join(i.text for i in self.pred)

    def distance(self) -> float:
        g, p = self.texts()
        return self.cost / max(len(g), len(p), 1)


def _orders(
    g: list[int], p: list[int], gi: list[_Item], pi: list[_Item], strength: np.ndarray
) -> list[tuple[list[int], list[int]]]:
    """The four order hypotheses of a component, each one order per side: reading order,
    horizontal order, reversed reading order, and each block placed by its strongest partner's
    place in the other side's reading order."""
    g_read = sorted(g, key=lambda k: _reading_key(gi[k]))
    p_read = sorted(p, key=lambda k: _reading_key(pi[k]))
    g_pos = {k: n for n, k in enumerate(g_read)}
    p_pos = {k: n for n, k in enumerate(p_read)}

    def guided_g(k: int) -> tuple[int, int]:
        best = max(p_read, key=lambda q: (strength[k, q], -p_pos[q]))
        return (p_pos[best], g_pos[k])

    def guided_p(k: int) -> tuple[int, int]:
        best = max(g_read, key=lambda q: (strength[q, k], -g_pos[q]))
        return (g_pos[best], p_pos[k])

    return [
        (g_read, p_read),
        (sorted(g, key=lambda k: _horizontal_key(gi[k])), sorted(p, key=lambda k: _horizontal_key(pi[k]))),
        (g_read[::-1], p_read[::-1]),
        (sorted(g, key=guided_g), sorted(p, key=guided_p)),
    ]


def _segment(g: list[int], p: list[int], gi: list[_Item], pi: list[_Item], edges: np.ndarray) -> list[_Group]:
    """The monotone segmentation of one component in fixed orders: each step takes up to
    :data:`MAX_SEGMENT` truth blocks, predicted blocks, or both (both only when every block of each
    segment has an edge into the other segment); one-sided steps cost their full length."""
    m, n = len(g), len(p)
    # A state's value is (edit cost, how much it merged): among equal costs the finer grouping wins,
    # so identical blocks pair one to one rather than in one many-to-many group.
    worst = (math.inf, math.inf)
    best: list[list[tuple[float, float]]] = [[worst] * (n + 1) for _ in range(m + 1)]
    back: list[list[tuple[int, int] | None]] = [[None] * (n + 1) for _ in range(m + 1)]
    best[0][0] = (0.0, 0.0)
    glen = [len(gi[k].text) for k in g]
    plen = [len(pi[k].text) for k in p]

    def offer(i: int, j: int, value: tuple[float, float], step: tuple[int, int]) -> None:
        if value < best[i][j]:
            best[i][j] = value
            back[i][j] = step

    for i in range(m + 1):
        for j in range(n + 1):
            cost, merged = best[i][j]
            if cost == math.inf:
                continue
            for a in range(1, min(MAX_SEGMENT, m - i) + 1):
                for b in range(1, min(MAX_SEGMENT, n - j) + 1):
                    block = edges[np.ix_(g[i : i + a], p[j : j + b])]
                    if not (block.any(axis=1).all() and block.any(axis=0).all()):
                        continue
                    step_cost = edit_distance(
                        "".join(gi[k].text for k in g[i : i + a]), "".join(pi[k].text for k in p[j : j + b])
                    )
                    offer(i + a, j + b, (cost + step_cost, merged + a * b - 1), (a, b))
            if i < m:
                offer(i + 1, j, (cost + glen[i], merged), (1, 0))
            if j < n:
                offer(i, j + 1, (cost + plen[j], merged), (0, 1))
    groups: list[_Group] = []
    i, j = m, n
    while i or j:
        step = back[i][j]
        assert step is not None
        a, b = step
        truth = [gi[k] for k in g[i - a : i]]
        pred = [pi[k] for k in p[j - b : j]]
        group = _Group(truth, pred)
        group.cost = edit_distance(*group.texts()) if a and b else len(group.texts()[0] or group.texts()[1])
        groups.append(group)
        i, j = i - a, j - b
    return groups[::-1]


def _text_groups(gi: list[_Item], pi: list[_Item]) -> list[_Group]:
    """A.3's groups: edges, components, the best order hypothesis, segmentation; residual blocks as
    one-sided groups."""
    m, n = len(gi), len(pi)
    if m and n:
        strength = process.cdist(
            [i.text for i in gi],
            [i.text for i in pi],
            scorer=fuzz.partial_ratio,
            dtype=np.float64,
            score_cutoff=TEXT_EDGE,
        )
    else:
        strength = np.zeros((m, n))
    edges = strength >= TEXT_EDGE
    groups: list[_Group] = []
    rows, cols = np.nonzero(edges)
    graph = coo_matrix((np.ones(len(rows)), (rows, cols + m)), shape=(m + n, m + n))
    count, labels = connected_components(graph, directed=False)
    members: list[tuple[list[int], list[int]]] = [([], []) for _ in range(count)]
    for k in range(m):
        members[labels[k]][0].append(k)
    for k in range(n):
        members[labels[m + k]][1].append(k)
    for g, p in members:
        if not g or not p:  # a block with no edge: a residual deletion or insertion
            groups.extend(_Group([gi[k]], [], len(gi[k].text)) for k in g)
            groups.extend(_Group([], [pi[k]], len(pi[k].text)) for k in p)
            continue
        orders = _orders(g, p, gi, pi, strength)
        costs = [
            edit_distance("".join(gi[k].text for k in og), "".join(pi[k].text for k in op))
            for og, op in orders
        ]
        best = int(np.argmin(costs))
        og, op = orders[best]
        if len(og) * len(op) > MAX_SEGMENTED:
            groups.append(_Group([gi[k] for k in og], [pi[k] for k in op], costs[best]))
        else:
            groups.extend(_segment(og, op, gi, pi, edges))
    return groups


def _page_order_key(group: _Group) -> tuple[float, float, float, float, tuple[str, ...]]:
    box = _envelope(i.box for i in (*group.truth, *group.pred))
    return (box[1], box[0], box[3], box[2], tuple(sorted(group.texts())))


# --- layout --------------------------------------------------------------------------------------


def _centre(box: Box) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def _node_similarity(g: Box, p: Box) -> float:
    """Centre displacement as a share of the unit page's diagonal, and width and height ratios."""
    (gx, gy), (px, py) = _centre(g), _centre(p)
    s_centre = max(0.0, 1.0 - math.hypot(px - gx, py - gy) / math.sqrt(2))
    gw, gh, pw, ph = g[2] - g[0], g[3] - g[1], p[2] - p[0], p[3] - p[1]
    s_w = min(gw, pw) / max(gw, pw) if max(gw, pw) > 0 else 1.0
    s_h = min(gh, ph) / max(gh, ph) if max(gh, ph) > 0 else 1.0
    return 0.5 * s_centre + 0.25 * s_w + 0.25 * s_h


def _edge_similarity(vg: tuple[float, float], vp: tuple[float, float]) -> float:
    lg, lp = math.hypot(*vg), math.hypot(*vp)
    if lg == 0 and lp == 0:
        s_dir = s_len = 1.0
    elif lg == 0 or lp == 0:
        s_dir, s_len = 0.0, 0.0
    else:
        cos = (vg[0] * vp[0] + vg[1] * vp[1]) / (lg * lp)
        s_dir = (1.0 + max(-1.0, min(1.0, cos))) / 2
        s_len = min(lg, lp) / max(lg, lp)
    s_vec = max(0.0, 1.0 - math.hypot(vp[0] - vg[0], vp[1] - vg[1]) / math.sqrt(2))
    w_dir, w_len, w_vec = EDGE_WEIGHTS
    return w_dir * s_dir + w_len * s_len + w_vec * s_vec


def layout_score(
    nodes: list[tuple[Box, Box]], covered: tuple[int, int], eligible: tuple[int, int]
) -> tuple[float, float, float, float]:
    """A.4's ``S_layout`` and its parts ``(s_layout, s_edge, s_node, F1)`` from the nodes' (truth,
    prediction) boxes on the unit page, and the blocks covered by nodes against those eligible, per
    side."""
    g_total, p_total = eligible
    if not g_total:
        return (1.0, 1.0, 1.0, 1.0) if not p_total else (0.0, 0.0, 0.0, 0.0)
    recall = covered[0] / g_total
    precision = covered[1] / p_total if p_total else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if not nodes:
        return (LAYOUT_WEIGHTS[2] * f1, 0.0, 0.0, f1)
    nodes = sorted(nodes)
    s_node = sum(_node_similarity(g, p) for g, p in nodes) / len(nodes)
    centres_g = [_centre(g) for g, _ in nodes]
    centres_p = [_centre(p) for _, p in nodes]
    edge_scores = []
    for i, (gx, gy) in enumerate(centres_g):
        near = sorted((math.hypot(cx - gx, cy - gy), j) for j, (cx, cy) in enumerate(centres_g) if j != i)[
            :K_NEIGHBOURS
        ]
        for _, j in near:
            vg = (centres_g[j][0] - gx, centres_g[j][1] - gy)
            vp = (centres_p[j][0] - centres_p[i][0], centres_p[j][1] - centres_p[i][1])
            edge_scores.append(_edge_similarity(vg, vp))
    s_edge = sum(edge_scores) / len(edge_scores) if edge_scores else s_node
    w_edge, w_node, w_f1 = LAYOUT_WEIGHTS
    return (w_edge * s_edge + w_node * s_node + w_f1 * f1, s_edge, s_node, f1)


# --- the page --------------------------------------------------------------------------------------


def _table_key(page: PageBlocks, i: int) -> tuple[Box, str, str]:
    block = page.blocks[i]
    return (_unit(block.bbox, page), block.html or "", block.text)


def score_page(truth: PageBlocks, pred: PageBlocks) -> PageScore:
    """The page's TEDS, TEDS-S, D_text, S_layout and matches (docs/protocol.md "The objective
    protocol")."""
    g_tables = sorted(
        (i for i, b in enumerate(truth.blocks) if b.type == "table"), key=lambda i: _table_key(truth, i)
    )
    p_tables = sorted(
        (i for i, b in enumerate(pred.blocks) if b.type == "table"), key=lambda i: _table_key(pred, i)
    )
    g_parsed = {i: parse_table(truth.blocks[i].html) for i in g_tables}
    p_parsed = {i: parse_table(pred.blocks[i].html) for i in p_tables}
    matches: list[Match] = []
    nodes: list[tuple[Box, Box]] = []
    table_pairs: dict[int, tuple[float, float]] = {}
    matched_p: set[int] = set()
    if g_tables and p_tables:
        score = np.zeros((len(g_tables), len(p_tables)))
        parts: dict[tuple[int, int], tuple[float, float]] = {}
        for a, gi in enumerate(g_tables):
            gt = g_parsed[gi]
            for b, pj in enumerate(p_tables):
                pt = p_parsed[pj]
                teds, teds_s = table_scores(gt, pt) if gt and pt else (0.0, 0.0)
                g_text = gt.text if gt else normalize_text(truth.blocks[gi].text)
                p_text = pt.text if pt else normalize_text(pred.blocks[pj].text)
                partial = fuzz.partial_ratio(g_text, p_text) / 100 if g_text and p_text else 0.0
                ov = overlap_smaller(_unit(truth.blocks[gi].bbox, truth), _unit(pred.blocks[pj].bbox, pred))
                w = TABLE_WEIGHTS
                score[a, b] = w[0] * teds + w[1] * teds_s + w[2] * partial + w[3] * ov
                parts[a, b] = (teds, teds_s)
        available = np.where(score >= TABLE_THRESHOLD, score, 0.0)
        for a, b in zip(*linear_sum_assignment(available, maximize=True), strict=True):
            if score[a, b] < TABLE_THRESHOLD:
                continue  # the threshold validation: a forced pair is no match
            gi, pj = g_tables[a], p_tables[b]
            table_pairs[gi] = parts[a, b]
            matched_p.add(pj)
            matches.append(Match("table", [gi], [pj], round(float(score[a, b]), 6)))
            nodes.append((_unit(truth.blocks[gi].bbox, truth), _unit(pred.blocks[pj].bbox, pred)))
    page_teds: float | None = None
    page_teds_s: float | None = None
    if g_tables:
        # Each truth table counts; one without a match scores 0 (decision 0073).
        page_teds = sum(table_pairs.get(i, (0.0, 0.0))[0] for i in g_tables) / len(g_tables)
        page_teds_s = sum(table_pairs.get(i, (0.0, 0.0))[1] for i in g_tables) / len(g_tables)

    g_items = _text_pool(truth, {i: g_parsed[i] for i in g_tables if i not in table_pairs})
    p_items = _text_pool(pred, {j: p_parsed[j] for j in p_tables if j not in matched_p})
    groups = sorted(_text_groups(g_items, p_items), key=_page_order_key)
    t_g = "".join(group.texts()[0] for group in groups)
    t_p = "".join(group.texts()[1] for group in groups)
    d_text = edit_distance(t_g, t_p) / max(len(t_g), len(t_p), 1)

    anchored = bool(table_pairs)
    covered_g = covered_p = 0
    for group in groups:
        matches.append(
            Match(
                "text",
                sorted({i.block for i in group.truth}),
                sorted({i.block for i in group.pred}),
                round(1.0 - group.distance(), 6) if group.truth and group.pred else 0.0,
            )
        )
        if not (group.truth and group.pred) or (anchored and group.distance() > WEAK_GROUP):
            continue
        nodes.append((_envelope(i.box for i in group.truth), _envelope(i.box for i in group.pred)))
        covered_g += len(group.truth)
        covered_p += len(group.pred)
    # Unmatched tables are in the text pool, one item per row.
    eligible = (len(table_pairs) + len(g_items), len(matched_p) + len(p_items))
    covered = (covered_g + len(table_pairs), covered_p + len(table_pairs))
    s_layout, s_edge, s_node, f1 = layout_score(nodes, covered, eligible)
    return PageScore(
        teds=page_teds,
        teds_s=page_teds_s,
        d_text=d_text,
        s_layout=s_layout,
        matches=matches,
        s_edge=s_edge,
        s_node=s_node,
        coverage_f1=f1,
    )
