"""objective.aggregate: table means over table pages only, the rest over all pages, A.5's S_obj."""

from __future__ import annotations

import pytest

from objective.aggregate import objective_score, system_scores
from objective.score import PageScore


def page(teds: float | None, d_text: float, s_layout: float) -> PageScore:
    return PageScore(
        teds=teds, teds_s=None if teds is None else teds / 2, d_text=d_text, s_layout=s_layout, matches=[]
    )


def test_table_means_skip_pages_without_a_truth_table() -> None:
    scores = system_scores({"a": page(0.8, 0.1, 0.9), "b": page(None, 0.3, 0.7), "c": page(0.6, 0.2, 0.5)})
    assert scores.teds == pytest.approx(0.7)  # (0.8 + 0.6) / 2, page b left out
    assert scores.teds_s == pytest.approx(0.35)
    assert scores.d_text == pytest.approx(0.2)  # (0.1 + 0.3 + 0.2) / 3
    assert scores.s_layout == pytest.approx(0.7)  # (0.9 + 0.7 + 0.5) / 3
    # S_obj = (0.3 * 0.7 + (1 - 0.2) + 0.7) / 2.3 = 1.71 / 2.3
    assert scores.s_obj == pytest.approx(1.71 / 2.3)
    assert (scores.n_pages, scores.n_table_pages) == (3, 2)
    assert scores.as_dict()["s_obj"] == scores.s_obj


def test_without_any_table_page_s_obj_is_text_and_layout() -> None:
    scores = system_scores({"a": page(None, 0.25, 0.5)})
    assert scores.teds is None and scores.teds_s is None
    assert scores.s_obj == pytest.approx((0.75 + 0.5) / 2)
    assert objective_score(1.0, 0.0, 1.0) == pytest.approx(1.0)


def test_no_page_is_an_error() -> None:
    with pytest.raises(ValueError, match="no page"):
        system_scores({})
