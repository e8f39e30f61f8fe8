"""Helpers shared by the SPEC §11 kind analyses: validation, JSON cleaning, the brief bootstrap.

The cluster bootstrap over briefs (SPEC §11 "cluster bootstrap over source tasks (briefs)") is the
shared page-block bootstrap of ``stats.bootstrap`` with the briefs as the pages and one
stratum: a resample draws as many briefs as there are, with replacement, and every brief carries
all of its observations. Statistics are ratios of per-brief sums, so a resample is evaluated as
``W @ sums`` with the count matrix ``W`` of shape ``(resamples, n_briefs)``; a weight of ``w`` is
exactly the brief appearing ``w`` times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from stats.agreement import _clean, _percentile_ci
from stats.bootstrap import bootstrap_page_blocks, bootstrap_units


class InvalidKindData(ValueError):
    """An input frame of a SPEC §11 analysis is malformed (the message names the column and row)."""


def json_safe(value: Any) -> Any:
    """Plain JSON types: numpy → Python, NaN/inf → None, tuples → lists (same as the §10 reports)."""
    return _clean(value)


def percentile_ci(values: np.ndarray) -> tuple[float, float]:
    """Percentile 2.5/97.5 of bootstrap values, NaN resamples ignored (SPEC §5 intervals)."""
    return _percentile_ci(values)


def require_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> pd.DataFrame:
    """A private, index-reset copy of ``frame`` after checking that ``columns`` are present."""
    if not isinstance(frame, pd.DataFrame):
        raise InvalidKindData(f"{name} must be a pandas DataFrame")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidKindData(f"{name}: missing column(s) {', '.join(missing)}")
    return frame.reset_index(drop=True).copy()


def string_column(frame: pd.DataFrame, column: str, name: str) -> pd.Series:
    """``frame[column]`` as ``str`` values; a missing value raises naming the row."""
    bad = frame[column].isna()
    if bad.any():
        raise InvalidKindData(f"{name}: column {column!r} row {int(np.flatnonzero(bad)[0])}: missing value")
    return pd.Series([str(v) for v in frame[column].tolist()], index=frame.index, dtype=object)


def parse_bool(v: Any) -> bool | None:
    """True/False, 1/0, "true"/"false", "1"/"0" → bool; anything else (missing included) → None."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer, float, np.floating)) and not isinstance(v, bool):
        return bool(v) if v in (0, 1) else None
    if isinstance(v, str):
        key = v.strip().lower()
        if key in ("true", "1"):
            return True
        if key in ("false", "0"):
            return False
    return None


def bool_column(frame: pd.DataFrame, column: str, name: str, *, default: bool | None = None) -> pd.Series:
    """``frame[column]`` as ``bool`` (accepts bools, 0/1, "true"/"false"); absent column → ``default``."""
    if column not in frame.columns:
        if default is None:
            raise InvalidKindData(f"{name}: missing column {column!r}")
        return pd.Series(default, index=frame.index, dtype=bool)
    out = []
    for i, v in enumerate(frame[column].tolist()):
        parsed = parse_bool(v)
        if parsed is None:
            raise InvalidKindData(f"{name}: column {column!r} row {i}: expected a boolean, got {v!r}")
        out.append(parsed)
    return pd.Series(out, index=frame.index, dtype=bool)


def check_bootstrap_args(resamples: int, seed: int) -> None:
    if not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise InvalidKindData("resamples must be a positive integer")
    if not isinstance(seed, (int, np.integer)):
        raise InvalidKindData("seed must be an integer")


@dataclass(frozen=True)
class BriefBootstrap:
    """The cluster bootstrap over briefs (SPEC §11): brief ids and the resample count matrix.

    ``briefs`` are the distinct brief ids in sorted order (the column order of ``counts``);
    ``counts[r, j]`` is how often brief ``briefs[j]`` was drawn in resample ``r``.
    """

    briefs: tuple[str, ...]
    counts: np.ndarray
    resamples: int
    seed: int

    def column_of(self, brief_ids: Sequence[str] | np.ndarray) -> np.ndarray:
        """Column index in ``counts`` of each brief id."""
        index = {b: i for i, b in enumerate(self.briefs)}
        return np.fromiter((index[str(b)] for b in brief_ids), dtype=np.int64, count=len(brief_ids))

    def weights(self, brief_ids: Sequence[str] | np.ndarray) -> np.ndarray:
        """``(resamples, n)`` weight of each observation, given the brief of each observation."""
        return self.counts[:, self.column_of(brief_ids)].astype(float)


def brief_bootstrap(brief_ids: Sequence[object], *, resamples: int, seed: int) -> BriefBootstrap:
    """Draw the SPEC §11 cluster bootstrap over the distinct ``brief_ids`` (one stratum).

    Uses ``stats.bootstrap.bootstrap_units(pages=briefs)`` and ``bootstrap_page_blocks``, so
    the same (briefs, resamples, seed) always gives the same count matrix.
    """
    check_bootstrap_args(resamples, seed)
    briefs = sorted({str(b) for b in brief_ids})
    units = bootstrap_units(briefs)
    # Units are numbered in sorted ("", brief) order, i.e. the order of ``briefs``.
    assert [k[1] for k in units.unit_keys] == briefs
    if briefs:
        counts = bootstrap_page_blocks(units, resamples=resamples, seed=seed)
    else:
        counts = np.zeros((resamples, 0), dtype=np.int32)
    return BriefBootstrap(briefs=tuple(briefs), counts=counts, resamples=int(resamples), seed=int(seed))


def ratio_of_sums(num: np.ndarray, den: np.ndarray) -> np.ndarray | float:
    """``num / den`` elementwise, NaN where ``den == 0``."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def bootstrap_ratio_ci(
    boot: BriefBootstrap, brief_ids: Sequence[str] | np.ndarray, num: np.ndarray, den: np.ndarray
) -> tuple[float, float]:
    """Percentile interval of ``Σ num / Σ den`` over brief-bootstrap resamples.

    ``num`` and ``den`` are per-observation values; observations are aggregated per brief first
    (``np.bincount``) so the work is ``resamples × n_briefs``.
    """
    if len(brief_ids) == 0:
        return (math.nan, math.nan)
    col = boot.column_of(brief_ids)
    n_b = len(boot.briefs)
    num_b = np.bincount(col, weights=np.asarray(num, dtype=float), minlength=n_b)
    den_b = np.bincount(col, weights=np.asarray(den, dtype=float), minlength=n_b)
    w = boot.counts.astype(float)
    return percentile_ci(np.asarray(ratio_of_sums(w @ num_b, w @ den_b)))
