"""docs/protocol.md "Judges and calibration" judge-weight calibration, checked against statsmodels, plain
loops and scipy."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.tools.sm_exceptions import SingularMatrixWarning

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.bradley_terry import fit_bradley_terry
from stats.committee import committee_audit, judge_resolution
from stats.judge_weights import (
    bootstrap_mean_errors,
    calibrate,
    fit_judge_weights,
    judge_features,
    rowwise_spearman,
)

LABELS = np.array(["B", "TIE", "A"])
VALUE = {"A": 1.0, "TIE": 0.5, "B": 0.0}
FAMILIES = {"j1": "anthropic", "j2": "google", "j3": "openai", "j4": "openai"}


def simulate(
    seed: int = 0,
    *,
    blocks: int = 4,
    per_block: int = 30,
    judges: dict[str, float] | None = None,
    n_systems: int = 6,
    invalid_rate: float = 0.05,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Small synthetic study: human reference (5 votes) + judges × 2 orders × 2 repeats."""
    judges = judges or {"j1": 0.6, "j2": 0.4, "j3": 0.8, "j4": 1.0}
    rng = np.random.default_rng(seed)
    skill = rng.normal(0, 1, n_systems)
    human, outputs = [], []
    for blk in range(blocks):
        page = 0
        for _ in range(per_block):
            if rng.random() < 0.6:
                page += 1
            a, b = rng.choice(n_systems, 2, replace=False)
            latent = skill[a] - skill[b] + rng.normal(0, 0.6)
            q = 1 / (1 + np.exp(-latent))
            n = int(rng.integers(1, 6))
            lab = np.where(rng.random(n) < 0.15, 1, np.where(rng.random(n) < q, 2, 0))
            comp = f"c{len(human):04d}"
            n_a, n_t, n_b = int((lab == 2).sum()), int((lab == 1).sum()), int((lab == 0).sum())
            human.append(
                {
                    "comparison": comp,
                    "page": f"p{blk}-{page}",
                    "block": f"B{blk}",
                    "h": (n_a + 0.5 * n_t) / n,
                    "n_valid": n,
                    "n_A": n_a,
                    "n_T": n_t,
                    "n_B": n_b,
                    "system_a": f"s{a}",
                    "system_b": f"s{b}",
                }
            )
            for judge, noise in judges.items():
                for order in ("primary", "swapped"):
                    for rep in (0, 1):
                        if rng.random() < invalid_rate:
                            outputs.append(
                                {
                                    "comparison": comp,
                                    "judge": judge,
                                    "order": order,
                                    "repeat": rep,
                                    "status": "invalid",
                                    "winner": None,
                                }
                            )
                            continue
                        z = latent + rng.normal(0, noise)
                        code = 2 if z > 0.3 else (0 if z < -0.3 else 1)
                        outputs.append(
                            {
                                "comparison": comp,
                                "judge": judge,
                                "order": order,
                                "repeat": rep,
                                "status": "valid",
                                "winner": str(LABELS[code]),
                            }
                        )
    return pd.DataFrame(outputs), pd.DataFrame(human)


def loop_features(outputs: pd.DataFrame, comparisons: list[str], judges: list[str]) -> np.ndarray:
    x = np.full((len(comparisons), len(judges)), np.nan)
    for i, c in enumerate(comparisons):
        for k, j in enumerate(judges):
            votes = [
                VALUE[r.winner]
                for r in outputs.itertuples()
                if r.comparison == c and r.judge == j and r.status == "valid"
            ]
            if votes:
                x[i, k] = sum(votes) / len(votes)
    return x


@pytest.fixture(scope="module")
def study() -> tuple[pd.DataFrame, pd.DataFrame]:
    outputs, human = simulate()
    # Comparison c0003: judge j2 has no valid output at all -> excluded.
    outputs.loc[(outputs["comparison"] == "c0003") & (outputs["judge"] == "j2"), ["status", "winner"]] = [
        "failed",
        None,
    ]
    return outputs, human


@pytest.fixture(scope="module")
def result(study):
    outputs, human = study
    return calibrate(outputs, human, resamples=300, seed=11, pilot_size=40, families=FAMILIES)


def test_features_equal_plain_loop(study):
    outputs, human = study
    comps = sorted(human["comparison"])
    judges = ["j1", "j2", "j3", "j4"]
    feats = judge_features(outputs, comparisons=comps, judges=judges)
    np.testing.assert_allclose(feats.x, loop_features(outputs, comps, judges), rtol=0, atol=1e-15)


def test_exclusion_counted(study, result):
    _, human = study
    assert result.n_excluded == 1
    assert result.excluded_by_judge == {"j1": 0, "j2": 1, "j3": 0, "j4": 0}
    assert result.n_comparisons == len(human) - 1
    assert "c0003" not in set(result.predictions["comparison"])


def test_coefficients_equal_statsmodels(study, result):
    outputs, human = study
    comps = sorted(human["comparison"])
    x = loop_features(outputs, comps, ["j1", "j2", "j3", "j4"])
    h = human.set_index("comparison").loc[comps, "h"].to_numpy()
    keep = np.isfinite(x).all(axis=1)
    res = sm.OLS(h[keep], x[keep]).fit()
    got = np.array([result.coefficients[j] for j in ["j1", "j2", "j3", "j4"]])
    np.testing.assert_allclose(got, res.params, rtol=0, atol=1e-9)
    np.testing.assert_allclose(result.fit.standard_errors, res.bse, rtol=0, atol=1e-9)
    # Prediction is the clipped weighted sum (docs/protocol.md "Judges and calibration").
    np.testing.assert_allclose(result.predictions["p_full"], np.clip(x[keep] @ res.params, 0, 1), atol=1e-12)


def plain_lobo(result) -> tuple[np.ndarray, np.ndarray]:
    """Independent leave-one-block-out with numpy least squares and a loop."""
    pred = result.predictions
    x = pred[[f"x:{j}" for j in result.judges]].to_numpy()
    h = pred["h"].to_numpy()
    p = np.empty(len(h))
    for b in sorted(set(pred["block"])):
        held = (pred["block"] == b).to_numpy()
        beta = np.linalg.lstsq(x[~held], h[~held], rcond=None)[0]
        for i in np.flatnonzero(held):
            p[i] = min(1.0, max(0.0, float(x[i] @ beta)))
    return p, h


def test_out_of_fold_errors_equal_plain_loop(result):
    p, h = plain_lobo(result)
    np.testing.assert_allclose(result.predictions["p_oof"], p, atol=1e-9)
    d = result.to_dict()
    assert d["cv"]["brier"]["value"] == pytest.approx(
        sum((a - b) ** 2 for a, b in zip(p, h, strict=True)) / len(h), abs=1e-12
    )
    assert d["cv"]["mae"]["value"] == pytest.approx(
        sum(abs(a - b) for a, b in zip(p, h, strict=True)) / len(h), abs=1e-12
    )
    blocks = result.predictions["block"].to_numpy()
    for entry in d["per_block"]:
        sel = blocks == entry["block"]
        assert entry["n"] == sel.sum()
        assert entry["brier"] == pytest.approx(np.mean((p[sel] - h[sel]) ** 2), abs=1e-12)
        assert entry["mae"] == pytest.approx(np.mean(np.abs(p[sel] - h[sel])), abs=1e-12)
    assert sum(e["n"] for e in d["per_block"]) == d["n_comparisons"]


def test_bootstrap_intervals_equal_loop_with_same_counts(result):
    pred = result.predictions
    p, h = pred["p_oof"].to_numpy(), pred["h"].to_numpy()
    units = bootstrap_units(pred["page"].tolist(), pred["block"].tolist())
    counts = bootstrap_page_blocks(units, resamples=300, seed=11)
    brier = np.empty(300)
    mae = np.empty(300)
    for r in range(300):
        w = counts[r, units.unit_of]
        brier[r] = np.sum(w * (p - h) ** 2) / np.sum(w)
        mae[r] = np.sum(w * np.abs(p - h)) / np.sum(w)
    d = result.to_dict()["cv"]
    np.testing.assert_allclose(d["brier"]["ci95"], percentile_interval(brier), atol=1e-12)
    np.testing.assert_allclose(d["mae"]["ci95"], percentile_interval(mae), atol=1e-12)
    vec = bootstrap_mean_errors((p - h) ** 2, units.unit_of, counts)
    np.testing.assert_allclose(vec, brier, atol=1e-13)
    # The vectorized form W[:, unit_of] @ e / row sums, too.
    w_all = counts[:, units.unit_of]
    np.testing.assert_allclose(vec, (w_all @ ((p - h) ** 2)) / w_all.sum(axis=1), atol=1e-13)


def test_spearman_equals_scipy_on_bradley_terry(study, result):
    _, human = study
    pred = result.predictions.merge(human[["comparison", "system_a", "system_b"]], on="comparison")
    systems = sorted(set(pred["system_a"]) | set(pred["system_b"]))
    idx = {s: i for i, s in enumerate(systems)}
    a = pred["system_a"].map(idx).to_numpy()
    b = pred["system_b"].map(idx).to_numpy()
    proxy = fit_bradley_terry(a, b, pred["p_oof"].to_numpy(), len(systems))
    hum = fit_bradley_terry(a, b, pred["h"].to_numpy(), len(systems))
    rho = stats.spearmanr(proxy.theta, hum.theta).statistic
    d = result.to_dict()["cv"]["spearman_ranking"]
    assert d["value"] == pytest.approx(rho, abs=1e-12)
    assert d["n_systems"] == len(systems)
    lo, hi = d["ci95"]
    assert -1 <= lo <= hi <= 1


def test_rowwise_spearman_equals_scipy():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(20, 7))
    b = a + rng.normal(size=(20, 7))
    b[0] = np.round(b[0])  # ties
    got = rowwise_spearman(a, b)
    want = [stats.spearmanr(a[r], b[r]).statistic for r in range(20)]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_report_has_spec_keys_and_is_json(result):
    d = result.to_dict()
    for key in (
        "n_comparisons",
        "n_excluded",
        "judges",
        "coefficients",
        "cv",
        "per_block",
        "committees",
        "bootstrap",
    ):
        assert key in d
    assert set(d["cv"]) >= {"brier", "mae", "spearman_ranking"}
    assert set(d["cv"]["brier"]) >= {"value", "ci95"} and len(d["cv"]["brier"]["ci95"]) == 2
    assert set(d["per_block"][0]) >= {"block", "brier", "mae", "n"}
    assert d["bootstrap"] == {"resamples": 300, "seed": 11}
    assert d["judges"] == ["j1", "j2", "j3", "j4"]
    assert set(d["coefficients"]) == set(d["judges"])
    for c in d["committees"]:
        assert set(c) >= {"judges", "pilot", "holdout"}
        assert set(c["pilot"]) >= {"brier", "coverage"} and set(c["holdout"]) >= {"brier", "coverage"}
        assert len({FAMILIES[j] for j in c["judges"]}) == 3
    json.dumps(d, allow_nan=False)
    assert d["rank_deficient"] is False and d["collinear_judges"] == []


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_row_permutation_changes_nothing(study, rnd):
    outputs, human = study
    base = calibrate(outputs, human, resamples=50, seed=5, pilot_size=30, families=FAMILIES).to_dict(
        include_predictions=True
    )
    o_idx = list(range(len(outputs)))
    h_idx = list(range(len(human)))
    rnd.shuffle(o_idx)
    rnd.shuffle(h_idx)
    shuffled = calibrate(
        outputs.iloc[o_idx], human.iloc[h_idx], resamples=50, seed=5, pilot_size=30, families=FAMILIES
    ).to_dict(include_predictions=True)
    assert json.dumps(shuffled, sort_keys=True) == json.dumps(base, sort_keys=True)


def test_duplicated_judge_is_reported_not_fatal(study):
    outputs, human = study
    copy = outputs[outputs["judge"] == "j1"].assign(judge="j1copy")
    result = calibrate(pd.concat([outputs, copy]), human, resamples=50, seed=1, families=None)
    d = result.to_dict()
    assert d["rank_deficient"] is True
    assert d["rank"] == 4
    assert sorted(d["collinear_judges"]) == ["j1", "j1copy"]
    assert any("j1, j1copy" in w and "rank-deficient" in w for w in d["warnings"])
    x = result.predictions[[f"x:{j}" for j in result.judges]].to_numpy()
    with pytest.warns(SingularMatrixWarning):  # statsmodels itself warns; calibrate reports it instead
        params = sm.OLS(result.predictions["h"].to_numpy(), x).fit().params
    np.testing.assert_allclose([d["coefficients"][j] for j in result.judges], params, atol=1e-9)
    # Minimum-norm solution splits the weight equally between identical columns.
    assert d["coefficients"]["j1"] == pytest.approx(d["coefficients"]["j1copy"], abs=1e-9)
    assert d["condition_number"] is None
    assert d["cv"]["brier"]["value"] is not None
    json.dumps(d, allow_nan=False)


def test_recovers_known_weights():
    outputs, human = simulate(seed=4, blocks=6, per_block=200, invalid_rate=0.0)
    comps = sorted(human["comparison"])
    feats = judge_features(outputs, comparisons=comps, judges=["j1", "j2", "j3", "j4"])
    beta = np.array([0.1, 0.4, 0.25, 0.15])
    rng = np.random.default_rng(9)
    h = np.clip(feats.x @ beta + rng.normal(0, 0.01, len(comps)), 0, 1)
    human = human.set_index("comparison").loc[comps].reset_index().assign(h=h)
    result = calibrate(outputs, human, resamples=20, seed=1)
    np.testing.assert_allclose([result.coefficients[j] for j in ["j1", "j2", "j3", "j4"]], beta, atol=0.01)
    assert result.to_dict()["cv"]["brier"]["value"] < 0.001


def test_fit_judge_weights_matches_statsmodels_random():
    rng = np.random.default_rng(1)
    x = rng.random((50, 3))
    h = rng.random(50)
    fit = fit_judge_weights(h, x)
    np.testing.assert_allclose(fit.coefficients, sm.OLS(h, x).fit().params, atol=1e-12)
    assert not fit.rank_deficient and fit.collinear == ()


def test_zero_column_is_collinear():
    rng = np.random.default_rng(2)
    x = np.column_stack([rng.random(30), np.zeros(30), rng.random(30)])
    fit = fit_judge_weights(rng.random(30), x)
    assert fit.rank_deficient and fit.collinear == (1,)


def test_single_block_reports_no_cv(study):
    outputs, human = study
    result = calibrate(outputs, human.assign(block="only"), resamples=20, seed=1)
    d = result.to_dict()
    assert d["cv"]["brier"] == {"value": None, "ci95": None}
    assert any("one block" in w for w in d["warnings"])


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o, h: (o.drop(columns="order"), h), "missing column"),
        (lambda o, h: (pd.concat([o, o.iloc[:1]]), h), "duplicate output"),
        (lambda o, h: (o.assign(order="left"), h), "order"),
        (lambda o, h: (o.assign(winner="X"), h), "winner"),
        (lambda o, h: (o, h.assign(h=1.5)), "outside"),
        (lambda o, h: (o, pd.concat([h, h.iloc[:1]])), "twice"),
        (lambda o, h: (o, h.drop(columns="block")), "missing column"),
    ],
)
def test_bad_input_raises(study, mutate, message):
    outputs, human = mutate(*study)
    with pytest.raises(ValueError, match=message):
        calibrate(outputs, human, resamples=10, seed=1)


def test_unknown_judge_and_family_raise(study):
    outputs, human = study
    with pytest.raises(ValueError, match="without any output"):
        calibrate(outputs, human, judges=["j1", "nobody"], resamples=10, seed=1)
    with pytest.raises(ValueError, match="vendor family"):
        calibrate(outputs, human, resamples=10, seed=1, families={"j1": "a", "j2": "b"})


def test_comparisons_without_human_votes_ignored(study):
    outputs, human = study
    human = human.copy()
    human.loc[0, ["n_valid", "h"]] = [0, np.nan]
    result = calibrate(outputs, human, resamples=10, seed=1)
    assert result.n_without_human_votes == 1
    assert result.n_comparisons + result.n_excluded == len(human) - 1


def test_committees_in_calibrate_equal_direct_audit():
    judges = {"j1": 0.3, "j2": 0.25, "j3": 0.35, "j4": 0.4}
    outputs, human = simulate(seed=8, blocks=4, per_block=60, judges=judges, invalid_rate=0.02)
    # A comparison excluded from the fit (j4 has no valid output) still counts in the audit.
    outputs.loc[(outputs["comparison"] == "c0010") & (outputs["judge"] == "j4"), ["status", "winner"]] = [
        "invalid",
        None,
    ]
    result = calibrate(outputs, human, resamples=200, seed=3, pilot_size=50, families=FAMILIES, split_seed=21)
    assert result.n_excluded == 1
    d = result.to_dict()
    ref = human.sort_values("comparison").reset_index(drop=True)
    comps = ref["comparison"].tolist()
    resolution = judge_resolution(outputs, comparisons=comps, judges=["j1", "j2", "j3", "j4"])
    audit = committee_audit(
        resolution,
        judges=["j1", "j2", "j3", "j4"],
        families=FAMILIES,
        h=ref["h"].to_numpy(),
        n_valid=ref["n_valid"].to_numpy(),
        pages=ref["page"].tolist(),
        blocks=ref["block"].tolist(),
        comparisons=comps,
        pilot_size=50,
        split_seed=21,
        resamples=200,
        seed=3,
    )
    assert audit.n_pilot + audit.n_holdout == len(human)
    assert d["committees"], "the low-noise judges should give eligible committees"
    assert [c["judges"] for c in d["committees"]] == [list(c.judges) for c in audit.committees]
    for got, want in zip(d["committees"], audit.committees, strict=True):
        assert got["pilot"]["brier"] == want.pilot.brier and got["holdout"]["brier"] == want.holdout.brier
        assert got["pilot"]["coverage"] == want.pilot.coverage and got["holdout"]["rank"] == want.holdout.rank
    assert d["committee_audit"]["pilot_winner"] == list(audit.pilot_winner)
    shuffled = calibrate(
        outputs.sample(frac=1.0, random_state=1),
        human.sample(frac=1.0, random_state=2),
        resamples=200,
        seed=3,
        pilot_size=50,
        families=FAMILIES,
        split_seed=21,
    ).to_dict()
    assert json.dumps(shuffled, sort_keys=True) == json.dumps(d, sort_keys=True)
