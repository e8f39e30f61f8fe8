"""Agreement for every kind (docs/protocol.md "Human reference and agreement" statistics on the other study
kinds (docs/study-kinds.md "Running the other study kinds")) against the reference packages.

References: ``statsmodels.stats.inter_rater.fleiss_kappa`` (equal rater counts), the
``krippendorff`` package on reliability data (ordinal for pairwise and ratings, nominal for
checklist answers), and a naive bootstrap loop that rebuilds each resample's answers.
"""

from __future__ import annotations

import json
import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from stats.agreement import coincidence_matrix, krippendorff_alpha_ordinal
from stats.bootstrap import brief_bootstrap
from stats.errors import InvalidKindData
from stats.rater_agreement import (
    KindScale,
    kind_agreement,
    krippendorff_alpha_nominal,
    nominal_alpha_from_coincidences,
    predicate_scale,
    rating_scale,
    winner_scale,
)


def kind_scale(kind: str, scale: tuple[int, int] | None = (1, 5)) -> KindScale:
    """The scale each kind's report passes (kind_reports/kinds/<kind>.py)."""
    return {"pairwise": winner_scale, "checklist": predicate_scale}.get(kind, lambda k: rating_scale(scale))(
        kind
    )


def _simulate(kind: str, seed: int, n_units: int = 60, raters: int = 4, missing: float = 0.1) -> pd.DataFrame:
    """Every rater answers every unit (equal n_i when ``missing = 0``), noisy around a unit truth."""
    rng = np.random.default_rng(seed)
    ks = kind_scale(kind)
    rows = []
    for u in range(n_units):
        truth = int(rng.integers(0, len(ks.values)))
        for dim in ("aes", "content") if kind == "rating" else (None,):
            for r in range(raters):
                if ks.missing and rng.random() < missing:
                    answer = ks.missing[0]
                else:
                    j = int(
                        np.clip(truth + rng.integers(-1, 2) * (rng.random() < 0.4), 0, len(ks.values) - 1)
                    )
                    answer = ks.values[j]
                row = {"unit": f"u{u}", "rater": f"r{r}", "answer": answer, "brief": f"b{u // 4}"}
                if dim:
                    row["dimension"] = dim
                rows.append(row)
    return pd.DataFrame(rows)


def _reliability(frame: pd.DataFrame, values: tuple) -> np.ndarray:
    """(raters × units) with value index, NaN for missing answers: krippendorff package input."""
    units = sorted(set(frame["unit"]))
    raters = sorted(set(frame["rater"]))
    index = {v: i for i, v in enumerate(values)}
    data = np.full((len(raters), len(units)), np.nan)
    for row in frame.itertuples(index=False):
        if row.answer in index:
            data[raters.index(row.rater), units.index(row.unit)] = index[row.answer]
    return data


def _fleiss_table(frame: pd.DataFrame, values: tuple) -> np.ndarray:
    units = sorted(set(frame["unit"]))
    table = np.zeros((len(units), len(values)), dtype=int)
    for row in frame.itertuples(index=False):
        if row.answer in values:
            table[units.index(row.unit), values.index(row.answer)] += 1
    return table


@pytest.mark.parametrize(("kind", "level"), [("pairwise", "ordinal"), ("checklist", "nominal")])
def test_alpha_and_kappa_equal_reference_packages(kind: str, level: str) -> None:
    frame = _simulate(kind, seed=1)
    res = kind_agreement(frame, scale=kind_scale(kind), resamples=50, seed=0)
    ks = kind_scale(kind)
    entry = res.entry()
    assert entry.level == level and res.level == level
    ref_alpha = krippendorff.alpha(
        reliability_data=_reliability(frame, ks.values),
        level_of_measurement=level,
        value_domain=list(range(len(ks.values))),
    )
    assert entry.alpha == pytest.approx(ref_alpha, abs=1e-12)
    # statsmodels' Fleiss κ needs equal rater counts: no missing answers.
    full = _simulate(kind, seed=2, missing=0.0)
    e_full = kind_agreement(full, scale=kind_scale(kind), resamples=20, seed=0).entry()
    assert e_full.fleiss_kappa == pytest.approx(sm_fleiss_kappa(_fleiss_table(full, ks.values)), abs=1e-12)
    assert entry.n_valid == int((frame["answer"].isin(ks.values)).sum())


def test_rating_alpha_is_ordinal_per_dimension() -> None:
    frame = _simulate("rating", seed=3)
    res = kind_agreement(frame, scale=rating_scale((1, 5)), resamples=30, seed=0)
    assert [e.dimension for e in res.entries] == ["aes", "content"]
    for e in res.entries:
        sub = frame[frame["dimension"] == e.dimension]
        data = _reliability(sub, (1, 2, 3, 4, 5))
        ref = krippendorff.alpha(
            reliability_data=data, level_of_measurement="ordinal", value_domain=[0, 1, 2, 3, 4]
        )
        assert e.alpha == pytest.approx(ref, abs=1e-12)
        assert e.fleiss_kappa == pytest.approx(
            sm_fleiss_kappa(_fleiss_table(sub, (1, 2, 3, 4, 5))), abs=1e-12
        )
        assert e.level == "ordinal"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=4), min_size=4, max_size=4),
        min_size=3,
        max_size=12,
    ),
    st.integers(min_value=2, max_value=4),
)
def test_nominal_alpha_from_coincidences_equals_package(rows: list[list[int]], n_values: int) -> None:
    counts = np.array(rows)[:, :n_values]
    if (counts.sum(axis=1) >= 2).sum() == 0 or (counts.sum(axis=0) > 0).sum() < 2:
        return
    ours = nominal_alpha_from_coincidences(coincidence_matrix(counts))
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = krippendorff.alpha(
            value_counts=counts, level_of_measurement="nominal", value_domain=list(range(n_values))
        )
    if np.isnan(ref):  # no disagreement is possible (pairable values in one category only)
        assert np.isnan(ours) and np.isnan(krippendorff_alpha_nominal(counts))
        return
    assert ours == pytest.approx(ref, abs=1e-10)
    assert krippendorff_alpha_nominal(counts) == pytest.approx(ref, abs=1e-10)


def test_two_values_ordinal_equals_nominal() -> None:
    counts = np.array([[2, 1], [0, 3], [1, 1], [3, 0]])
    assert krippendorff_alpha_ordinal(counts) == pytest.approx(krippendorff_alpha_nominal(counts), abs=1e-12)


@pytest.mark.parametrize("kind", ["pairwise", "checklist"])
def test_cluster_bootstrap_equals_naive_loop(kind: str) -> None:
    frame = _simulate(kind, seed=5, n_units=24)
    resamples, seed = 40, 8
    res = kind_agreement(frame, scale=kind_scale(kind), resamples=resamples, seed=seed)
    ks = kind_scale(kind)
    boot = brief_bootstrap(frame["brief"].tolist(), resamples=resamples, seed=seed)
    alphas, kappas = [], []
    for r in range(resamples):
        parts = []
        for j, brief in enumerate(boot.briefs):
            for copy in range(int(boot.counts[r, j])):
                part = frame[frame["brief"] == brief].copy()
                part["unit"] = part["unit"] + f"#{copy}"  # each draw is a new unit
                parts.append(part)
        resample = pd.concat(parts)
        alphas.append(
            krippendorff.alpha(
                reliability_data=_reliability(resample, ks.values),
                level_of_measurement=ks.level,
                value_domain=list(range(len(ks.values))),
            )
        )
        table = _fleiss_table(resample, ks.values)
        n = table.sum(axis=1)
        use = n >= 2
        t = table[use]
        p_i = (t * (t - 1)).sum(axis=1) / (n[use] * (n[use] - 1))
        p_k = t.sum(axis=0) / t.sum()
        kappas.append((p_i.mean() - (p_k**2).sum()) / (1 - (p_k**2).sum()))
    e = res.entry()
    assert e.alpha_ci95 == pytest.approx(tuple(np.percentile(alphas, [2.5, 97.5])), abs=1e-9)
    assert e.fleiss_kappa_ci95 == pytest.approx(tuple(np.percentile(kappas, [2.5, 97.5])), abs=1e-9)


def test_hidden_repeats_counted_and_kept_out_of_agreement() -> None:
    main = pd.DataFrame(
        [
            ("c1", "r1", "A"),
            ("c1", "r2", "A"),
            ("c2", "r1", "CANNOT_JUDGE"),
            ("c2", "r2", "B"),
        ],
        columns=["unit", "rater", "answer"],
    )
    main["is_repeat"] = False
    reps = pd.DataFrame(
        [
            ("c1", "r1", "A", True),
            ("c2", "r1", "CANNOT_JUDGE", True),
            ("c2", "r2", "TIE", True),
            ("c9", "r1", "A", True),
        ],
        columns=["unit", "rater", "answer", "is_repeat"],
    )
    res = kind_agreement(pd.concat([main, reps]), scale=winner_scale(), resamples=10, seed=0)
    e = res.entry()
    # CANNOT_JUDGE counts as a label; the repeat on c9 has no original.
    assert (e.hidden_repeat.agree, e.hidden_repeat.n) == (2, 3)
    assert e.n_answers == 4 and e.n_valid == 3
    assert e.exact_agreement == 1.0  # only c1 has two valid answers, and they agree
    ratings = pd.DataFrame(
        [
            ("i1", "r1", 4, "d", False),
            ("i1", "r1", 2, "d", True),
            ("i2", "r1", 3, "d", False),
            ("i2", "r1", 3, "d", True),
            ("i2", "r2", 5, "d", False),
        ],
        columns=["unit", "rater", "answer", "dimension", "is_repeat"],
    )
    rep = kind_agreement(ratings, scale=kind_scale("rating"), resamples=10, seed=0).entry("d").hidden_repeat
    assert (rep.agree, rep.n, rep.mean_abs_difference, rep.within_one) == (1, 2, 1.0, 0.5)
    json.dumps(rep.to_dict(), allow_nan=False)


def test_unanimous_study_gives_nan_not_error_and_json() -> None:
    frame = pd.DataFrame([("p1", "r1", "YES"), ("p1", "r2", "YES")], columns=["unit", "rater", "answer"])
    res = kind_agreement(frame, scale=kind_scale("checklist"), resamples=10, seed=0)
    e = res.entry()
    assert e.exact_agreement == 1.0 and math.isnan(e.alpha) and math.isnan(e.fleiss_kappa)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["entries"][0]["krippendorff_alpha"] == {"level": "nominal", "value": None, "ci95": [None, None]}


@pytest.mark.parametrize(
    ("kind", "rows", "message"),
    [
        ("pairwise", [("c1", "r1", "LEFT")], "expected one of"),
        ("checklist", [("p1", "r1", "MAYBE")], "expected one of"),
        ("rating", [("i1", "r1", 7)], "expected one of"),
        ("pairwise", [("c1", "r1", "A"), ("c1", "r1", "B")], "more than one main answer"),
    ],
)
def test_bad_input_raises(kind: str, rows, message: str) -> None:
    frame = pd.DataFrame(rows, columns=["unit", "rater", "answer"])
    if kind == "rating":
        frame["dimension"] = "d"
    with pytest.raises(InvalidKindData, match=message):
        kind_agreement(frame, scale=kind_scale(kind), resamples=5, seed=0)


def test_a_rating_scale_must_run_from_low_to_high() -> None:
    with pytest.raises(InvalidKindData, match="low < high"):
        rating_scale((5, 1))
