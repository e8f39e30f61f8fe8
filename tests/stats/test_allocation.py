"""Tests of adaptive allocation, the stopping rule and the sequential-study simulator, against
independent computations (direct matrix inversion, finite differences, the demo's one-vote-at-a-time
raters, Monte Carlo of a Gaussian martingale)."""

from __future__ import annotations

import itertools
import math
import random
from itertools import pairwise

import numpy as np
import pytest
from scipy.special import expit

from demo.simulation import RaterProfile, evidence_for, rater_answer
from stats.allocation import (
    ADAPTIVE_RULE_BY_TARGET,
    DESIGN_STEPS,
    RULES,
    UNIFORM_FLOOR,
    Z95,
    Target,
    adaptive_rule,
    adjacent_widths,
    allocation_weights,
    balanced_counts,
    fit_pairs,
    pair_column,
    pair_indices,
    rank_one_update,
    round_counts,
)
from stats.bradley_terry import SCORE_SCALE, fit_bradley_terry, fit_pair_points_batch
from stats.errors import StatisticsError
from stats.stopping import mixture_half_width, mixture_precision, top_k_declaration
from stats.study_simulation import (
    StudyAssumptions,
    look_grid,
    rater_mixture_probabilities,
    run_sequential,
    simulated_truth,
    votes_to_share,
    votes_to_width,
)


def _random_pair_data(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = m * (m - 1) // 2
    votes = rng.integers(3, 30, size=k).astype(float)
    points = np.round(rng.random(k) * votes * 2) / 2
    return votes, points


def _expanded(votes: np.ndarray, points: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-level comparisons with fractional outcomes carrying the same points per pair."""
    first, second = pair_indices(m)
    return first, second, points / votes, votes


def _objective_hessian(theta: np.ndarray, votes: np.ndarray, m: int, l2: float = 1e-3) -> np.ndarray:
    """Negative Hessian of the docs/protocol.md "Deployment leaderboard" objective by central finite
    differences of its gradient."""
    first, second = pair_indices(m)

    def grad(th: np.ndarray) -> np.ndarray:
        # Only the curvature matters here; the points term is linear in θ.
        s = expit(th[first] - th[second])
        g = np.zeros(m)
        np.add.at(g, first, -votes * s)
        np.add.at(g, second, votes * s)
        return g - 2 * l2 * th

    h = 1e-6
    out = np.empty((m, m))
    for c in range(m):
        e = np.zeros(m)
        e[c] = h
        out[:, c] = -(grad(theta + e) - grad(theta - e)) / (2 * h)
    return out


# --------------------------------------------------------------------------- batched fit


def test_batched_fit_equals_the_row_level_fit_and_its_hessian_the_finite_difference_one() -> None:
    m = 6
    rows = [_random_pair_data(m, seed) for seed in range(4)]
    votes = np.array([v for v, _ in rows])
    points = np.array([p for _, p in rows])
    theta, info = fit_pair_points_batch(points, votes - points)
    for r in range(4):
        a, b, p, w = _expanded(votes[r], points[r], m)
        independent = fit_bradley_terry(a, b, p, m, weights=w)
        np.testing.assert_allclose(theta[r], independent.theta, atol=1e-9)
        np.testing.assert_allclose(info[r], _objective_hessian(theta[r], votes[r], m), atol=1e-5)


def test_batched_fit_refuses_a_column_count_that_is_no_pair_count() -> None:
    with pytest.raises(StatisticsError, match="not M\\(M-1\\)/2"):
        fit_pair_points_batch(np.ones((1, 4)), np.ones((1, 4)))


def test_pair_column_is_the_row_major_position() -> None:
    first, second = pair_indices(7)
    np.testing.assert_array_equal(pair_column(first, second, 7), np.arange(21))
    np.testing.assert_array_equal(pair_column(second, first, 7), np.arange(21))


# --------------------------------------------------------------------------- rules


def _fit(m: int = 5, seeds: tuple[int, ...] = (1, 2)):
    rows = [_random_pair_data(m, s) for s in seeds]
    return fit_pairs(np.array([v for v, _ in rows]), np.array([p for _, p in rows]))


def test_shrinkage_weight_is_the_interval_shrinkage_by_direct_inversion() -> None:
    fit = _fit()
    w = allocation_weights("shrinkage", fit, Target(), rng=np.random.default_rng(0))
    first, second = pair_indices(5)
    info = np.linalg.inv(fit.covariance[0])
    raw = []
    for e, (i, j) in enumerate(zip(first, second, strict=True)):
        a = np.zeros(5)
        a[i], a[j] = 1.0, -1.0
        s = expit(fit.theta[0, i] - fit.theta[0, j])
        after = np.linalg.inv(info + s * (1 - s) * np.outer(a, a))
        raw.append(math.sqrt(a @ fit.covariance[0] @ a) - math.sqrt(a @ after @ a))
        assert e == pair_column(np.array(i), np.array(j), 5)
    raw_arr = np.array(raw)
    np.testing.assert_allclose(w[0], raw_arr / raw_arr.sum(), rtol=1e-7)


def test_information_weight_is_the_gaussian_information_gain_on_the_target_by_direct_inversion() -> None:
    fit = _fit(m=6)
    target = Target(kind="top_k", k=2)
    w = allocation_weights("information", fit, target, rng=np.random.default_rng(0))
    cov = fit.covariance[0]
    theta = fit.theta[0]
    order = np.argsort(-theta, kind="stable")
    top, rest = order[:2], order[2:]
    info = np.linalg.inv(cov)
    first, second = pair_indices(6)
    gains = []
    for i, j in zip(first, second, strict=True):
        a = np.zeros(6)
        a[i], a[j] = 1.0, -1.0
        s = expit(theta[i] - theta[j])
        after = np.linalg.inv(info + s * (1 - s) * np.outer(a, a))
        total = 0.0
        for t in top:
            for u in rest:
                c = np.zeros(6)
                c[t], c[u] = 1.0, -1.0
                v, v_after = c @ cov @ c, c @ after @ c
                omega = 0.5 * math.erfc(abs(theta[t] - theta[u]) / math.sqrt(v) / math.sqrt(2))
                total += omega * 0.5 * math.log(v / v_after)
        gains.append(total)
    g = np.array(gains)
    np.testing.assert_allclose(w[0], g / g.sum(), rtol=1e-6)


def test_rank_one_update_is_the_direct_inverse_of_the_updated_information() -> None:
    fit = _fit(m=6)
    cov = np.repeat(fit.covariance[:1], 3, axis=0)
    i, j, h = np.array([0, 2, 5]), np.array([3, 1, 4]), np.array([0.7, 12.0, 0.05])
    updated = rank_one_update(cov, i, j, h)
    for r in range(3):
        a = np.zeros(6)
        a[i[r]], a[j[r]] = 1.0, -1.0
        direct = np.linalg.inv(np.linalg.inv(cov[r]) + h[r] * np.outer(a, a))
        np.testing.assert_allclose(updated[r], direct, rtol=1e-9, atol=1e-12)


def _greedy_design_by_inversion(fit, contrasts, v_star: float, n_votes: float, floor: float) -> np.ndarray:
    """The design rule's greedy round, recomputed with a full matrix inverse per candidate pair."""
    m = fit.n_systems
    first, second = pair_indices(m)
    theta = fit.theta[0]
    q = expit(theta[first] - theta[second]) * (1 - expit(theta[first] - theta[second]))
    pair_vectors = []
    for i, j in zip(first, second, strict=True):
        a = np.zeros(m)
        a[i], a[j] = 1.0, -1.0
        pair_vectors.append(a)
    info = np.linalg.inv(fit.covariance[0])
    for e, a in enumerate(pair_vectors):
        info = info + floor * n_votes / len(first) * q[e] * np.outer(a, a)
    h = (1 - floor) * n_votes / DESIGN_STEPS * q
    c_vectors = []
    for b, w in contrasts:
        c = np.zeros(m)
        c[b], c[w] = 1.0, -1.0
        c_vectors.append(c)
    counts = np.zeros(len(first))
    for _ in range(DESIGN_STEPS):
        cov = np.linalg.inv(info)
        v = np.array([c @ cov @ c for c in c_vectors])
        excess = np.maximum(v - v_star, 0.0) if np.any(v > v_star) else v
        gains = []
        for e, a in enumerate(pair_vectors):
            after = np.linalg.inv(info + h[e] * np.outer(a, a))
            v_after = np.array([c @ after @ c for c in c_vectors])
            gains.append(np.minimum(v - v_after, excess).sum())
        best = int(np.argmax(gains))
        counts[best] += 1
        info = info + h[best] * np.outer(pair_vectors[best], pair_vectors[best])
    return counts / counts.sum()


def test_design_rule_is_the_greedy_variance_reduction_by_direct_inversion_for_top_k() -> None:
    fit = _fit(m=6)
    order = np.argsort(-fit.theta[0], kind="stable")
    contrasts = [(t, u) for t in order[:2] for u in order[2:]]
    w = allocation_weights(
        "design", fit, Target(kind="top_k", k=2), rng=np.random.default_rng(0), n_votes=300
    )
    expected = _greedy_design_by_inversion(fit, contrasts, 0.0, 300.0, UNIFORM_FLOOR)
    np.testing.assert_allclose(w[0], expected)


def test_design_rule_lowers_the_too_wide_adjacent_variances_by_direct_inversion() -> None:
    # Well separated systems with unequal data: every posterior draw has the fitted order, so the
    # contrasts are the fitted adjacent pairs, some of them wider than the threshold.
    m = 5
    first, second = pair_indices(m)
    theta = np.array([1.5, -3.0, 0.0, 3.0, -1.5])
    votes = np.random.default_rng(4).integers(40, 400, size=(1, 10)).astype(float)
    fit = fit_pairs(votes, np.round(2 * votes * expit(theta[first] - theta[second])) / 2)
    widths = adjacent_widths(fit)[0]
    width_elo = float(np.median(widths))
    order = np.argsort(-fit.theta[0], kind="stable")
    contrasts = list(pairwise(order))
    v_star = (width_elo / (2 * Z95 * SCORE_SCALE)) ** 2
    target = Target(kind="adjacent", width_elo=width_elo)
    w = allocation_weights("design", fit, target, rng=np.random.default_rng(0), n_votes=2000)
    expected = _greedy_design_by_inversion(fit, contrasts, v_star, 2000.0, UNIFORM_FLOOR)
    np.testing.assert_allclose(w[0], expected)
    # The votes go to pairs that narrow a too-wide neighbour, not to the narrow ones alone.
    assert w[0].max() < 1.0


def test_adaptive_rule_per_target_and_unknown_kind_refused() -> None:
    assert adaptive_rule("top_k") == ADAPTIVE_RULE_BY_TARGET["top_k"] == "thompson"
    assert adaptive_rule("adjacent") == ADAPTIVE_RULE_BY_TARGET["adjacent"] == "design"
    with pytest.raises(StatisticsError, match="target kind"):
        adaptive_rule("kappa")


def test_every_rule_gives_shares_that_sum_to_one_and_thompson_only_boundary_pairs_when_settled() -> None:
    fit = _fit(m=5)
    for rule in RULES:
        for target in (Target(kind="top_k", k=2), Target(kind="adjacent", width_elo=30.0)):
            w = allocation_weights(rule, fit, target, rng=np.random.default_rng(1))
            assert w.shape == fit.votes.shape
            np.testing.assert_allclose(w.sum(axis=1), 1.0)
            assert np.all(w >= 0)
    # A fit with enormous data: Thompson's draws all agree, so it asks only the k-th against the (k+1)-th.
    first, second = pair_indices(5)
    theta = np.array([2.0, 1.0, 0.0, -1.0, -2.0])
    votes = np.full((1, 10), 1e6)
    points = votes * expit(theta[first] - theta[second])
    w = allocation_weights(
        "thompson", fit_pairs(votes, points), Target(kind="top_k", k=2), rng=np.random.default_rng(2)
    )
    assert w[0, pair_column(np.array(1), np.array(2), 5)] == pytest.approx(1.0)


def test_unknown_rule_and_impossible_target_are_refused() -> None:
    fit = _fit()
    with pytest.raises(StatisticsError, match="allocation rule must be one of"):
        allocation_weights("greedy", fit, Target(), rng=np.random.default_rng(0))
    with pytest.raises(StatisticsError, match="needs more than 5 systems"):
        allocation_weights("information", fit, Target(k=5), rng=np.random.default_rng(0))
    with pytest.raises(StatisticsError, match="target kind"):
        Target(kind="top")


def test_balanced_counts_differ_by_at_most_one_and_round_counts_keep_the_floor() -> None:
    rng = np.random.default_rng(3)
    order = np.argsort(rng.random((4, 15)), axis=1)
    for total in (1, 14, 15, 16, 100):
        counts = balanced_counts(total, order)
        assert np.all(counts.sum(axis=1) == total)
        assert np.all(counts.max(axis=1) - counts.min(axis=1) <= 1)
    # Every adaptive vote asked for one pair: the rest (the floor) spread over all pairs.
    weights = np.zeros((2000, 15))
    weights[:, 0] = 1.0
    counts = round_counts(40, weights, rng=rng)
    assert np.all(counts.sum(axis=1) == 40)
    floor_votes = math.ceil(UNIFORM_FLOOR * 40)
    others = counts[:, 1:].sum(axis=1).mean()
    assert others == pytest.approx(floor_votes * 14 / 15, rel=0.03)


# --------------------------------------------------------------------------- stopping


def test_mixture_confidence_sequence_covers_a_gaussian_random_walk_at_every_step() -> None:
    """Monte Carlo: a mean estimated from n standard normal draws, read after every draw."""
    rng = np.random.default_rng(4)
    alpha = 0.1
    paths, steps = 4000, 2000
    n = np.arange(1, steps + 1)
    rho = mixture_precision(alpha, tuned_half_width_elo=1.96 * SCORE_SCALE / math.sqrt(200))
    half = mixture_half_width(1.0 / n, alpha=alpha, rho=rho)
    ever_out = np.zeros(paths, dtype=bool)
    fixed_out = np.zeros(paths, dtype=bool)
    for lo in range(0, paths, 500):
        walk = np.cumsum(rng.standard_normal((500, steps)), axis=1) / n
        ever_out[lo : lo + 500] = np.any(np.abs(walk) > half, axis=1)
        fixed_out[lo : lo + 500] = np.any(np.abs(walk) > 1.645 / np.sqrt(n), axis=1)
    assert ever_out.mean() <= alpha
    # The fixed-design 90 % interval read at every step misses far more often than 10 %.
    assert fixed_out.mean() > 3 * alpha
    # And the sequence is wider than the fixed interval (the price of reading it at any time).
    assert np.all(half > 1.645 / np.sqrt(n))


def test_top_k_declaration_needs_separation_of_every_boundary_pair() -> None:
    first, second = pair_indices(4)
    theta = np.array([1.0, 0.5, -0.5, -1.0])
    p = expit(theta[first] - theta[second])
    big = np.full((1, 6), 20000.0)
    declared, top = top_k_declaration(fit_pairs(big, big * p), 2)
    assert declared[0]
    np.testing.assert_array_equal(top[0], [0, 1])
    small = np.full((1, 6), 20.0)
    declared, _ = top_k_declaration(fit_pairs(small, small * p), 2)
    assert not declared[0]


# --------------------------------------------------------------------------- simulator


def test_panel_mixture_matches_the_demo_raters_answering_one_vote_at_a_time() -> None:
    """The closed-form mixture against demo.simulation.rater_answer (ordered logit, both orders)."""
    noise = np.array([0.8, 1.3, 2.4])
    bias = np.array([0.3, -0.2, 0.0])
    tau = 0.35
    diff = 0.6
    expected = rater_mixture_probabilities(np.array([diff]), noise, bias, np.array(tau))[0]
    rng = random.Random(5)
    evidence = evidence_for(quality_a=diff, quality_b=0.0, penalty_a={}, penalty_b={}, active_axes=())
    counts = {"A": 0, "TIE": 0, "B": 0}
    n = 60000
    for t in range(n):
        r = t % 3
        profile = RaterProfile(
            id="r",
            noise=float(noise[r]),
            position_bias=float(bias[r]),
            tie_band=tau,
            cannot_judge_rate=0.0,
            repeat_consistency=1.0,
            median_ms=5000,
        )
        swapped = (t // 3) % 2 == 1
        verdict = rater_answer(profile=profile, evidence=evidence, swapped=swapped, rng=rng).verdict
        # Display → canonical (docs/protocol.md "Canonical answers"): a swapped display's "A" is canonical B.
        if swapped and verdict in ("A", "B"):
            verdict = "B" if verdict == "A" else "A"
        counts[verdict] += 1
    observed = np.array([counts["A"], counts["TIE"], counts["B"]]) / n
    se = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(observed - expected) < 4 * se)


def test_simulated_truth_has_the_stated_tie_rate_spread_and_is_seeded() -> None:
    assumptions = StudyAssumptions(n_systems=8, elo_sd=120.0, tie_rate=0.15)
    truth = simulated_truth(assumptions, [1, 2, 3])
    np.testing.assert_allclose(truth.answer_probabilities[..., 1].mean(axis=1), 0.15, atol=1e-9)
    np.testing.assert_allclose(truth.answer_probabilities.sum(axis=-1), 1.0)
    assert np.std(truth.elo[0]) == pytest.approx(120.0, rel=0.15)
    again = simulated_truth(assumptions, [2])
    np.testing.assert_array_equal(again.elo[0], truth.elo[1])
    with pytest.raises(StatisticsError, match="tie_rate"):
        StudyAssumptions(n_systems=8, tie_rate=0.95)


def test_sequential_uniform_run_is_balanced_and_its_stopping_errors_stay_below_nominal() -> None:
    truth = simulated_truth(StudyAssumptions(n_systems=5, elo_sd=150.0), list(range(40)))
    looks = look_grid(5, start_per_pair=4, stop_per_pair=300, ratio=1.3)
    run = run_sequential(truth, "uniform", Target(kind="top_k", k=2), looks, seed=7)
    assert run.top_correct.shape == (len(looks), 40)
    # With 300 votes per pair and 150-Elo spread the fitted top-2 is right almost always.
    assert run.top_correct[-1].mean() >= 0.9
    declared = run.declared_at >= 0
    assert declared.mean() > 0.5
    assert (declared & ~run.declared_correct).mean() <= 0.05
    # Widths shrink as votes come in.
    assert np.all(run.max_adjacent_width[-1] < run.max_adjacent_width[0])


def test_adaptive_run_finds_the_top_k_with_fewer_votes_than_uniform() -> None:
    truth = simulated_truth(StudyAssumptions(n_systems=8), list(range(60)))
    looks = look_grid(8, start_per_pair=2, stop_per_pair=150, ratio=1.25)
    target = Target(kind="top_k", k=2)
    uniform = run_sequential(truth, "uniform", target, looks, seed=8)
    adaptive = run_sequential(truth, "thompson", target, looks, seed=8)
    assert votes_to_share(looks, adaptive.top_correct, 0.8) < votes_to_share(looks, uniform.top_correct, 0.8)


def test_adaptive_adjacent_run_needs_fewer_votes_than_uniform_for_narrow_neighbours() -> None:
    # Easy case: 8 systems, a wide spread (far pairs carry little information per vote).
    truth = simulated_truth(StudyAssumptions(n_systems=8, elo_sd=200.0), list(range(30)))
    looks = look_grid(8, start_per_pair=2, stop_per_pair=300, ratio=1.25)
    target = Target(kind="adjacent", width_elo=80.0)
    uniform = run_sequential(truth, "uniform", target, looks, seed=9)
    adaptive = run_sequential(truth, "design", target, looks, seed=9)
    u = np.median(votes_to_width(looks, uniform.max_adjacent_width, 80.0))
    a = np.median(votes_to_width(looks, adaptive.max_adjacent_width, 80.0))
    assert math.isfinite(u) and a < 0.9 * u


def test_votes_to_share_and_width_read_the_first_settled_look() -> None:
    looks = np.array([10, 20, 40, 80])
    reached = np.array([[0, 0], [1, 0], [1, 1], [1, 1]], dtype=bool)
    assert votes_to_share(looks, reached, 1.0) == pytest.approx(40.0)
    assert votes_to_share(looks, reached, 0.5) == pytest.approx(20.0)
    assert math.isinf(votes_to_share(looks, np.zeros((4, 2), dtype=bool), 0.5))
    widest = np.array([[9.0, 9.0], [4.0, 9.0], [6.0, 4.0], [4.0, 3.0]])
    # Replicate 0 settles between 40 and 80 (width 6 -> 4 crosses 5); replicate 1 between 20 and 40.
    expected_0 = math.exp(
        math.log(40) + (math.log(6) - math.log(5)) / (math.log(6) - math.log(4)) * math.log(2)
    )
    expected_1 = math.exp(
        math.log(20) + (math.log(9) - math.log(5)) / (math.log(9) - math.log(4)) * math.log(2)
    )
    np.testing.assert_allclose(votes_to_width(looks, widest, 5.0), [expected_0, expected_1])
    fit = _fit(m=4)
    assert adjacent_widths(fit).shape == (2, 3)


def test_budget_rounds_start_with_the_uniform_start_and_end_on_the_budget() -> None:
    from stats.allocation import budget_rounds

    grid = budget_rounds(45, 1000)
    steps = np.diff([0, *grid])
    assert grid[0] == 45 and grid[-1] == 1000
    assert np.all(steps[1:-1] >= 45)
    # Past 45 / 0.12 = 375 units a round is 12 % of what was spent, rounded up.
    later = [(a, b) for a, b in itertools.pairwise(grid) if a > 375 and b < 1000]
    assert later and all(b - a == math.ceil(0.12 * a) for a, b in later)
    assert budget_rounds(6, 6) == [6]
    with pytest.raises(StatisticsError):
        budget_rounds(6, 5)


def test_draw_from_pairs_takes_each_pairs_count_and_fills_a_short_pair_from_the_rest() -> None:
    from stats.allocation import draw_from_pairs

    by_pair = {0: [10, 11, 12], 1: [20], 2: [30, 31]}
    pool = [10, 11, 12, 20, 30, 31]
    chosen = draw_from_pairs(np.array([2, 3, 0]), by_pair, pool, 5, rng=np.random.default_rng(1))
    assert len(chosen) == len(set(chosen)) == 5
    assert sum(c in by_pair[0] for c in chosen) >= 2 and 20 in chosen
    # Asking more than the pool holds gives the whole pool, once each.
    everything = draw_from_pairs(np.array([5, 5, 5]), by_pair, pool, 9, rng=np.random.default_rng(2))
    assert sorted(everything) == pool


def test_serve_time_choice_draws_with_the_probability_it_reports_and_keeps_the_floor() -> None:
    """One study's fit, 6 systems: 6,000 serve-time choices from the same fit (fresh posterior draws
    each time) hit each pair at the reported probability (within 4 binomial standard errors), never
    an unavailable pair, and every available pair at least floor / K' of the time."""
    from stats.allocation import serve_time_choice

    m = 6
    k_pairs = m * (m - 1) // 2
    rng = np.random.default_rng(39)
    theta = np.array([0.9, 0.6, 0.5, 0.0, -0.8, -1.2])
    first, second = pair_indices(m)
    votes = np.full((1, k_pairs), 12.0)
    points = votes * expit(theta[first] - theta[second])[None, :]
    fit = fit_pairs(votes, points)
    available = np.ones(k_pairs, dtype=bool)
    available[[0, 14]] = False  # (0, 1) and (4, 5): e.g. already served to this rater
    target = Target(kind="top_k", k=2)
    counts = np.zeros(k_pairs)
    reported = np.zeros(k_pairs)
    n = 6000
    for _ in range(n):
        served = serve_time_choice("thompson", fit, target, rng=rng, available=available)
        counts[served.column] += 1
        reported += served.probabilities
        assert served.probability == served.probabilities[served.column]
    expected = reported / n
    assert counts[~available].sum() == 0 and expected[~available].sum() == 0
    se = np.sqrt(expected * (1 - expected) / n)
    assert np.all(np.abs(counts / n - expected)[available] <= 4 * se[available] + 1e-3)
    assert expected[available].min() >= 0.25 / available.sum() - 1e-12
    # The rule puts most of the rest on the top-2 boundary: systems 1 and 2 (θ 0.6 and 0.5).
    assert int(np.argmax(expected)) == int(pair_column(np.array([1]), np.array([2]), m)[0])
