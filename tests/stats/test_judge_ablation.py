"""The nested judge-subset ablation (paper B.4; issue 16 part 1) against known answers and an
independent computation: blends fitted by ``scipy.optimize.minimize(method="trust-constr")`` on
the loss written per comparison, nested folds looped by hand, the bootstrap looped per resample.
"""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, minimize

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units
from stats.errors import AblationError
from stats.judge_ablation import (
    ESTIMATOR_NOTE,
    fit_blend,
    judge_ablation,
    one_standard_error_choice,
    pareto_front,
)

LAMBDAS = (0.0, 1e-3, 1e-1)


def study(seed: int = 0, n: int = 240, n_blocks: int = 4, noise: tuple[float, ...] = (0.05, 0.4, 0.9)) -> dict:
    rng = np.random.default_rng(seed)
    latent = rng.normal(0, 1, n)
    h = np.clip(0.5 + 0.25 * latent + rng.normal(0, 0.05, n), 0, 1)
    overall = np.stack([np.clip(0.5 + 0.25 * latent + rng.normal(0, s, n), 0, 1) for s in noise], axis=1)
    axis = np.stack([np.clip(0.5 + 0.25 * latent + rng.normal(0, 2 * s, n), 0, 1) for s in noise], axis=1)
    return {
        "overall": overall,
        "axis": axis,
        "h": h,
        "valid_votes": rng.integers(1, 6, n).astype(float),
        "blocks": [f"b{i % n_blocks}" for i in range(n)],
        "pages": [f"p{i // 3}" for i in range(n)],
        "judges": [f"j{k}" for k in range(len(noise))],
    }


def naive_fit(f: np.ndarray, h: np.ndarray, v: np.ndarray, lam: float) -> np.ndarray:
    """Minimize Σ v (f·w − h)² / Σ v + λ‖w − 1/K‖² on the simplex, trust-constr (another solver)."""
    k = f.shape[1]
    u = np.full(k, 1 / k)

    def loss(w: np.ndarray) -> float:
        return float((v * (f @ w - h) ** 2).sum() / v.sum() + lam * ((w - u) ** 2).sum())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # trust-constr's quasi-Newton note on a quadratic
        res = minimize(
            loss, u, method="trust-constr", bounds=Bounds(0, 1), constraints=[LinearConstraint(np.ones((1, k)), 1, 1)],
            options={"gtol": 1e-12, "xtol": 1e-12, "maxiter": 5000},
        )
    return np.clip(res.x, 0, None) / np.clip(res.x, 0, None).sum()


def objective(f: np.ndarray, h: np.ndarray, v: np.ndarray, lam: float, w: np.ndarray) -> float:
    u = np.full(f.shape[1], 1 / f.shape[1])
    return float((v * (f @ w - h) ** 2).sum() / v.sum() + lam * ((w - u) ** 2).sum())


# ------------------------------------------------------------------ the blend


@pytest.mark.parametrize("lam", [0.0, 1e-3, 0.1, 10.0])
def test_blend_is_on_the_simplex_and_optimal(lam: float) -> None:
    d = study(1)
    f = np.concatenate([d["overall"], d["axis"]], axis=1)
    h, v = d["h"], d["valid_votes"]
    gram = (f * v[:, None]).T @ f / v.sum()
    cross = (f * v[:, None]).T @ h / v.sum()
    w = fit_blend(gram, cross, lam)
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0, abs=1e-12)
    ref = naive_fit(f, h, v, lam)
    assert objective(f, h, v, lam, w) <= objective(f, h, v, lam, ref) + 1e-9
    np.testing.assert_allclose(w, ref, atol=2e-3)


def test_large_shrinkage_gives_equal_weights_and_a_perfect_judge_takes_all() -> None:
    d = study(2)
    f = d["overall"]
    h, v = d["h"], d["valid_votes"]
    gram = (f * v[:, None]).T @ f / v.sum()
    cross = (f * v[:, None]).T @ h / v.sum()
    np.testing.assert_allclose(fit_blend(gram, cross, 1e6), np.full(3, 1 / 3), atol=1e-5)
    f_perfect = np.stack([h, d["overall"][:, 1], d["overall"][:, 2]], axis=1)
    gram = (f_perfect * v[:, None]).T @ f_perfect / v.sum()
    cross = (f_perfect * v[:, None]).T @ h / v.sum()
    np.testing.assert_allclose(fit_blend(gram, cross, 0.0), [1, 0, 0], atol=1e-6)


# ------------------------------------------------------------------ helpers with known answers


def test_pareto_front_equals_brute_force() -> None:
    rng = np.random.default_rng(3)
    cost = rng.integers(1, 6, 30).astype(float)
    loss = rng.random(30)
    got = pareto_front(cost, loss)
    for i in range(30):
        dominated = any(
            cost[j] <= cost[i] and loss[j] <= loss[i] and (cost[j] < cost[i] or loss[j] < loss[i]) for j in range(30)
        )
        assert got[i] == (not dominated)


def test_one_standard_error_rule_picks_the_smallest_adequate_subset() -> None:
    losses = {(0,): 0.30, (1,): 0.21, (0, 1): 0.20, (0, 1, 2): 0.19}
    ses = {(0,): 0.01, (1,): 0.01, (0, 1): 0.01, (0, 1, 2): 0.015}
    chosen, best, threshold = one_standard_error_choice(losses, ses)
    assert best == (0, 1, 2) and threshold == pytest.approx(0.205)
    assert chosen == (0, 1)  # (1,) at 0.21 is above 0.205
    ses[(0, 1, 2)] = 0.03
    assert one_standard_error_choice(losses, ses)[0] == (1,)


# ------------------------------------------------------------------ the nested ablation


def naive_inner(d: dict, subset: tuple[int, ...], train: list[str], lambdas: tuple[float, ...]) -> tuple[float, float]:
    """(λ*, pooled inner loss) of a subset over leave-one-block-out inner folds, by hand."""
    f_all = np.concatenate([d["overall"][:, subset], d["axis"][:, subset]], axis=1)
    blocks = np.array(d["blocks"])
    h, v = d["h"], d["valid_votes"]
    best = None
    for lam in lambdas:
        num = den = 0.0
        for held in train:
            fit_rows = np.isin(blocks, [b for b in train if b != held])
            w = naive_fit(f_all[fit_rows], h[fit_rows], v[fit_rows], lam)
            rows = blocks == held
            num += float((v[rows] * (f_all[rows] @ w - h[rows]) ** 2).sum())
            den += float(v[rows].sum())
        if best is None or num / den < best[1]:
            best = (lam, num / den)
    assert best is not None
    return best


def test_nested_choices_are_consistent_with_the_reported_losses_and_an_independent_loop() -> None:
    d = study(4)
    result = judge_ablation(**d, lambdas=LAMBDAS, resamples=50, seed=1)
    report = result.to_dict()
    assert report["note"] == ESTIMATOR_NOTE and 'OLS proxy (docs/protocol.md "Judges and calibration")' in report["note"]
    assert report["outer_folds"] == ["b0", "b1", "b2", "b3"]
    assert len(report["subsets"]) == 7 and [s["size"] for s in report["sizes"]] == [1, 2, 3]
    for entry in report["one_se"]["selected"]:
        cands = {tuple(c["judges"]): c for c in entry["candidates"]}
        best = min(cands.values(), key=lambda c: c["inner_loss"])
        assert entry["best_judges"] == best["judges"]
        assert entry["threshold"] == pytest.approx(best["inner_loss"] + best["inner_se"], abs=1e-15)
        adequate = [c for c in cands.values() if c["inner_loss"] <= entry["threshold"] + 1e-15]
        smallest = min(len(c["judges"]) for c in adequate)
        assert entry["size"] == smallest
        assert entry["inner_loss"] == min(c["inner_loss"] for c in adequate if len(c["judges"]) == smallest)
    # Per size: the subset with the lowest inner loss of that size, with its weights on the simplex.
    for size in report["sizes"]:
        for fold, entry in zip(size["selected"], report["one_se"]["selected"], strict=True):
            of_size = [c for c in entry["candidates"] if len(c["judges"]) == size["size"]]
            assert fold["judges"] == min(of_size, key=lambda c: c["inner_loss"])["judges"]
            w = np.array(fold["weights"])
            assert (w >= 0).all() and w.sum() == pytest.approx(1.0, abs=1e-12)
    # The noiseless judge j0 alone is the smallest adequate subset: chosen in every outer fold.
    assert {tuple(e["judges"]) for e in report["one_se"]["selected"]} == {("j0",)}
    # Independent loop for one outer fold and two subsets: λ* and inner loss, by hand.
    entry = report["one_se"]["selected"][0]
    cands = {tuple(c["judges"]): c for c in entry["candidates"]}
    for subset in ((0,), (0, 2)):
        lam, loss = naive_inner(d, subset, ["b1", "b2", "b3"], LAMBDAS)
        names = tuple(f"j{k}" for k in subset)
        assert cands[names]["inner_loss"] == pytest.approx(loss, rel=1e-4)
        reported = next(s for s in report["subsets"] if tuple(s["judges"]) == names)
        assert reported["lambdas"][0] == lam  # outer fold b0: the shrinkage the inner folds chose


def test_out_of_fold_brier_and_intervals_equal_a_naive_recomputation() -> None:
    d = study(5)
    result = judge_ablation(**d, lambdas=LAMBDAS, resamples=30, seed=2)
    report = result.to_dict()
    blocks = np.array(d["blocks"])
    h, v = d["h"], d["valid_votes"]
    size1 = report["sizes"][0]
    pred = np.full(len(h), np.nan)
    for fold in size1["selected"]:
        k = int(fold["judges"][0][1:])
        f = np.stack([d["overall"][:, k], d["axis"][:, k]], axis=1)
        train = blocks != fold["block"]
        w = naive_fit(f[train], h[train], v[train], fold["lambda"])
        pred[blocks == fold["block"]] = f[blocks == fold["block"]] @ w
    err = v * (pred - h) ** 2
    assert size1["brier"]["value"] == pytest.approx(err.sum() / v.sum(), rel=1e-5)
    units = bootstrap_units(d["pages"], d["blocks"])
    counts = bootstrap_page_blocks(units, resamples=30, seed=2)
    draws = []
    for r in range(30):
        w_r = counts[r, units.unit_of]
        draws.append((w_r * err).sum() / (w_r * v).sum())
    lo, hi = np.percentile(draws, [2.5, 97.5])
    assert size1["brier"]["ci95"] == pytest.approx([lo, hi], rel=1e-4)
    # Paired differences on the same resamples: value is the difference of the two Brier values.
    two_minus_three = next(x for x in report["paired_differences"] if x["label"] == "2 minus 3")
    by_size = {s["size"]: s["brier"]["value"] for s in report["sizes"]}
    assert two_minus_three["value"] == pytest.approx(by_size[2] - by_size[3], abs=1e-15)
    assert two_minus_three["ci95"][0] <= two_minus_three["value"] <= two_minus_three["ci95"][1]


def test_reproducible_with_a_seed_and_costs_mark_the_pareto_front() -> None:
    d = study(6)
    one = judge_ablation(**d, lambdas=LAMBDAS, resamples=40, seed=7, costs=[3.0, 2.0, 1.0], cost_unit="tokens").to_dict()
    two = judge_ablation(**d, lambdas=LAMBDAS, resamples=40, seed=7, costs=[3.0, 2.0, 1.0], cost_unit="tokens").to_dict()
    other = judge_ablation(**d, lambdas=LAMBDAS, resamples=40, seed=8, costs=[3.0, 2.0, 1.0], cost_unit="tokens").to_dict()
    assert json.dumps(one, sort_keys=True) == json.dumps(two, sort_keys=True)
    assert one["sizes"][0]["brier"]["value"] == other["sizes"][0]["brier"]["value"]
    assert one["sizes"][0]["brier"]["ci95"] != other["sizes"][0]["brier"]["ci95"]
    json.dumps(one, allow_nan=False)
    subsets = one["subsets"]
    for s in subsets:
        assert s["cost_per_comparison"] == pytest.approx(sum({"j0": 3, "j1": 2, "j2": 1}[j] for j in s["judges"]))
    costs = np.array([s["cost_per_comparison"] for s in subsets])
    briers = np.array([s["brier"]["value"] for s in subsets])
    for i, s in enumerate(subsets):
        others = [j for j in range(len(subsets)) if j != i]
        dominated = any(costs[j] <= costs[i] and briers[j] <= briers[i] and (costs[j] < costs[i] or briers[j] < briers[i]) for j in others)
        assert s["pareto"] == (not dominated)
    assert any(s["pareto"] for s in subsets) and subsets[[tuple(x["judges"]) for x in subsets].index(("j2",))]["pareto"]


def test_missing_outputs_leave_a_common_sample_and_coverage() -> None:
    d = study(7)
    d["overall"][:10, 2] = np.nan
    report = judge_ablation(**d, lambdas=LAMBDAS, resamples=20, seed=1).to_dict()
    assert report["n_comparisons"] == 230 and report["n_excluded"] == 10 and report["n_total"] == 240
    assert report["coverage"] == pytest.approx(230 / 240)
    cov = {tuple(s["judges"]): s["coverage"] for s in report["subsets"]}
    assert cov[("j0", "j1")] == 1.0 and cov[("j2",)] == pytest.approx(230 / 240)
    assert any("10 comparison(s)" in w for w in report["warnings"])


def test_overall_only_when_no_axis_scores_and_too_few_blocks_refused() -> None:
    d = study(8)
    d["axis"] = np.full_like(d["overall"], np.nan)
    report = judge_ablation(**d, lambdas=LAMBDAS, resamples=10, seed=1).to_dict()
    assert report["axis_evidence"] is False
    assert all(len(f["weights"]) == s["size"] for s in report["sizes"] for f in s["selected"])
    d = study(9, n_blocks=1)
    with pytest.raises(AblationError, match="at least two annotation blocks"):
        judge_ablation(**d, resamples=10, seed=1)


def test_a_judge_without_valid_evidence_is_named_not_the_blocks() -> None:
    """Issue 29: a judge whose outputs are all invalid (NaN evidence) used to make the error blame
    "blocks"; it names the judge."""
    d = study(12)
    d["overall"][:, 1] = np.nan
    d["axis"][:, 1] = np.nan
    with pytest.raises(AblationError) as err:
        judge_ablation(**d, resamples=10, seed=1)
    message = str(err.value)
    assert "j1" in message and "j0" not in message and "j2" not in message
    assert "no valid output" in message and "blocks" not in message and "\n" not in message
    # Valid outputs that never meet on one comparison: named too, not blamed on the blocks.
    d = study(13)
    d["overall"][: len(d["h"]) // 2, 0] = np.nan
    d["overall"][len(d["h"]) // 2 :, 1] = np.nan
    with pytest.raises(AblationError, match="no comparison with a human reference has a valid output from every judge"):
        judge_ablation(**d, resamples=10, seed=1)


def test_two_blocks_use_page_groups_as_inner_folds() -> None:
    """With two blocks an outer fold trains on one block; its inner folds are its page groups."""
    d = study(11, n_blocks=2)
    report = judge_ablation(**d, lambdas=LAMBDAS, resamples=20, seed=1).to_dict()
    assert report["outer_folds"] == ["b0", "b1"]
    assert any("page groups" in w for w in report["warnings"])
    # Independent inner loss of one subset in outer fold b0: train on b1's five page groups.
    pages = np.array(d["pages"])
    blocks = np.array(d["blocks"])
    ordered = sorted(set(pages[blocks == "b1"]))
    group = {pg: k % 5 for k, pg in enumerate(ordered)}
    f = np.stack([d["overall"][:, 1], d["axis"][:, 1]], axis=1)
    h, v = d["h"], d["valid_votes"]
    best = None
    for lam in LAMBDAS:
        num = den = 0.0
        for g in range(5):
            held = (blocks == "b1") & np.array([group.get(p, -1) == g for p in pages])
            fit = (blocks == "b1") & ~held
            w = naive_fit(f[fit], h[fit], v[fit], lam)
            num += float((v[held] * (f[held] @ w - h[held]) ** 2).sum())
            den += float(v[held].sum())
        if best is None or num / den < best:
            best = num / den
    cands = {tuple(c["judges"]): c for c in report["one_se"]["selected"][0]["candidates"]}
    assert cands[("j1",)]["inner_loss"] == pytest.approx(best, rel=1e-4)


def test_all_subsets_are_enumerated() -> None:
    d = study(10, noise=(0.1, 0.3, 0.5, 0.7))
    report = judge_ablation(**d, lambdas=(0.0, 0.01), resamples=10, seed=1).to_dict()
    want = {tuple(f"j{k}" for k in s) for r in range(1, 5) for s in itertools.combinations(range(4), r)}
    assert {tuple(s["judges"]) for s in report["subsets"]} == want and len(want) == 15
