"""``leaderboard --model davidson`` (issue 16, part 3): the Davidson tie model on the deployment
proxy, its tie parameter, the same page-block bootstrap and the comparison with Bradley–Terry.

Independent references: the soft-label Davidson likelihood written out in π form and maximized by
``scipy.optimize.minimize``; a naive per-resample refit on comparison-level weights; scipy's
Spearman / Kendall on θ rounded as the ranks are.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from scipy import optimize, stats

from ranking.leaderboard import leaderboard_compute
from ranking.models import Leaderboard
from ranking.tasks import leaderboard_start
from stats.bootstrap import bootstrap_page_blocks, bootstrap_units
from stats.davidson import (
    bootstrap_davidson,
    fit_davidson,
    fit_davidson_outcomes,
    merge_davidson_bootstraps,
    soft_labels,
)
from tests.ranking.rank_factories import RankedStudy, make_ranked_study
from tests.ranking.test_leaderboard import expected_outcomes

# The independent check rounds θ to 9 decimals: these scenarios sit far from a half-point, where
# rounding and the tie tolerance (stats.bradley_terry.RANK_TOLERANCE) agree.
RANK_DECIMALS = 9

SCALE = 400.0 / math.log(10.0)


def scipy_soft_davidson(
    a: np.ndarray, b: np.ndarray, p: np.ndarray, m: int, l2: float = 1e-3
) -> tuple[np.ndarray, float]:
    """Σ_i [q_A log P(A) + q_T log P(T) + q_B log P(B)] − λ‖θ‖², π form, maximized by BFGS."""
    two = 2 * p - 1
    q_a, q_t, q_b = np.maximum(0, two), 1 - np.abs(two), np.maximum(0, -two)

    def negative(params: np.ndarray) -> float:
        theta, log_nu = params[:m], params[m]
        pi_a, pi_b = np.exp(theta[a]), np.exp(theta[b])
        tie = np.exp(log_nu) * np.sqrt(pi_a * pi_b)
        log_total = np.log(pi_a + pi_b + tie)
        value = q_a * (theta[a] - log_total) + q_b * (theta[b] - log_total) + q_t * (np.log(tie) - log_total)
        return -(value.sum() - l2 * theta @ theta)

    res = optimize.minimize(negative, np.zeros(m + 1), method="BFGS", options={"gtol": 1e-10})
    theta = res.x[:m] - res.x[:m].mean()
    return theta, math.exp(res.x[m])


def simulated(seed: int, m: int = 5, n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    strength = np.linspace(1, -1, m)
    p = np.clip(0.5 + 0.3 * (strength[a] - strength[b]) + rng.normal(0, 0.2, n), 0, 1)
    p[rng.random(n) < 0.2] = 0.5  # some exact proxy ties
    pages = [f"pg{i // 4}" for i in range(n)]
    return a, b, p, pages


# ------------------------------------------------------------------ pure module


def test_soft_labels_keep_the_outcome_and_map_labels_to_themselves() -> None:
    p = np.array([0.0, 0.25, 0.5, 0.7, 1.0])
    q = soft_labels(p)
    np.testing.assert_allclose(q.sum(axis=1), 1.0)
    np.testing.assert_allclose(q[:, 0] + 0.5 * q[:, 1], p)
    np.testing.assert_allclose(q[[0, 2, 4]], [[0, 0, 1], [0, 1, 0], [1, 0, 0]])
    assert (q >= 0).all()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        soft_labels(np.array([1.2]))


@pytest.mark.parametrize("seed", [0, 1])
def test_soft_label_fit_equals_an_independent_optimizer(seed: int) -> None:
    a, b, p, _ = simulated(seed)
    fit = fit_davidson_outcomes(a, b, p, 5)
    theta, nu = scipy_soft_davidson(a, b, p, 5)
    np.testing.assert_allclose(fit.theta, theta, atol=1e-5)
    assert fit.tie_parameter == pytest.approx(nu, rel=1e-5)
    assert fit.gradient_norm < 1e-10


def test_bootstrap_rows_equal_naive_refits_and_chunks_merge_exactly() -> None:
    a, b, p, pages = simulated(3)
    units = bootstrap_units(pages)
    boot = bootstrap_davidson(a, b, p, 5, units, resamples=40, seed=7)
    counts = bootstrap_page_blocks(units, resamples=40, seed=7)
    q = soft_labels(p)
    labels = np.tile(["A", "TIE", "B"], len(p))
    for r in (0, 17, 39):
        w = counts[r, units.unit_of]
        naive = fit_davidson(np.repeat(a, 3), np.repeat(b, 3), labels, 5, weights=(q * w[:, None]).ravel())
        np.testing.assert_allclose(boot.result.scores[r], naive.scores, atol=1e-8)
        assert boot.tie_parameters[r] == pytest.approx(naive.tie_parameter, rel=1e-10)
    parts = [
        bootstrap_davidson(a, b, p, 5, units, resamples=40, seed=7, chunk=c) for c in ((25, 40), (0, 25))
    ]
    merged = merge_davidson_bootstraps(parts)
    np.testing.assert_array_equal(merged.result.scores, boot.result.scores)
    np.testing.assert_array_equal(merged.tie_parameters, boot.tie_parameters)
    np.testing.assert_array_equal(merged.result.rank_ci95, boot.result.rank_ci95)
    lo, hi = boot.tie_ci95
    assert lo <= fit_davidson_outcomes(a, b, p, 5).tie_parameter <= hi


# ------------------------------------------------------------------ command, tasks, API, page


def run_command(ranked: RankedStudy, tmp_path: Path, *extra: str, name: str = "lb.json") -> dict:
    out = tmp_path / name
    call_command(
        "leaderboard",
        ranked.study.slug,
        "--coefficients",
        ranked.coefficient_set.name,
        "--json",
        str(out),
        *extra,
    )
    return json.loads(out.read_text())


@pytest.mark.django_db
def test_command_davidson_report_equals_independent_fits(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-dav")
    report = run_command(ranked, tmp_path, "--bootstrap", "100", "--seed", "5", "--model", "davidson")
    bt = run_command(ranked, tmp_path, "--bootstrap", "100", "--seed", "5", name="bt.json")
    assert report["model"] == "davidson" and bt["model"] == "bradley_terry"
    assert "tie_parameter" not in bt and "model_comparison" not in bt
    p = expected_outcomes(ranked)
    systems = ranked.systems
    index = {s: k for k, s in enumerate(systems)}
    a = np.array([index[ranked.comparisons[c][1]] for c in p])
    b = np.array([index[ranked.comparisons[c][2]] for c in p])
    theta, nu = scipy_soft_davidson(a, b, np.array(list(p.values())), len(systems))
    rows = {row["system"]: row for row in report["systems"]}
    for s in systems:
        assert rows[s]["score"] == pytest.approx(SCALE * theta[index[s]], abs=1e-3)
        assert rows[s]["ci95"][0] <= rows[s]["score"] <= rows[s]["ci95"][1]
    assert report["tie_parameter"]["value"] == pytest.approx(nu, rel=1e-5)
    lo, hi = report["tie_parameter"]["ci95"]
    assert lo <= report["tie_parameter"]["value"] <= hi
    assert report["bootstrap"] == bt["bootstrap"]
    # Comparison with Bradley–Terry: tie-aware correlations of θ and the per-system rank change.
    bt_rows = {row["system"]: row for row in bt["systems"]}
    bt_theta = np.round(np.array([bt_rows[s]["score"] for s in systems]) / SCALE, RANK_DECIMALS)
    dv_theta = np.round(np.array([rows[s]["score"] for s in systems]) / SCALE, RANK_DECIMALS)
    cmp = report["model_comparison"]
    assert cmp["spearman"] == pytest.approx(stats.spearmanr(bt_theta, dv_theta).statistic, abs=1e-9)
    assert cmp["kendall"] == pytest.approx(stats.kendalltau(bt_theta, dv_theta).statistic, abs=1e-9)
    for entry in cmp["per_system"]:
        s = entry["system"]
        assert entry["rank_bradley_terry"] == bt_rows[s]["rank"] and entry["rank_davidson"] == rows[s]["rank"]
        assert entry["rank_change"] == bt_rows[s]["rank"] - rows[s]["rank"]
        assert entry["score_bradley_terry"] == pytest.approx(bt_rows[s]["score"], abs=1e-9)
    assert cmp["max_rank_change"] == max(abs(e["rank_change"]) for e in cmp["per_system"])
    html = tmp_path / "lb.html"
    run_command(
        ranked, tmp_path, "--bootstrap", "20", "--model", "davidson", "--html", str(html), name="x.json"
    )
    assert "Davidson model and Bradley–Terry" in html.read_text()


@pytest.mark.django_db
def test_command_refuses_an_unknown_model(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-dav-bad")
    with pytest.raises(CommandError, match="davidson"):
        run_command(ranked, tmp_path, "--model", "elo")


@pytest.mark.django_db
def test_chunked_davidson_tasks_equal_the_single_computation(
    settings, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_LEADERBOARD_CHUNK_RESAMPLES = 23
    ranked = make_ranked_study("lb-dav-chunks", n_pages=12)
    with django_capture_on_commit_callbacks(execute=True):
        leaderboard = leaderboard_start(
            study=ranked.study, coefficient_set="frozen", resamples=70, seed=9, model="davidson"
        )
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.DONE, leaderboard.error
    assert leaderboard.ranking_model == "davidson" and leaderboard.chunks_total == 4
    single = leaderboard_compute(
        study=ranked.study, coefficient_set="frozen", resamples=70, seed=9, model="davidson"
    )
    assert leaderboard.result == single


@pytest.mark.django_db
def test_api_and_page_start_a_davidson_leaderboard(researcher, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("lb-dav-web", n_pages=10, researchers=[researcher])
    client = Client()
    client.force_login(researcher)
    url = reverse("ranking:api-list", args=[ranked.study.slug])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url,
            {"coefficients": "frozen", "bootstrap": 20, "seed": 3, "model": "davidson"},
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    assert response.json()["model"] == "davidson"
    detail = client.get(reverse("ranking:api-detail", args=[ranked.study.slug, response.json()["id"]])).json()
    assert detail["result"]["model"] == "davidson" and detail["result"]["tie_parameter"]["value"] > 0
    bad = client.post(url, {"coefficients": "frozen", "model": "elo"}, content_type="application/json")
    assert bad.status_code == 400
    page = reverse("ranking:leaderboards", args=[ranked.study.slug])
    assert b'value="davidson"' in client.get(page).content
    with django_capture_on_commit_callbacks(execute=True):
        posted = client.post(
            page, {"coefficients": "frozen", "bootstrap": "20", "seed": "4", "model": "davidson"}
        )
    assert posted.status_code == 302
    leaderboard = Leaderboard.objects.filter(study=ranked.study, seed=4).get()
    assert leaderboard.ranking_model == "davidson" and leaderboard.status == Leaderboard.Status.DONE
    shown = client.get(reverse("ranking:detail", args=[ranked.study.slug, leaderboard.pk])).content.decode()
    assert "Davidson model and Bradley–Terry" in shown and "Tie parameter" in shown
