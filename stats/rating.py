"""Ratings: paired comparison of two systems per dimension and the equivalence verdict
(docs/study-kinds.md "The kind report"; AesCode §E.3).

Pure module: pandas in, frozen dataclasses out, no Django.

docs/study-kinds.md "The kind report" rule. For each rated dimension, two chosen systems are compared on the
same briefs: the mean paired difference ``d̄`` (system A − system B) with a 95 % t interval and a 95 %
cluster- bootstrap interval over briefs; the two systems are declared **equivalent** on the dimension only
when the whole interval lies inside the study's margin ``[−m, +m]`` (default ``m = 0.5``).

How the paired difference is built (decision):

1. Per brief and system, the rating is the **mean over its raters'** main ratings (and over the
   system's items on that brief, normally one); hidden repeats (``is_repeat``) are not data. The
   brief is the unit of pairing: ``d_b = mean_A(b) − mean_B(b)``, only for briefs where both
   systems have at least one rating on the dimension (others are counted as unpaired).
   Averaging first gives every brief the same weight whatever its number of raters and makes the
   t interval the ordinary paired-t interval on ``d_b`` (equal to ``scipy.stats.ttest_rel`` on the
   per-brief means).
2. t interval: ``d̄ ± t_{0.975, n−1} · s_d / √n`` (``scipy.stats.t``); with ``s_d = 0`` it is the
   point ``[d̄, d̄]`` (``s_d`` below 10⁻¹² · max(1, |d̄|) is rounding noise and
   counts as 0); with fewer than two paired briefs it is undefined (None).
3. Cluster bootstrap: the dimension's paired briefs are resampled with replacement
   (``stats.bootstrap``, briefs as pages, one stratum), ``d̄`` recomputed, percentile
   2.5/97.5 (at ``confidence`` 0.95).
4. The verdict uses the **t interval** (reported as ``equivalent``); the verdict the bootstrap
   interval would give is reported beside it (``equivalent_bootstrap``). The margin is closed:
   an interval ending exactly at ±m is inside (``−m ≤ low`` and ``high ≤ m``). None when the
   interval is undefined.
5. No verdict ("not estimable", with a reason; both verdicts None) with fewer than three paired
   briefs or when every paired difference is the same (``s_d = 0``): the interval would then be
   a point or rest on one degree of freedom.

Why "the whole 95 % interval inside the margin" is an equivalence test (TOST). Two one-sided
t tests, H0₁: δ ≤ −m against δ > −m, and H0₂: δ ≥ +m against δ < +m, each at level
α = (1 − 0.95) / 2 = 0.025; equivalence is concluded when both nulls are rejected. H0₁ is rejected
exactly when ``(d̄ + m) / se ≥ t_{0.975, n−1}``, i.e. when the lower end of the two-sided 95 % t
interval is ≥ −m; H0₂ likewise when its upper end is ≤ +m. So the interval rule is TOST at 2.5 %
per side (more conservative than the textbook TOST with a 90 % interval). The report also gives the
TOST p-values ``p_lower = P(T_{n−1} ≥ (d̄ + m)/se)``, ``p_upper = P(T_{n−1} ≤ (d̄ − m)/se)`` and
``p = max(p_lower, p_upper)``; ``equivalent`` ⇔ ``p ≤ 0.025`` (same as
``statsmodels.stats.weightstats.ttost_paired``). Non-equivalence is not a proven difference: a
wide interval (few briefs, noisy raters) that crosses ±m is simply inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from stats.bootstrap import brief_bootstrap, check_bootstrap_args, percentile_ci
from stats.errors import InvalidKindData
from stats.frames import bool_column, require_columns, string_column
from stats.serialize import json_safe

KIND = "rating"
RATING_COLUMNS: tuple[str, ...] = ("brief", "system", "rater", "dimension", "rating")
DEFAULT_MARGIN = 0.5
DEFAULT_SCALE: tuple[int, int] = (1, 5)


@dataclass(frozen=True)
class PairedInterval:
    """The docs/study-kinds.md "The kind report" t interval and TOST of paired differences (decision 2, module
    docstring)."""

    n: int
    mean: float
    sd: float
    se: float
    df: int
    ci: tuple[float, float]
    tost_p_lower: float
    tost_p_upper: float

    @property
    def tost_p(self) -> float:
        return max(self.tost_p_lower, self.tost_p_upper)


def paired_t_interval(differences: np.ndarray, *, margin: float, confidence: float = 0.95) -> PairedInterval:
    """Mean of paired differences with its two-sided t interval and the TOST p-values
    (docs/study-kinds.md "The kind report").

    ``d̄ ± t_{(1+confidence)/2, n−1} · s/√n``; NaN interval when n < 2; the point ``[d̄, d̄]`` when
    ``s = 0``. TOST against ``[−margin, +margin]``: ``p_lower = P(T ≥ (d̄ + m)/se)``,
    ``p_upper = P(T ≤ (d̄ − m)/se)``.
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or not np.isfinite(d).all():
        raise InvalidKindData("differences must be a 1-D array of finite numbers")
    n = len(d)
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return PairedInterval(
            n, mean, math.nan, math.nan, max(n - 1, 0), (math.nan, math.nan), math.nan, math.nan
        )
    sd = float(d.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        sd = 0.0  # identical differences; only rounding noise is left
    se = sd / math.sqrt(n)
    df = n - 1
    if se == 0:
        ci = (mean, mean)
        p_lower = 0.0 if mean > -margin else 1.0
        p_upper = 0.0 if mean < margin else 1.0
    else:
        crit = float(stats.t.ppf(0.5 + confidence / 2, df))
        ci = (mean - crit * se, mean + crit * se)
        p_lower = float(stats.t.sf((mean + margin) / se, df))
        p_upper = float(stats.t.cdf((mean - margin) / se, df))
    return PairedInterval(n, mean, sd, se, df, ci, p_lower, p_upper)


def interval_inside_margin(ci: tuple[float, float], margin: float) -> bool | None:
    """docs/study-kinds.md "The kind report" equivalence: the whole interval inside the closed margin ``[−m,
    +m]``; None if undefined."""
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return bool(-margin <= lo and hi <= margin)


#: Fewest paired briefs for an equivalence verdict (decision 5).
MIN_EQUIVALENCE_BRIEFS = 3


def equivalence_not_estimable(t: PairedInterval) -> str | None:
    """Decision 5: a verdict needs ``n ≥ 3`` paired briefs and ``s_d > 0``; else the reason why not.

    With two briefs (df = 1) or identical differences (``s_d = 0``) the t interval is a point or
    rests on one degree of freedom: declaring equivalence from it would claim a precision the data
    do not have (the audit's case: two identical differences).
    """
    if t.n < MIN_EQUIVALENCE_BRIEFS:
        return (
            f"only {t.n} paired brief(s): an equivalence verdict needs at least {MIN_EQUIVALENCE_BRIEFS}"
        )
    if not t.sd > 0:
        return "every paired difference is the same (s_d = 0): the variability cannot be estimated"
    return None


@dataclass(frozen=True)
class DimensionComparison:
    """docs/study-kinds.md "The kind report" paired comparison of two systems on one rated dimension.

    ``briefs`` rows: ``brief, mean_a, mean_b, difference, n_a, n_b`` (ratings per system).
    """

    dimension: str
    n_briefs: int
    n_unpaired_briefs: int
    n_ratings_a: int
    n_ratings_b: int
    mean_a: float
    mean_b: float
    t: PairedInterval
    bootstrap_ci: tuple[float, float]
    margin: float
    briefs: tuple[dict[str, Any], ...]

    @property
    def mean_difference(self) -> float:
        return self.t.mean

    @property
    def not_estimable_reason(self) -> str | None:
        """Why no equivalence verdict is given (decision 5), or None when it is estimable."""
        return equivalence_not_estimable(self.t)

    @property
    def equivalent(self) -> bool | None:
        """The verdict (decision 4): the t interval inside ``[−margin, +margin]``; None if not estimable."""
        if self.not_estimable_reason is not None:
            return None
        return interval_inside_margin(self.t.ci, self.margin)

    @property
    def equivalent_bootstrap(self) -> bool | None:
        if self.not_estimable_reason is not None:
            return None
        return interval_inside_margin(self.bootstrap_ci, self.margin)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "dimension": self.dimension,
                "n_briefs": self.n_briefs,
                "n_unpaired_briefs": self.n_unpaired_briefs,
                "n_ratings_a": self.n_ratings_a,
                "n_ratings_b": self.n_ratings_b,
                "mean_a": self.mean_a,
                "mean_b": self.mean_b,
                "mean_difference": self.t.mean,
                "sd_difference": self.t.sd,
                "se": self.t.se,
                "df": self.t.df,
                "ci95": {"t": list(self.t.ci), "bootstrap": list(self.bootstrap_ci)},
                "equivalence": {
                    "margin": [-self.margin, self.margin],
                    "interval": "t",
                    "verdict": (
                        "not estimable"
                        if self.not_estimable_reason is not None
                        else ("equivalent" if self.equivalent else "not shown equivalent")
                    ),
                    "reason": self.not_estimable_reason,
                    "equivalent": self.equivalent,
                    "equivalent_bootstrap": self.equivalent_bootstrap,
                    "tost": {
                        "p_lower": self.t.tost_p_lower,
                        "p_upper": self.t.tost_p_upper,
                        "p": self.t.tost_p,
                    },
                },
                "briefs": [dict(b) for b in self.briefs],
            }
        )


@dataclass(frozen=True)
class RatingResult:
    """docs/study-kinds.md "The kind report" rating analysis: one paired comparison per dimension of
    ``system_a`` − ``system_b``."""

    system_a: str
    system_b: str
    margin: float
    confidence: float
    scale: tuple[int, int] | None
    dimensions: tuple[DimensionComparison, ...]
    n_repeat_ratings_excluded: int
    resamples: int
    seed: int

    def dimension(self, name: str) -> DimensionComparison:
        for d in self.dimensions:
            if d.dimension == name:
                return d
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "kind": KIND,
                "analysis": "rating",
                "system_a": self.system_a,
                "system_b": self.system_b,
                "difference": "system_a - system_b",
                "margin": self.margin,
                "confidence": self.confidence,
                "tost_alpha_per_side": round((1 - self.confidence) / 2, 12),
                "scale": list(self.scale) if self.scale else None,
                "n_repeat_ratings_excluded": self.n_repeat_ratings_excluded,
                "dimensions": [d.to_dict() for d in self.dimensions],
                "bootstrap": {"resamples": self.resamples, "seed": self.seed, "clusters": "brief"},
            }
        )


def _validate(ratings: pd.DataFrame, scale: tuple[int, int] | None) -> tuple[pd.DataFrame, int]:
    name = "ratings"
    frame = require_columns(ratings, RATING_COLUMNS, name)
    for col in ("brief", "system", "rater", "dimension"):
        frame[col] = string_column(frame, col, name)
    values = pd.to_numeric(frame["rating"], errors="coerce").astype(float)
    bad = ~np.isfinite(values.to_numpy()) | (values.to_numpy() != np.round(values.to_numpy()))
    if scale is not None:
        bad |= (values.to_numpy() < scale[0]) | (values.to_numpy() > scale[1])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        expected = f"an integer {scale[0]}–{scale[1]}" if scale else "an integer"
        raise InvalidKindData(
            f"{name}: column 'rating' row {i}: expected {expected}, got {frame['rating'].iloc[i]!r}"
        )
    frame["rating"] = values
    frame["is_repeat"] = bool_column(frame, "is_repeat", name, default=False)
    key = ["rater", "brief", "system", "dimension"] + (["item"] if "item" in frame.columns else [])
    main = frame[~frame["is_repeat"].to_numpy(dtype=bool)]
    dup = main.duplicated(key)
    if dup.any():
        row = main[dup].iloc[0]
        raise InvalidKindData(
            f"{name}: rater {row['rater']!r} rated system {row['system']!r} on brief {row['brief']!r} "
            f"dimension {row['dimension']!r} more than once"
        )
    return main.reset_index(drop=True), int(frame["is_repeat"].sum())


def rating_comparison(
    ratings: pd.DataFrame,
    *,
    system_a: str,
    system_b: str,
    resamples: int,
    seed: int,
    margin: float = DEFAULT_MARGIN,
    confidence: float = 0.95,
    scale: tuple[int, int] | None = DEFAULT_SCALE,
    dimensions: Sequence[str] | None = None,
) -> RatingResult:
    """docs/study-kinds.md "The kind report" paired comparison of ``system_a`` and ``system_b`` per rated
    dimension.

    ``ratings``: one row per rating, ``brief, system, rater, dimension, rating`` (integer on
    ``scale``), optional ``item`` and ``is_repeat`` (hidden repeats are dropped). The difference is
    ``system_a − system_b`` per brief after averaging over raters (module docstring, decision 1);
    the verdict is the t interval inside ``[−margin, +margin]`` (decision 4, TOST explanation above).
    """
    check_bootstrap_args(resamples, seed)
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise InvalidKindData("margin must be a positive number")
    if not 0 < confidence < 1:
        raise InvalidKindData("confidence must be between 0 and 1")
    if scale is not None and not (len(scale) == 2 and scale[0] < scale[1]):
        raise InvalidKindData("scale must be (low, high) with low < high")
    system_a, system_b = str(system_a), str(system_b)
    if system_a == system_b:
        raise InvalidKindData("system_a and system_b must differ")
    main, n_repeats = _validate(ratings, scale)
    for s in (system_a, system_b):
        if not (main["system"] == s).any():
            raise InvalidKindData(f"ratings: no rating of system {s!r}")
    known = sorted(set(main["dimension"]))
    if dimensions is None:
        chosen = known
    else:
        chosen = [str(d) for d in dimensions]
        unknown = [d for d in chosen if d not in known]
        if unknown:
            raise InvalidKindData(f"ratings: no rating on dimension(s) {', '.join(unknown)}")

    results = []
    two = main[main["system"].isin((system_a, system_b))]
    for dim in chosen:
        sel = two[two["dimension"] == dim]
        grouped = sel.groupby(["brief", "system"])["rating"]
        means = grouped.mean().unstack("system").reindex(columns=[system_a, system_b])
        sizes = grouped.size().unstack("system").reindex(columns=[system_a, system_b]).fillna(0).astype(int)
        paired = means.notna().all(axis=1)
        pm = means[paired].sort_index()
        diffs = (pm[system_a] - pm[system_b]).to_numpy(dtype=float)
        t_res = paired_t_interval(diffs, margin=float(margin), confidence=confidence)
        brief_ids = [str(b) for b in pm.index]
        if brief_ids:
            boot = brief_bootstrap(brief_ids, resamples=resamples, seed=seed)
            w = boot.weights(brief_ids)
            boot_means = (w @ diffs) / w.sum(axis=1)
            alpha = 1 - confidence
            if abs(alpha - 0.05) < 1e-12:
                bci = percentile_ci(boot_means)
            else:
                lo, hi = np.nanpercentile(boot_means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
                bci = (float(lo), float(hi))
        else:
            bci = (math.nan, math.nan)
        rows = tuple(
            {
                "brief": b,
                "mean_a": float(pm.loc[b, system_a]),
                "mean_b": float(pm.loc[b, system_b]),
                "difference": float(pm.loc[b, system_a] - pm.loc[b, system_b]),
                "n_a": int(sizes.loc[b, system_a]),
                "n_b": int(sizes.loc[b, system_b]),
            }
            for b in pm.index
        )
        results.append(
            DimensionComparison(
                dimension=dim,
                n_briefs=int(paired.sum()),
                n_unpaired_briefs=int((~paired).sum()),
                n_ratings_a=int(sizes.loc[paired, system_a].sum()),
                n_ratings_b=int(sizes.loc[paired, system_b].sum()),
                mean_a=float(pm[system_a].mean()) if len(pm) else math.nan,
                mean_b=float(pm[system_b].mean()) if len(pm) else math.nan,
                t=t_res,
                bootstrap_ci=bci,
                margin=float(margin),
                briefs=rows,
            )
        )
    return RatingResult(
        system_a=system_a,
        system_b=system_b,
        margin=float(margin),
        confidence=float(confidence),
        scale=(int(scale[0]), int(scale[1])) if scale is not None else None,
        dimensions=tuple(results),
        n_repeat_ratings_excluded=n_repeats,
        resamples=int(resamples),
        seed=int(seed),
    )


__all__ = [
    "DimensionComparison",
    "PairedInterval",
    "RatingResult",
    "interval_inside_margin",
    "paired_t_interval",
    "rating_comparison",
]
