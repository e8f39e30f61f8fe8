"""Stratified page-block bootstrap (docs/protocol.md "Human reference and agreement" (Confidence intervals),
"Judges and calibration", "Deployment leaderboard").

Pure module: numpy in, numpy out, no Django.

A *unit* is one page within one stratum (a block for the human study; a single stratum for the
deployment leaderboard). A resample draws, independently within each stratum, as many units as
the stratum has, with replacement; every unit carries all of its comparisons. Resamples are
returned as a count matrix ``W`` of shape ``(n_resamples, n_units)``: ``W[r, u]`` is how many
times unit ``u`` was drawn in resample ``r``. A statistic that is a weighted sum over
comparisons is then evaluated for every resample at once as ``W[:, unit_of_comparison]``.

Decision (written down in docs/decisions/0001-bootstrap-units.md): when one page has comparisons in several
blocks, each (block, page) pair is its own unit, so stratification by block is never broken.

The cluster bootstrap over briefs (docs/study-kinds.md "The kind report" (cluster bootstrap over source tasks
(briefs))) is the same bootstrap with the briefs as the pages and one stratum (``brief_bootstrap``): a
resample draws as many briefs as there are, with replacement, and every brief carries all of its observations.
Statistics are ratios of per-brief sums, so a resample is evaluated as ``W @ sums``.

Intervals are the 2.5th and 97.5th percentiles of the resamples (``percentile_interval``,
docs/protocol.md "Human reference and agreement"), resamples where the statistic is undefined (NaN, ±inf) left
out.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stats.errors import InvalidKindData, StatisticsError


@dataclass(frozen=True)
class BootstrapUnits:
    """The unit of every comparison and the stratum of every unit.

    ``unit_of`` has one entry per comparison (an index into the units); ``stratum_of_unit`` one
    entry per unit. Units are numbered in sorted (stratum, page) order so that the same input
    always gives the same numbering, whatever the order of the comparisons.
    """

    unit_of: np.ndarray
    stratum_of_unit: np.ndarray
    unit_keys: tuple[tuple[str, str], ...]

    @property
    def n_units(self) -> int:
        return len(self.unit_keys)


def bootstrap_units(pages: Sequence[object], strata: Sequence[object] | None = None) -> BootstrapUnits:
    """Group comparisons into (stratum, page) units. ``strata=None`` means one stratum."""
    if strata is None:
        strata = [""] * len(pages)
    if len(strata) != len(pages):
        raise StatisticsError("pages and strata must have the same length")
    keys = [(str(s), str(p)) for s, p in zip(strata, pages, strict=True)]
    unit_keys = tuple(sorted(set(keys)))
    index = {k: i for i, k in enumerate(unit_keys)}
    unit_of = np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))
    stratum_names = sorted({s for s, _ in unit_keys})
    stratum_index = {s: i for i, s in enumerate(stratum_names)}
    stratum_of_unit = np.fromiter((stratum_index[s] for s, _ in unit_keys), dtype=np.int64, count=len(unit_keys))
    return BootstrapUnits(unit_of=unit_of, stratum_of_unit=stratum_of_unit, unit_keys=unit_keys)


def bootstrap_page_blocks(units: BootstrapUnits, *, resamples: int, seed: int) -> np.ndarray:
    """Draw ``resamples`` stratified resamples; return the ``(resamples, n_units)`` count matrix.

    Deterministic in (units, resamples, seed): strata are visited in sorted order and each
    stratum draws one ``(resamples, size)`` block of integers from ``numpy.random.default_rng(seed)``.
    """
    if resamples < 1:
        raise StatisticsError("resamples must be at least 1")
    rng = np.random.default_rng(seed)
    n_units = units.n_units
    row_offset = np.arange(resamples, dtype=np.int64)[:, None] * n_units
    flat: list[np.ndarray] = []
    for stratum in np.unique(units.stratum_of_unit):
        members = np.flatnonzero(units.stratum_of_unit == stratum)
        draws = rng.integers(0, len(members), size=(resamples, len(members)))
        flat.append((row_offset + members[draws]).ravel())
    if not flat:
        return np.zeros((resamples, n_units), dtype=np.int32)
    # One bincount over (resample, unit) cells: the same counts as np.add.at, several times faster.
    counts = np.bincount(np.concatenate(flat), minlength=resamples * n_units)
    return counts.reshape(resamples, n_units).astype(np.int32)


def comparison_weights(units: BootstrapUnits, counts: np.ndarray) -> np.ndarray:
    """Per-resample weight of every comparison: ``(resamples, n_comparisons)``."""
    return counts[:, units.unit_of]


def percentile_interval(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """2.5th and 97.5th percentiles along ``axis`` (docs/protocol.md "Human reference and agreement"). Shape:
    (2, ...).

    NaN and ±inf resamples (the statistic undefined there) are left out; NaN where none is finite.
    """
    v = np.asarray(values, dtype=float)
    v = np.where(np.isfinite(v), v, np.nan)
    if v.shape[axis] == 0:  # no resample: numpy would give one scalar NaN, not the shape
        return np.full((2, *np.delete(np.array(v.shape), axis)), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN slice gives NaN, as documented
        return np.nanpercentile(v, [2.5, 97.5], axis=axis)


def percentile_ci(values: np.ndarray) -> tuple[float, float]:
    """``percentile_interval`` of one vector of resamples, as two floats."""
    lo, hi = percentile_interval(np.ravel(np.asarray(values, dtype=float)))
    return (float(lo), float(hi))


def ratio_of_sums(num: np.ndarray, den: np.ndarray) -> np.ndarray | float:
    """``num / den`` elementwise, NaN where ``den == 0`` (a ratio of sums with nothing counted)."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------
# The cluster bootstrap over briefs (docs/study-kinds.md "The kind report")
# --------------------------------------------------------------------------------------------


def check_bootstrap_args(resamples: int, seed: int) -> None:
    if not isinstance(resamples, (int, np.integer)) or resamples < 1:
        raise InvalidKindData("resamples must be a positive integer")
    if not isinstance(seed, (int, np.integer)):
        raise InvalidKindData("seed must be an integer")


@dataclass(frozen=True)
class BriefBootstrap:
    """The cluster bootstrap over briefs (docs/study-kinds.md "The kind report"): brief ids and the resample
    count matrix.

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
    """Draw the docs/study-kinds.md "The kind report" cluster bootstrap over the distinct ``brief_ids`` (one
    stratum).

    Uses ``bootstrap_units(pages=briefs)`` and ``bootstrap_page_blocks``, so the same
    (briefs, resamples, seed) always gives the same count matrix.
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
