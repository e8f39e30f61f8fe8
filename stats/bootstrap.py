"""Stratified page-block bootstrap (SPEC §5 "Confidence intervals", §6, §7).

Pure module: numpy in, numpy out, no Django.

A *unit* is one page within one stratum (a block for the human study; a single stratum for the
deployment leaderboard). A resample draws, independently within each stratum, as many units as
the stratum has, with replacement; every unit carries all of its comparisons. Resamples are
returned as a count matrix ``W`` of shape ``(n_resamples, n_units)``: ``W[r, u]`` is how many
times unit ``u`` was drawn in resample ``r``. A statistic that is a weighted sum over
comparisons is then evaluated for every resample at once as ``W[:, unit_of_comparison]``.

Decision (written down in docs/decisions.md): when one page has comparisons in several blocks,
each (block, page) pair is its own unit, so stratification by block is never broken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
        raise ValueError("pages and strata must have the same length")
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
        raise ValueError("resamples must be at least 1")
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
    """2.5th and 97.5th percentiles (SPEC §5), ignoring NaN resamples. Shape: (2, ...)."""
    return np.nanpercentile(values, [2.5, 97.5], axis=axis)
