"""objective.score: each formula of docs/protocol.md "The objective protocol" on pages worked out by
hand (the arithmetic is in the comments), TEDS against apted's tree edit distance, and properties."""

from __future__ import annotations

import math
import random

import pytest
from apted import APTED, Config
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from objective.blocks import Block, PageBlocks
from objective.score import (
    Match,
    edit_distance,
    normalize_text,
    overlap_smaller,
    parse_table,
    score_page,
    table_scores,
)

SQRT2 = math.sqrt(2)


def page(*blocks: Block, size: float = 1000.0) -> PageBlocks:
    return PageBlocks(size, size, tuple(blocks))


def text(t: str, box: tuple[float, float, float, float], kind: str = "text") -> Block:
    return Block(kind, t, box)


def table(html: str, box: tuple[float, float, float, float] = (100, 650, 900, 950)) -> Block:
    return Block("table", "", box, html=html)


def grid(*rows: tuple[str, ...], head: bool = False) -> str:
    out = []
    for r, row in enumerate(rows):
        tag = "th" if head and r == 0 else "td"
        out.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in row) + "</tr>")
    return "<table>" + "".join(out) + "</table>"


# Three paragraphs whose normalized texts share no partial_ratio edge (each pair under 66):
# "Alpha" (5 characters), "Bravocharlie" (12), "Deltaecho" (9).
A = text("Alpha", (100, 100, 300, 200), "title")
B = text("Bravo charlie", (100, 300, 900, 400))
C = text("Delta echo", (100, 500, 900, 600))
TABLE = grid(("name", "value"), ("width", "1234"), head=True)
TRUTH = page(A, B, C, table(TABLE))


def test_an_identical_page_scores_teds_1_d_text_0_s_layout_1() -> None:
    score = score_page(TRUTH, TRUTH)
    assert (score.teds, score.teds_s, score.d_text, score.s_layout) == (1.0, 1.0, 0.0, 1.0)
    assert Match("table", [3], [3], 1.0) in score.matches
    assert {tuple(m.truth) for m in score.matches if m.kind == "text"} == {(0,), (1,), (2,)}


def test_a_page_without_a_truth_table_has_no_teds() -> None:
    score = score_page(page(A, B), page(A, B, table(TABLE)))
    assert score.teds is None and score.teds_s is None


def test_one_changed_cell() -> None:
    pred = page(A, B, C, table(grid(("name", "value"), ("width", "1235"), head=True)))
    score = score_page(TRUTH, pred)
    # Nodes: the table, 2 rows, 4 cells = 7. "1234" -> "1235" costs its normalized character
    # distance 1/4; structure is unchanged. TEDS = 1 - 0.25/7, TEDS-S = 1.
    assert score.teds == pytest.approx(1 - 0.25 / 7)
    assert score.teds_s == 1.0
    # Candidate score: 0.45 * TEDS + 0.25 * 1 + 0.20 * partial_ratio + 0.10 * overlap 1, where the
    # tables' texts "namevaluewidth1234" / "...1235" (18 characters) have partial_ratio 34/35:
    # rapidfuzz's best window is "namevaluewidth123" (17 characters, all shared), 2 * 17 / (18 + 17).
    candidate = 0.45 * (1 - 0.25 / 7) + 0.25 + 0.20 * 34 / 35 + 0.10
    assert [m for m in score.matches if m.kind == "table"] == [Match("table", [3], [3], round(candidate, 6))]
    # The matched table is not text; the paragraphs are unchanged.
    assert score.d_text == 0.0 and score.s_layout == 1.0


def test_one_deleted_paragraph() -> None:
    score = score_page(page(A, B, C), page(A, B))
    # T_g = "Alpha" + "Bravocharlie" + "Deltaecho" (26), T_p lacks "Deltaecho" (9): D = 9 / 26.
    assert score.d_text == pytest.approx(9 / 26)
    # Two nodes, both in place: s_node = s_edge = 1. Coverage: recall 2/3, precision 2/2,
    # F1 = 2 * (2/3) * 1 / (2/3 + 1) = 0.8. S_layout = 0.55 + 0.30 + 0.15 * 0.8 = 0.97.
    assert score.coverage_f1 == pytest.approx(0.8)
    assert score.s_layout == pytest.approx(0.97)
    assert Match("text", [2], [], 0.0) in score.matches


def test_one_split_block() -> None:
    # "Bravo charlie" split in two, with one typo: "Bravo" over "charlee".
    pred = page(A, text("Bravo", (100, 300, 500, 350)), text("charlee", (100, 350, 900, 400)), C)
    score = score_page(page(A, B, C), pred)
    # One group {B} <-> {Bravo, charlee}: Lev("Bravocharlie", "Bravocharlee") = 1; T_g has 26
    # characters, T_p 26: D = 1 / 26.
    assert score.d_text == pytest.approx(1 / 26)
    assert Match("text", [1], [1, 2], round(1 - 1 / 12, 6)) in score.matches
    # The group's predicted envelope is B's box: every node in place, all 3 + 4 blocks covered.
    assert score.s_layout == pytest.approx(1.0)


def test_one_merged_block() -> None:
    pred = page(A, text("Bravo charlie Delta echo!", (100, 300, 900, 600)))
    score = score_page(page(A, B, C), pred)
    # {B, C} <-> {merged}: Lev("BravocharlieDeltaecho", "BravocharlieDeltaecho!") = 1; T_g 26,
    # T_p 5 + 22 = 27: D = 1 / 27.
    assert score.d_text == pytest.approx(1 / 27)
    assert Match("text", [1, 2], [1], round(1 - 1 / 22, 6)) in score.matches
    # The truth envelope of {B, C} is (100, 300, 900, 600), the merged block's box: S_layout = 1.
    assert score.s_layout == pytest.approx(1.0)


def test_one_moved_figure() -> None:
    para = text("Bravo charlie", (0, 100, 1000, 300))  # centre (0.5, 0.2) on the unit page
    fig = Block("figure", "Figure 1: a plot", (400, 600, 600, 800))  # centre (0.5, 0.7), 0.2 x 0.2
    moved = Block("figure", "Figure 1: a plot", (800, 600, 1000, 800))  # centre (0.9, 0.7)
    score = score_page(page(para, fig), page(para, moved))
    assert score.d_text == 0.0
    # Figure node: centre moved 0.4 -> 1 - 0.4/sqrt2; same width and height:
    # 0.5 * (1 - 0.4/sqrt2) + 0.25 + 0.25. The paragraph's node: 1.
    s_node = (1 + 0.5 * (1 - 0.4 / SQRT2) + 0.5) / 2
    # Edge para -> figure: truth (0, 0.5), predicted (0.4, 0.5); |p| = sqrt(0.41).
    # s_dir = (1 + cos) / 2 with cos = 0.25 / (0.5 * sqrt 0.41); s_len = 0.5 / sqrt 0.41;
    # s_vec = 1 - |(0.4, 0)| / sqrt2. The edge back is the same mirrored, so s_edge is this one.
    cos = 0.25 / (0.5 * math.sqrt(0.41))
    s_edge = 0.4 * (1 + cos) / 2 + 0.3 * 0.5 / math.sqrt(0.41) + 0.3 * (1 - 0.4 / SQRT2)
    assert score.s_node == pytest.approx(s_node)
    assert score.s_edge == pytest.approx(s_edge)
    assert score.s_layout == pytest.approx(0.55 * s_edge + 0.30 * s_node + 0.15)
    assert score.s_layout == pytest.approx(0.871857, abs=1e-6)


def test_a_mirrored_layout() -> None:
    left = text("Left column text", (0, 0, 400, 200))  # centre (0.2, 0.1)
    right = text("Right column words", (600, 0, 1000, 200))  # centre (0.8, 0.1)
    mirrored = page(
        text("Left column text", (600, 0, 1000, 200)), text("Right column words", (0, 0, 400, 200))
    )
    score = score_page(page(left, right), mirrored)
    assert score.d_text == 0.0  # the same text, in one shared group order
    # Each node moves 0.6 across: s_node = 0.5 * (1 - 0.6/sqrt2) + 0.5.
    s_node = 0.5 * (1 - 0.6 / SQRT2) + 0.5
    # Edge left -> right: truth (0.6, 0), predicted (-0.6, 0): cos = -1 so s_dir = 0; same length
    # so s_len = 1; s_vec = 1 - 1.2/sqrt2.
    s_edge = 0.4 * 0 + 0.3 * 1 + 0.3 * (1 - 1.2 / SQRT2)
    assert score.s_layout == pytest.approx(0.55 * s_edge + 0.30 * s_node + 0.15)
    assert score.s_layout == pytest.approx(0.576354, abs=1e-6)


def test_an_unmatched_table_gives_its_rows_to_the_text_pool() -> None:
    # The prediction wrote the table as two paragraphs: no table pair, so TEDS = 0 for the page;
    # the truth table's rows "namevalue" and "width1234" find the paragraphs: D_text = 0.
    pred = page(A, text("name value", (100, 650, 900, 800)), text("width 1234", (100, 800, 900, 950)))
    score = score_page(page(A, table(TABLE)), pred)
    assert (score.teds, score.teds_s) == (0.0, 0.0)
    assert score.d_text == 0.0
    assert not [m for m in score.matches if m.kind == "table"]


def test_a_pair_under_the_threshold_is_no_match() -> None:
    # Different content, structure, text and place: every term near 0, under 0.40.
    other = table(grid(("x",)), (0, 0, 50, 50))
    score = score_page(page(table(TABLE)), page(other))
    assert score.teds == 0.0 and not [m for m in score.matches if m.kind == "table"]


def test_the_hungarian_assignment_is_global_not_greedy() -> None:
    # Truth tables T1, T2; predictions P1 (close to both) and P2 (close to T1 only). Greedy takes
    # T1-P1 first and leaves T2 alone; the assignment pairs T1-P2 and T2-P1.
    t1 = table(grid(("a1", "b1"), ("c1", "d1")), (0, 0, 400, 400))
    t2 = table(grid(("a1", "b1"), ("c1", "d2")), (500, 0, 900, 400))
    p1 = table(grid(("a1", "b1"), ("c1", "d1")), (500, 0, 900, 400))
    p2 = table(grid(("a1", "b1"), ("c9", "d9"), ("e", "f")), (0, 0, 400, 400))
    score = score_page(page(t1, t2), page(p1, p2))
    pairs = {(m.truth[0], m.pred[0]) for m in score.matches if m.kind == "table"}
    assert pairs == {(0, 1), (1, 0)}


def test_overlap_uses_the_smaller_box() -> None:
    assert overlap_smaller((0, 0, 10, 10), (2, 2, 4, 4)) == 1.0  # fully inside the larger
    assert overlap_smaller((0, 0, 10, 10), (5, 0, 15, 10)) == 0.5  # 50 / min(100, 100)
    assert overlap_smaller((0, 0, 1, 1), (2, 2, 3, 3)) == 0.0


def test_normalization_and_the_wildcard() -> None:
    assert normalize_text(" $x^2$ +\n y\u3000中 文 ") == "x^2+y中文"
    assert edit_distance("aξc", "abc") == 0
    assert edit_distance("aξc", "abd") == 1
    assert edit_distance("abc", "aξc") == 1  # only the truth's ξ is a wildcard


# --- TEDS against apted's tree edit distance ----------------------------------------------------


class CellConfig(Config):  # type: ignore[misc]
    """Tree-edit TEDS costs: renaming a cell costs its normalized character distance (1 across
    tags or spans); rows and the table rename for free; insertions and deletions cost 1."""

    def __init__(self, structure_only: bool) -> None:
        self.structure_only = structure_only

    def rename(self, a: Node, b: Node) -> float:
        if a.tag != b.tag:
            return 1.0
        if a.tag in ("table", "tr"):
            return 0.0
        if self.structure_only:
            return 0.0
        return float(Levenshtein.normalized_distance(a.text, b.text))

    def children(self, node: Node) -> list[Node]:
        return node.kids


class Node:
    def __init__(self, tag: str, text: str = "", kids: list[Node] | None = None) -> None:
        self.tag, self.text, self.kids = tag, text, kids or []

    def size(self) -> int:
        return 1 + sum(k.size() for k in self.kids)


def tree(html: str) -> Node:
    parsed = parse_table(html)
    assert parsed is not None
    return Node("table", kids=[Node("tr", kids=[Node(token, t) for t, token in row]) for row in parsed.rows])


def apted_teds(a: str, b: str, structure_only: bool = False) -> float:
    ta, tb = tree(a), tree(b)
    distance = APTED(ta, tb, CellConfig(structure_only)).compute_edit_distance()
    return 1 - distance / max(ta.size(), tb.size())


BASE = grid(("h1", "h2", "h3"), ("alpha", "beta", "gamma"), ("one", "two", "three"), head=True)


@pytest.mark.parametrize(
    "other",
    [
        BASE,
        grid(("h1", "h2", "h3"), ("alpha", "betta", "gamma"), ("one", "two", "three"), head=True),  # a typo
        grid(("h1", "h2", "h3"), ("alpha", "beta", "gamma"), head=True),  # a row deleted
        grid(
            ("h1", "h2", "h3"), ("alpha", "beta", "gamma"), ("one", "two"), head=True
        ),  # a last cell deleted
        grid(("h1", "h2", "h3"), ("alpha", "beta", "gamma"), ("one", "two", "three")),  # th -> td
        grid(
            ("h1", "h2", "h3"),
            ("alpha", "beta", "gamma"),
            ("one", "two", "three"),
            ("x", "y", "z"),
            head=True,
        ),
        BASE.replace("<td>two</td><td>three</td>", '<td colspan="2">two three</td>'),  # a merged cell
    ],
)
def test_teds_agrees_with_apted_where_rows_align(other: str) -> None:
    g, p = parse_table(BASE), parse_table(other)
    assert g is not None and p is not None
    teds, teds_s = table_scores(g, p)
    assert teds == pytest.approx(apted_teds(BASE, other))
    assert teds_s == pytest.approx(apted_teds(BASE, other, structure_only=True))


# --- properties ------------------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "table", "figure", "note", "sum", "2024", "x", "résumé", "数据"]


@st.composite
def pages(draw: st.DrawFn) -> PageBlocks:
    size = draw(st.sampled_from([800.0, 1000.0, 1400.0]))
    blocks = []
    for _ in range(draw(st.integers(0, 7))):
        x0 = draw(st.floats(0, size - 20))
        y0 = draw(st.floats(0, size - 20))
        box = (x0, y0, draw(st.floats(x0 + 10, size)), draw(st.floats(y0 + 10, size)))
        kind = draw(st.sampled_from(["text", "title", "text", "formula", "figure", "table"]))
        words = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=6)))
        if kind == "table":
            cells = draw(
                st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), min_size=1, max_size=3)
            )
            blocks.append(Block("table", words, box, html=grid(*map(tuple, cells))))
        else:
            blocks.append(Block(kind, words, box))
    return PageBlocks(size, size, tuple(blocks))


@settings(max_examples=60, deadline=None)
@given(pages(), pages(), st.randoms(use_true_random=False))
def test_properties(truth: PageBlocks, pred: PageBlocks, rnd: random.Random) -> None:
    score = score_page(truth, pred)
    for value in (score.teds, score.teds_s):
        assert value is None or 0.0 <= value <= 1.0
    assert 0.0 <= score.d_text <= 1.0
    assert 0.0 <= score.s_layout <= 1.0 + 1e-12
    # Invariant to the order of the blocks in either file.
    shuffled_t = PageBlocks(truth.width, truth.height, tuple(rnd.sample(truth.blocks, len(truth.blocks))))
    shuffled_p = PageBlocks(pred.width, pred.height, tuple(rnd.sample(pred.blocks, len(pred.blocks))))
    again = score_page(shuffled_t, shuffled_p)
    assert (again.teds, again.teds_s) == pytest.approx((score.teds, score.teds_s))
    assert again.d_text == pytest.approx(score.d_text)
    assert again.s_layout == pytest.approx(score.s_layout)
    # D_text is symmetric when the sides swap.
    assert score_page(pred, truth).d_text == pytest.approx(score.d_text)


def test_a_page_of_many_alike_blocks_is_scored_in_bounded_time() -> None:
    # 300 blocks of "1" on each side: one component of 90,000 pairs, over the segmentation's
    # bound, scored as one group (the same text on both sides: D_text 0).
    many = page(*(text("1", (0, 3 * k, 100, 3 * k + 2)) for k in range(300)))
    score = score_page(many, many)
    assert score.d_text == 0.0
    assert [len(m.truth) for m in score.matches] == [300]


def test_a_table_without_cells_is_scored_by_its_text() -> None:
    # A predicted "table" whose HTML has no cells cannot be compared as a table: it joins the text
    # pool with its text, which finds the truth table's rows "namevalue" and "width1234".
    pred = page(Block("table", "name value width 1234", (100, 650, 900, 950), html="<p>no cells</p>"))
    score = score_page(page(table(TABLE)), pred)
    assert score.teds == 0.0
    assert score.d_text == 0.0
