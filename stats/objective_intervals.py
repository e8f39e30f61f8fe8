"""Page-block bootstrap intervals of the objective scores (docs/protocol.md "Objective scores beside
the rankings").

Pure module: numpy in, dataclasses out, no Django.

Each system has one page score per page with ground truth: TEDS and TEDS-S (null on a page whose
truth has no table), D_text and S_layout. The system's scores are the objective protocol's
aggregation: TEDS and TEDS-S averaged over the pages with a truth table, D_text and S_layout over
all of its scored pages, and S_obj combined from those (``combine``, the protocol's own function,
passed in so that the formula lives in one place).

The intervals resample pages, as the leaderboard does (``stats.bootstrap.bootstrap_units`` with one
stratum and ``bootstrap_page_blocks``, the same seed): a resample draws as many pages as there are,
with replacement, and every drawn page carries the scores of every system on it, so two systems'
intervals come from the same draws. A mean is then the count-weighted mean of the page values; a
resample in which no drawn page has a truth table has no TEDS (left out of the percentiles, as
``percentile_interval`` documents).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval

METRICS = ("teds", "teds_s", "d_text", "s_layout", "s_obj")
Combine = Callable[[float | None, float, float], float]


@dataclass(frozen=True)
class MetricInterval:
    value: float | None
    ci95: tuple[float | None, float | None]


@dataclass(frozen=True)
class SystemObjective:
    """One system's objective scores with their 95 % page-bootstrap intervals, and how many pages
    they are over (``pages``; ``table_pages``: those with a truth table)."""

    system: str
    pages: int
    table_pages: int
    metrics: dict[str, MetricInterval]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"system": self.system, "pages": self.pages, "table_pages": self.table_pages}
        for name, metric in self.metrics.items():
            out[name] = metric.value
            out[f"{name}_ci95"] = list(metric.ci95)
        return out


def _mean(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Count-weighted means of ``values`` (NaN left out) for every row of ``weights``."""
    present = np.isfinite(values)
    total = weights[:, present].sum(axis=1).astype(float)
    summed = weights[:, present] @ values[present]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, summed / np.where(total > 0, total, 1.0), np.nan)


def _value(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def objective_intervals(
    pages: Sequence[str],
    scores: Mapping[str, Mapping[str, Mapping[str, float | None]]],
    *,
    combine: Combine,
    resamples: int,
    seed: int,
) -> list[SystemObjective]:
    """Per system (``scores[system][page]`` = ``{teds, teds_s, d_text, s_layout}``), the objective
    scores over ``pages`` and their page-bootstrap intervals. A page a system has no score on is
    left out of that system's means (each system's score is over its own scored pages)."""
    page_list = sorted({str(p) for p in pages})
    units = bootstrap_units(page_list)
    counts = (
        bootstrap_page_blocks(units, resamples=resamples, seed=seed)
        if page_list
        else np.zeros((resamples, 0), dtype=np.int32)
    )
    full = np.ones((1, len(page_list)), dtype=np.int32)
    out = []
    for system in sorted(scores):
        by_page = scores[system]
        columns = {name: _column(by_page, page_list, name) for name in METRICS[:4]}
        metrics: dict[str, MetricInterval] = {}
        point = {name: _mean(full, column)[0] for name, column in columns.items()}
        drawn = {name: _mean(counts, column) for name, column in columns.items()}
        for name in METRICS[:4]:
            low, high = percentile_interval(drawn[name])
            metrics[name] = MetricInterval(_value(point[name]), (_value(low), _value(high)))
        s_obj_point = _combined(combine, point["teds"], point["d_text"], point["s_layout"])
        s_obj_drawn = np.array(
            [
                _combined(combine, t, d, s)
                for t, d, s in zip(drawn["teds"], drawn["d_text"], drawn["s_layout"], strict=True)
            ],
            dtype=float,
        )
        low, high = percentile_interval(s_obj_drawn)
        metrics["s_obj"] = MetricInterval(_value(s_obj_point), (_value(low), _value(high)))
        out.append(
            SystemObjective(
                system=system,
                pages=int(np.isfinite(columns["d_text"]).sum()),
                table_pages=int(np.isfinite(columns["teds"]).sum()),
                metrics=metrics,
            )
        )
    return out


def _column(by_page: Mapping[str, Mapping[str, float | None]], pages: Sequence[str], name: str) -> np.ndarray:
    """One metric's page values in ``pages`` order, NaN where the page has none."""
    values = np.full(len(pages), np.nan)
    for i, page in enumerate(pages):
        found = by_page.get(page)
        value = found.get(name) if found is not None else None
        if value is not None:
            values[i] = float(value)
    return values


def _combined(combine: Combine, teds: float, d_text: float, s_layout: float) -> float:
    if not (np.isfinite(d_text) and np.isfinite(s_layout)):
        return float("nan")
    return float(combine(float(teds) if np.isfinite(teds) else None, float(d_text), float(s_layout)))
