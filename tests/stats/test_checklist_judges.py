"""A checklist judge's scores (docs/protocol.md "Checklist judges"), against hand-computed values."""

from __future__ import annotations

import pandas as pd
import pytest

from stats.checklist_judges import checklist_judge_scores
from stats.errors import InvalidKindData


def frame(rows: list[tuple[str, str, str, str, str | None, bool]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["brief", "system", "item", "predicate", "dimension", "passed"])


ROWS = [
    # b1-x: Content 2 of 3 pass, Style 1 of 1; b2-x: Content 0 of 1, Style 1 of 2.
    ("b1", "x", "b1-x", "p1", "Content", True),
    ("b1", "x", "b1-x", "p2", "Content", True),
    ("b1", "x", "b1-x", "p3", "Content", False),
    ("b1", "x", "b1-x", "p4", "Style", True),
    ("b2", "x", "b2-x", "p5", "Content", False),
    ("b2", "x", "b2-x", "p6", "Style", True),
    ("b2", "x", "b2-x", "p7", "Style", False),
    # y: one item with an untyped question only.
    ("b1", "y", "b1-y", "p8", None, True),
]


def test_item_scores_are_pass_rates_and_systems_average_items() -> None:
    result = checklist_judge_scores(frame(ROWS), resamples=200, seed=3)
    x = result.system("x")
    got = {d.dimension: d for d in x.dimensions}
    # Content: items 66.67 and 0 → 33.33 (not the pooled 2 of 4 = 50); Style: 100 and 50 → 75.
    assert got["Content"].value == pytest.approx((200 / 3 + 0) / 2)
    assert got["Style"].value == pytest.approx(75.0)
    assert (got["Content"].n_questions, got["Content"].n_passed, got["Content"].n_items) == (4, 2, 2)
    assert x.visual == pytest.approx((100 / 3 + 75) / 2)
    items = {i["item"]: i for i in result.items}
    assert items["b1-x"]["visual"] == pytest.approx((200 / 3 + 100) / 2)
    assert items["b2-x"]["visual"] == pytest.approx(25.0)
    assert result.system("y").visual == 100.0 and result.dimensions == ("Content", "Style", "(untyped)")
    lo, hi = got["Style"].ci95
    assert 50.0 <= lo <= 75.0 <= hi <= 100.0  # every resample is a mean of 100 and 50


def test_bad_rows_are_refused_by_name() -> None:
    with pytest.raises(InvalidKindData, match="answered twice"):
        checklist_judge_scores(frame([*ROWS, ROWS[0]]), resamples=10, seed=1)
    with pytest.raises(InvalidKindData, match="'passed' row 0"):
        checklist_judge_scores(frame([("b1", "x", "i", "p", "C", "yes")]), resamples=10, seed=1)  # type: ignore[list-item]
