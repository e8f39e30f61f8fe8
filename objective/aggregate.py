"""A system's objective scores over its pages (docs/protocol.md "The objective protocol", after
AmbiHTMLBench's A.5; the formula's reading is decision 0069).

Table means (TEDS, TEDS-S) are over the pages whose truth has a table; D_text and S_layout over
every page; ``S_obj = (0.3 TEDS + (1 - D_text) + S_layout) / 2.3`` from those means. A system with
no table page has ``S_obj = ((1 - D_text) + S_layout) / 2`` (the same weights without the table
term). No Django, no app code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from objective.score import PageScore

#: A.5's weights: table 0.3, text quality and layout 1.0 each.
OBJ_WEIGHTS = (0.3, 1.0, 1.0)


@dataclass(frozen=True, slots=True)
class SystemScore:
    """Means over a system's pages and ``s_obj``; table means are None with no table page."""

    teds: float | None
    teds_s: float | None
    d_text: float
    s_layout: float
    s_obj: float
    n_pages: int
    n_table_pages: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def objective_score(teds: float | None, d_text: float, s_layout: float) -> float:
    """A.5's weighted aggregate of a system's means (decision 0069)."""
    w_table, w_text, w_layout = OBJ_WEIGHTS
    if teds is None:
        return (w_text * (1.0 - d_text) + w_layout * s_layout) / (w_text + w_layout)
    return (w_table * teds + w_text * (1.0 - d_text) + w_layout * s_layout) / (w_table + w_text + w_layout)


def system_scores(pages: Mapping[str, PageScore]) -> SystemScore:
    """The system's means over ``pages`` (page name to its score); at least one page."""
    if not pages:
        raise ValueError("pages: no page to aggregate")
    scores = list(pages.values())
    tables = [s for s in scores if s.teds is not None]
    teds = sum(s.teds for s in tables if s.teds is not None) / len(tables) if tables else None
    teds_s = sum(s.teds_s for s in tables if s.teds_s is not None) / len(tables) if tables else None
    d_text = sum(s.d_text for s in scores) / len(scores)
    s_layout = sum(s.s_layout for s in scores) / len(scores)
    return SystemScore(
        teds=teds,
        teds_s=teds_s,
        d_text=d_text,
        s_layout=s_layout,
        s_obj=objective_score(teds, d_text, s_layout),
        n_pages=len(scores),
        n_table_pages=len(tables),
    )
