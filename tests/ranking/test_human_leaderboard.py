"""The leaderboard of a study's human votes (docs/protocol.md "Human leaderboard") against independent
computations: the Bradley–Terry optimum by choix on the same votes (each vote two half-outcomes, so
a TIE is a win each way), the Davidson optimum by scipy, the votes counted from the database, the
saved exclusion rules, the failure rule; and the edge cases of docs/protocol.md "Scores set by the
penalty" on human and judge leaderboards alike."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import choix
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy import optimize

from annotation.models import Candidate, Vote
from ranking.leaderboard import leaderboard_compute
from tests.ranking.rank_factories import make_ranked_study

pytestmark = pytest.mark.django_db

SCALE = 400 / math.log(10)


def kept_votes(study_slug: str, raters: list[str] | None = None) -> list[tuple[str, str, str, str]]:
    """(page, system A, system B, label) of every valid main vote, read straight from the tables."""
    rows = Vote.objects.filter(
        trial__assignment__block__study__slug=study_slug,
        trial__is_repeat=False,
        label__in=["A", "TIE", "B"],
    ).exclude(trial__assignment__state="voided")
    if raters is not None:
        rows = rows.filter(trial__assignment__rater__external_id__in=raters)
    return list(
        rows.values_list(
            "trial__comparison__page__external_id",
            "trial__comparison__candidate_a__system__external_id",
            "trial__comparison__candidate_b__system__external_id",
            "label",
        )
    )


def choix_scores(votes: list[tuple[str, str, str, str]], systems: list[str]) -> dict[str, float]:
    """choix's penalized maximum-likelihood fit: each vote as two (winner, loser) entries (a TIE one
    each way), so choix's objective is twice the protocol's and its penalty ``alpha`` is 2 × 10⁻³."""
    index = {s: k for k, s in enumerate(systems)}
    data: list[tuple[int, int]] = []
    for _page, a, b, label in votes:
        i, j = index[a], index[b]
        data += {"A": [(i, j), (i, j)], "TIE": [(i, j), (j, i)], "B": [(j, i), (j, i)]}[label]
    theta = choix.opt_pairwise(len(systems), data, alpha=2e-3, method="BFGS", tol=1e-12)
    theta = theta - theta.mean()
    return {s: float(SCALE * theta[index[s]]) for s in systems}


def run_human(slug: str, tmp_path: Path, *extra: str, name: str = "human.json") -> dict:
    out = tmp_path / name
    call_command("leaderboard", slug, "--human", "--json", str(out), *extra)
    return json.loads(out.read_text())


def test_human_leaderboard_equals_choix_on_the_same_votes(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("human-fit", with_votes=True)
    csv_path = tmp_path / "human.csv"
    report = run_human("human-fit", tmp_path, "--bootstrap", "300", "--seed", "9", "--csv", str(csv_path))
    votes = kept_votes("human-fit")
    assert report["outcomes"] == "human votes" and report["coefficients"] is None
    assert report["estimator"] == "Bradley–Terry" and report["model"] == "bradley_terry"
    assert report["n_votes"] == report["n_comparisons"] == len(votes)  # no saved rules: every valid main vote
    assert report["n_pages"] == len({v[0] for v in votes})
    assert report["bootstrap"] == {"resamples": 300, "seed": 9, "units": "pages", "strata": 1}
    assert "judge_outputs" not in report and "exclusions" not in report
    want = choix_scores(votes, ranked.systems)
    rows = {row["system"]: row for row in report["systems"]}
    for s in ranked.systems:
        assert rows[s]["score"] == pytest.approx(want[s], abs=1e-3)
        assert rows[s]["ci95"][0] <= rows[s]["score"] <= rows[s]["ci95"][1]
        assert rows[s]["appearances"] == sum(1 for v in votes if s in v[1:3])
        assert rows[s]["penalty"] is None
    assert report["systems"][0]["system"] == "alpha"
    assert report["pairs_without_outcomes"] == []
    table = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert [r["system"] for r in table] == [row["system"] for row in report["systems"]]
    out = capsys.readouterr().out
    assert f"({report['estimator']}) from {len(votes)} human votes" in out


def test_saved_rules_choose_the_votes_and_say_whom_they_removed(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    ranked = make_ranked_study("human-rules", with_votes=True)
    study = ranked.study
    junk = Vote.objects.filter(trial__assignment__rater__external_id="r00", trial__is_repeat=False)
    junk.filter(trial__swapped=False).update(label="A")  # straight-lining: "A" shown on every trial
    junk.filter(trial__swapped=True).update(label="B")
    study.options = {**(study.options or {}), "exclusion_rules": {
        "straightline_share": 0.9, "straightline_min_trials": 5, "min_median_response_ms": None}}
    study.save(update_fields=["options"])
    report = run_human("human-rules", tmp_path, "--bootstrap", "50")
    votes = kept_votes("human-rules", raters=["r01", "r02"])
    ex = report["exclusions"]
    assert ex["n_raters"] == 3 and ex["n_kept_raters"] == 2 and ex["applied_by_default"] is True
    assert [r["participant"] for r in ex["excluded_raters"]] == ["r00"]
    assert report["n_votes"] == len(votes) < len(kept_votes("human-rules"))
    want = choix_scores(votes, ranked.systems)
    for row in report["systems"]:
        assert row["score"] == pytest.approx(want[row["system"]], abs=1e-3)
    out = capsys.readouterr().out
    assert "human votes: without 1 of 3 raters" in out and "r00 (straight_lining_share)" in out


def test_the_failure_rule_applies_to_the_votes(tmp_path: Path) -> None:
    """docs/protocol.md "Failed renders in the leaderboard": votes on a comparison whose candidate
    failed are never scored; ``aescode`` adds each failure's losses, weighted as a voted comparison."""
    ranked = make_ranked_study("human-fail", with_votes=True)
    study = ranked.study
    failed = Candidate.objects.get(page__study=study, page__external_id="p000", system__external_id="alpha")
    failed.rendered, failed.image = False, None  # replaced by a failed render after it was voted on
    failed.save(update_fields=["rendered", "image"])
    votes = [v for v in kept_votes("human-fail") if not (v[0] == "p000" and "alpha" in v[1:3])]
    report = run_human("human-fail", tmp_path, "--bootstrap", "30")
    assert report["n_votes"] == len(votes)
    assert report["render_failures"]["rule"] == "ambihtmlbench"
    assert report["render_failures"]["n_left_out"] == 3  # alpha's three comparisons on p000
    want = choix_scores(votes, ranked.systems)
    for row in report["systems"]:
        assert row["score"] == pytest.approx(want[row["system"]], abs=1e-3)

    study.options = {**(study.options or {}), "render": {"failure_rule": "aescode"}}
    study.save(update_fields=["options"])
    report = run_human("human-fail", tmp_path, "--bootstrap", "30", name="aescode.json")
    voted = {(v[0], v[1], v[2]) for v in votes}
    weight = round(len(votes) / len(voted))
    losses = [("p000", s, "alpha", "A") for s in ("beta", "gamma", "delta") for _ in range(weight)]
    assert report["render_failures"]["votes_per_failure_outcome"] == weight == 3
    assert report["n_votes"] == len(votes) and report["n_comparisons"] == len(votes) + len(losses)
    want = choix_scores(votes + losses, ranked.systems)
    for row in report["systems"]:
        assert row["score"] == pytest.approx(want[row["system"]], abs=1e-3)


def test_davidson_on_the_votes_equals_scipy(tmp_path: Path) -> None:
    """Ties modelled (docs/protocol.md "Human leaderboard"): each vote is its own label."""
    ranked = make_ranked_study("human-dav", with_votes=True)
    report = run_human("human-dav", tmp_path, "--bootstrap", "30", "--model", "davidson")
    votes = kept_votes("human-dav")
    index = {s: k for k, s in enumerate(ranked.systems)}
    a = np.array([index[v[1]] for v in votes])
    b = np.array([index[v[2]] for v in votes])
    y = np.array([{"A": 0, "TIE": 1, "B": 2}[v[3]] for v in votes])
    m = len(ranked.systems)

    def negative(x: np.ndarray) -> float:
        theta, eta = x[:m], x[m]
        half = (theta[a] - theta[b]) / 2
        logits = np.stack([half, np.full_like(half, eta), -half], axis=1)
        ll = logits[np.arange(len(y)), y] - np.logaddexp.reduce(logits, axis=1)
        return float(-ll.sum() + 1e-3 * theta @ theta)

    res = optimize.minimize(negative, np.zeros(m + 1), method="BFGS", options={"gtol": 1e-9})
    theta = res.x[:m] - res.x[:m].mean()
    assert report["estimator"] == "Davidson"
    assert report["tie_parameter"]["value"] == pytest.approx(math.exp(res.x[m]), rel=1e-4)
    for row in report["systems"]:
        assert row["score"] == pytest.approx(SCALE * theta[index[row["system"]]], abs=1e-2)


def test_a_system_that_never_wins_and_a_pair_never_compared_are_named(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """docs/protocol.md "Scores set by the penalty", on the human and the judge leaderboard."""
    ranked = make_ranked_study("human-edge", with_votes=True)
    study = ranked.study
    # delta loses every vote it is in; no vote compares beta with gamma.
    for vote in Vote.objects.filter(trial__assignment__block__study=study).select_related(
        "trial__comparison__candidate_a__system", "trial__comparison__candidate_b__system"
    ):
        a = vote.trial.comparison.candidate_a.system.external_id
        b = vote.trial.comparison.candidate_b.system.external_id
        if {a, b} == {"beta", "gamma"}:
            vote.label = "CANNOT_JUDGE"
        elif "delta" in (a, b):
            vote.label = "B" if a == "delta" else "A"
        vote.save(update_fields=["label"])
    report = run_human("human-edge", tmp_path, "--bootstrap", "50")
    rows = {row["system"]: row for row in report["systems"]}
    assert rows["delta"]["penalty"] == "score set by the penalty: no win"
    assert "lower end is the penalty's" in rows["delta"]["ci95_note"]
    assert all(rows[s]["penalty"] is None for s in ("alpha", "beta", "gamma"))
    assert report["pairs_without_outcomes"] == [["beta", "gamma"]]
    call_command("leaderboard", "human-edge", "--human", "--bootstrap", "50", "--json", str(tmp_path / "e.json"),
                 "--csv", str(tmp_path / "e.csv"), "--html", str(tmp_path / "e.html"))
    table = {r["system"]: r["penalty"] for r in csv.DictReader((tmp_path / "e.csv").open())}
    assert table == {"alpha": "", "beta": "", "gamma": "", "delta": "score set by the penalty: no win"}
    page = " ".join((tmp_path / "e.html").read_text().split())
    assert "score set by the penalty: no win" in page and "lower end is the penalty" in page
    assert "<code>beta</code> vs <code>gamma</code>" in page
    out = capsys.readouterr().out
    assert "delta: score set by the penalty: no win" in out and "beta vs gamma" in out

    # The judge-proxy leaderboard: alpha wins every comparison it is in by the judges' proxy.
    from judges.models import JudgeOutput

    for output in JudgeOutput.objects.filter(comparison__study=study).select_related(
        "comparison__candidate_a__system"
    ):
        if "alpha" in (output.comparison.candidate_a.system.external_id,
                       output.comparison.candidate_b.system.external_id):
            output.winner = "A" if output.comparison.candidate_a.system.external_id == "alpha" else "B"
            output.save(update_fields=["winner"])
    judged = leaderboard_compute(study=study, coefficient_set=ranked.coefficient_set, resamples=30, seed=1)
    flags = {row["system"]: row["penalty"] for row in judged["systems"]}
    assert flags == {"alpha": "score set by the penalty: no loss", "beta": None, "gamma": None, "delta": None}
    assert judged["pairs_without_outcomes"] == []


def test_refusals_are_one_line(tmp_path: Path) -> None:
    ranked = make_ranked_study("human-none")  # no votes
    with pytest.raises(CommandError, match="has no valid main vote"):
        run_human("human-none", tmp_path)
    with pytest.raises(CommandError, match="compare_to compares judge leaderboards"):
        run_human("human-none", tmp_path, "--compare-to", "1")
    with pytest.raises(CommandError):
        call_command("leaderboard", "human-none", "--human", "--coefficients", ranked.coefficient_set.name,
                     "--json", str(tmp_path / "x.json"))
    assert not (tmp_path / "human.json").exists()


def test_page_api_json_and_csv_of_a_human_leaderboard(researcher, django_capture_on_commit_callbacks, settings) -> None:  # type: ignore[no-untyped-def]
    """One page for every leaderboard: the human form needs no coefficient set; the queued run (in
    chunks) gives the same report as the command's computation; the API starts one with human: true."""
    from django.test import Client
    from django.urls import reverse

    from ranking.models import Leaderboard

    settings.ARBITER_LEADERBOARD_CHUNK_RESAMPLES = 20  # the run in several seeded chunks
    ranked = make_ranked_study("human-web", n_pages=10, researchers=[researcher], with_votes=True)
    client = Client()
    client.force_login(researcher)
    url = reverse("ranking:leaderboards", args=["human-web"])
    page = client.get(url).content.decode()
    assert 'id="human-leaderboard-form"' in page and "Rank the human votes" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"human": "1", "bootstrap": "50", "seed": "4", "model": "bradley_terry"})
    assert response.status_code == 302
    leaderboard = Leaderboard.objects.get(study=ranked.study)
    assert leaderboard.status == Leaderboard.Status.DONE and leaderboard.coefficient_set is None
    assert leaderboard.chunks_total == 3
    want = leaderboard_compute(study=ranked.study, coefficient_set=None, resamples=50, seed=4)
    assert leaderboard.result == want
    listing = client.get(url).content.decode()
    assert "human votes" in listing and f"{want['n_votes']} votes" in listing
    detail = client.get(reverse("ranking:detail", args=["human-web", leaderboard.pk])).content.decode()
    assert 'id="lb-estimator">Bradley–Terry<' in detail and f"<strong>{want['n_votes']}</strong> human votes" in detail
    body = client.get(reverse("ranking:download", args=["human-web", leaderboard.pk, "json"]))
    assert json.loads(body.content) == want
    table = client.get(reverse("ranking:download", args=["human-web", leaderboard.pk, "csv"])).content.decode()
    assert [r["system"] for r in csv.DictReader(io.StringIO(table))] == [r["system"] for r in want["systems"]]

    api = reverse("ranking:api-list", args=["human-web"])
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(api, {"human": True, "bootstrap": 50, "seed": 4}, content_type="application/json")
    assert started.status_code == 202, started.content
    assert started.json()["coefficients"] is None and started.json()["outcomes"] == "human votes"
    got = client.get(reverse("ranking:api-detail", args=["human-web", started.json()["id"]])).json()
    assert got["status"] == "done" and got["result"] == want
    neither = client.post(api, {"bootstrap": 50}, content_type="application/json")
    assert neither.status_code == 400 and "human: true" in json.dumps(neither.json())


def test_an_adaptive_study_keeps_its_debiased_scores_on_the_same_page(tmp_path: Path) -> None:
    """docs/protocol.md "Scores of an adaptive study": the human leaderboard of a serve-time study
    is the debiased fit of its kept votes, each weighted by its trial's stored probability (recomputed
    here from the trials), under one estimator name; Davidson is refused with its reason."""
    from annotation.models import Trial
    from annotation.services.adaptive_allocation import study_allocation_set
    from stats.adaptive_estimation import IPW_ESTIMATOR, debiased_bradley_terry
    from tests.annotation.test_adaptive_allocation import THETA, _run_raters, _study

    study = _study("human-adaptive", "pairwise_reference", tmp_path, raters=2)
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 2})
    study.refresh_from_db()
    _run_raters(study, 6, THETA)
    report = run_human("human-adaptive", tmp_path, "--bootstrap", "400", "--seed", "2")
    assert report["estimator"] == IPW_ESTIMATOR + ", bias-corrected"
    excluded = {r["participant"] for r in (report.get("exclusions") or {}).get("excluded_raters", [])}
    systems = ["s0", "s1", "s2", "s3", "s4"]
    a, b, y, p = [], [], [], []
    for trial in Trial.objects.filter(
        assignment__block__study=study, is_repeat=False, attention_expected="", vote__label__in=["A", "TIE", "B"]
    ).exclude(assignment__rater__external_id__in=excluded).select_related(
        "vote", "assignment__block", "comparison__candidate_a__system", "comparison__candidate_b__system"
    ):
        a.append(systems.index(trial.comparison.candidate_a.system.external_id))
        b.append(systems.index(trial.comparison.candidate_b.system.external_id))
        y.append({"A": 1.0, "TIE": 0.5, "B": 0.0}[trial.vote.label])
        p.append(trial.allocation_probability if trial.assignment.block.serve_time else 0.1)
    assert report["n_votes"] == len(a) and any(v != 0.1 for v in p)
    fit = debiased_bradley_terry(np.array(a), np.array(b), np.array(y), np.array(p), 5, seed=int(study.seed))
    low, high = fit.intervals()
    rows = {row["system"]: row for row in report["systems"]}
    for k, s in enumerate(systems):
        assert rows[s]["score"] == pytest.approx(fit.scores[0, k], abs=1e-6)
        assert rows[s]["ci95"] == pytest.approx([low[0, k], high[0, k]], abs=1e-6)
        assert rows[s]["rank_ci95"][0] <= rows[s]["rank"] <= rows[s]["rank_ci95"][1]
    assert report["bootstrap"]["units"].startswith("normal draws of the debiased fit")
    assert sum(row["rank1_share"] for row in report["systems"]) == pytest.approx(1.0)
    with pytest.raises(CommandError, match="debiased Bradley–Terry fit"):
        run_human("human-adaptive", tmp_path, "--model", "davidson", name="dav.json")
