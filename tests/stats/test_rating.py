"""docs/study-kinds.md "The kind report" rating analysis: paired differences, t and bootstrap intervals,
equivalence verdict.

References: ``scipy.stats.ttest_rel`` / ``scipy.stats.t.interval`` on the same per-brief means,
``statsmodels.stats.weightstats.ttost_paired`` for the TOST p-values, a naive bootstrap loop with
the same count matrix, and constructed differences whose interval ends just inside / outside the
margin.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.weightstats import ttost_paired

from stats.bootstrap import brief_bootstrap
from stats.errors import InvalidKindData
from stats.rating import interval_inside_margin, paired_t_interval, rating_comparison


def test_t_interval_equals_scipy() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(3.2, 0.7, size=40)
    b = a - rng.normal(0.1, 0.5, size=40)
    res = paired_t_interval(a - b, margin=0.5)
    ref = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert res.ci == pytest.approx((ref.low, ref.high), abs=1e-12)
    d = a - b
    ref2 = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert res.ci == pytest.approx(ref2, abs=1e-12)
    # TOST p-values equal statsmodels' two one-sided tests.
    p, (_, p1, _), (_, p2, _) = ttost_paired(a, b, -0.5, 0.5)
    assert (res.tost_p_lower, res.tost_p_upper, res.tost_p) == pytest.approx((p1, p2, p), abs=1e-12)


def _differences_with_upper_end(target_high: float, n: int = 25) -> np.ndarray:
    """Differences whose 95 % t interval ends exactly at ``target_high``."""
    base = np.random.default_rng(3).normal(0, 0.4, size=n)
    base -= base.mean()
    half = stats.t.ppf(0.975, n - 1) * base.std(ddof=1) / math.sqrt(n)
    return base + (target_high - half)


@pytest.mark.parametrize(
    ("high", "equivalent"),
    [(0.5 - 1e-6, True), (0.5 + 1e-6, False), (0.499, True), (0.501, False), (0.3, True), (0.8, False)],
)
def test_equivalence_verdict_at_the_upper_margin(high: float, equivalent: bool) -> None:
    d = _differences_with_upper_end(high)
    res = paired_t_interval(d, margin=0.5)
    assert res.ci[1] == pytest.approx(high, abs=1e-9)
    assert interval_inside_margin(res.ci, 0.5) is equivalent
    # The verdict is TOST at 2.5 % per side.
    assert bool(res.tost_p <= 0.025) is equivalent


@pytest.mark.parametrize(("low", "equivalent"), [(-0.5 + 1e-6, True), (-0.5 - 1e-6, False)])
def test_equivalence_verdict_at_the_lower_margin(low: float, equivalent: bool) -> None:
    d = -_differences_with_upper_end(-low)
    res = paired_t_interval(d, margin=0.5)
    assert res.ci[0] == pytest.approx(low, abs=1e-9)
    assert interval_inside_margin(res.ci, 0.5) is equivalent


def test_margin_is_closed_and_undefined_intervals() -> None:
    assert interval_inside_margin((-0.5, 0.5), 0.5) is True
    assert interval_inside_margin((-0.5000001, 0.2), 0.5) is False
    assert interval_inside_margin((math.nan, math.nan), 0.5) is None
    one = paired_t_interval(np.array([0.1]), margin=0.5)
    assert math.isnan(one.ci[0]) and one.n == 1
    flat = paired_t_interval(np.array([0.2, 0.2, 0.2]), margin=0.5)
    assert flat.ci == pytest.approx((0.2, 0.2), abs=1e-15) and flat.sd == 0.0 and flat.tost_p == 0.0
    assert paired_t_interval(np.array([0.7, 0.7]), margin=0.5).tost_p == 1.0


def _ratings(rows: list[tuple[str, str, str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["brief", "system", "rater", "dimension", "rating"])


def _simulate(seed: int, n_briefs: int = 80, shift: float = 0.2, raters: tuple[int, int] = (2, 4)):
    """Each brief's two outputs rated by different raters (2–4 each); system x better by ``shift``."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(n_briefs):
        quality = rng.normal(3, 0.6)
        for system, offset in (("x", shift), ("y", 0.0)):
            for r in range(int(rng.integers(raters[0], raters[1] + 1))):
                for dim in ("aesthetics", "content"):
                    value = int(np.clip(np.rint(quality + offset + rng.normal(0, 0.8)), 1, 5))
                    rows.append((f"b{b}", system, f"{system}{b}r{r}", dim, value))
    return _ratings(rows)


def _per_brief_means(ratings: pd.DataFrame, dim: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Independent loop: mean over raters per brief and system, paired briefs only."""
    sums: dict[tuple[str, str], list[int]] = {}
    for row in ratings.itertuples(index=False):
        if row.dimension == dim:
            sums.setdefault((row.brief, row.system), []).append(row.rating)
    briefs = sorted({b for b, s in sums if (b, "x") in sums and (b, "y") in sums})
    a = np.array([np.mean(sums[(b, "x")]) for b in briefs])
    b_ = np.array([np.mean(sums[(b, "y")]) for b in briefs])
    return briefs, a, b_


def test_rating_comparison_matches_ttest_rel_on_brief_means() -> None:
    ratings = _simulate(seed=4)
    res = rating_comparison(ratings, system_a="x", system_b="y", resamples=300, seed=9)
    for dim in ("aesthetics", "content"):
        briefs, a, b = _per_brief_means(ratings, dim)
        entry = res.dimension(dim)
        assert entry.n_briefs == len(briefs)
        assert entry.mean_difference == pytest.approx((a - b).mean(), abs=1e-12)
        assert entry.mean_a == pytest.approx(a.mean()) and entry.mean_b == pytest.approx(b.mean())
        ref = stats.ttest_rel(a, b).confidence_interval(0.95)
        assert entry.t.ci == pytest.approx((ref.low, ref.high), abs=1e-12)
        # Known answer: x is better by 0.2 before rounding to the scale.
        assert entry.t.ci[0] < 0.2 < entry.t.ci[1]
        assert entry.bootstrap_ci[0] < entry.mean_difference < entry.bootstrap_ci[1]
        expected_verdict = entry.t.ci[0] >= -0.5 and entry.t.ci[1] <= 0.5
        assert entry.equivalent is expected_verdict
        p, _, _ = ttost_paired(a, b, -0.5, 0.5)
        assert bool(p <= 0.025) is expected_verdict
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["dimensions"][0]["equivalence"]["interval"] == "t"


def test_large_difference_is_not_equivalent_and_null_difference_is() -> None:
    far = rating_comparison(_simulate(seed=1, shift=1.0), system_a="x", system_b="y", resamples=200, seed=0)
    assert far.dimension("aesthetics").equivalent is False
    near = rating_comparison(
        _simulate(seed=2, shift=0.0, n_briefs=200), system_a="x", system_b="y", resamples=200, seed=0
    )
    assert near.dimension("content").equivalent is True
    assert near.dimension("content").equivalent_bootstrap is True


def test_cluster_bootstrap_equals_naive_loop() -> None:
    ratings = _simulate(seed=6, n_briefs=20)
    resamples, seed = 200, 17
    res = rating_comparison(ratings, system_a="x", system_b="y", resamples=resamples, seed=seed)
    briefs, a, b = _per_brief_means(ratings, "content")
    boot = brief_bootstrap(briefs, resamples=resamples, seed=seed)
    assert list(boot.briefs) == briefs
    diffs = dict(zip(briefs, a - b, strict=True))
    values = []
    for r in range(resamples):
        drawn = [d for j, brief in enumerate(boot.briefs) for d in [diffs[brief]] * int(boot.counts[r, j])]
        values.append(np.mean(drawn))
    assert res.dimension("content").bootstrap_ci == pytest.approx(
        tuple(np.percentile(values, [2.5, 97.5])), abs=1e-12
    )


def test_averaging_over_raters_first_and_unpaired_briefs() -> None:
    ratings = _ratings(
        [
            ("b1", "x", "r1", "d", 5),
            ("b1", "x", "r2", "d", 3),  # x mean 4 on b1
            ("b1", "x", "r3", "d", 4),
            ("b1", "y", "r4", "d", 2),  # y mean 2 on b1
            ("b2", "x", "r5", "d", 3),
            ("b2", "y", "r6", "d", 3),
            ("b2", "y", "r7", "d", 4),  # y mean 3.5 on b2
            ("b3", "x", "r8", "d", 5),  # b3 only x: unpaired
            ("b1", "z", "r9", "d", 1),  # other systems ignored
        ]
    )
    ratings["is_repeat"] = False
    extra = pd.DataFrame(
        [{"brief": "b1", "system": "y", "rater": "r4", "dimension": "d", "rating": 5, "is_repeat": True}]
    )
    res = rating_comparison(pd.concat([ratings, extra]), system_a="x", system_b="y", resamples=50, seed=0)
    entry = res.dimension("d")
    assert entry.n_briefs == 2 and entry.n_unpaired_briefs == 1
    assert [r["difference"] for r in entry.briefs] == [2.0, -0.5]
    assert entry.mean_difference == pytest.approx(0.75)
    assert (entry.n_ratings_a, entry.n_ratings_b) == (4, 3)
    assert res.n_repeat_ratings_excluded == 1


@pytest.mark.parametrize(
    ("rows", "kwargs", "message"),
    [
        ([("b1", "x", "r1", "d", 6)], {}, "integer 1–5"),
        ([("b1", "x", "r1", "d", 2.5)], {}, "integer"),
        ([("b1", "x", "r1", "d", 2), ("b1", "x", "r1", "d", 3)], {}, "more than once"),
        ([("b1", "x", "r1", "d", 2)], {"system_b": "x"}, "must differ"),
        ([("b1", "x", "r1", "d", 2)], {"system_b": "w"}, "no rating of system 'w'"),
        ([("b1", "x", "r1", "d", 2)], {"margin": 0}, "margin"),
        ([("b1", "x", "r1", "d", 2)], {"dimensions": ["nope"]}, "nope"),
    ],
)
def test_bad_input_raises(rows, kwargs, message: str) -> None:
    base = _ratings([*rows, ("b1", "y", "r9", "d", 3)])
    args = {"system_a": "x", "system_b": "y", "resamples": 5, "seed": 0, **kwargs}
    with pytest.raises(InvalidKindData, match=message):
        rating_comparison(base, **args)
