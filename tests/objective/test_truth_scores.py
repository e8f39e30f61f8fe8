"""Objective scores from a study's own renders, beside the rankings (issue 48 item 5; docs/protocol.md
"Objective scores beside the rankings", "The per-page view of the objective scores"): cached page
scores, the leaderboard's JSON / CSV / HTML columns with page-bootstrap intervals recomputed here
independently, Spearman and Kendall against scipy, the study page's fragment, the API, and the
per-page view with its boxes, refused to raters."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient
from scipy import stats

from annotation.models import Candidate, CandidateBlocks, ObjectiveScore, PageTruth
from annotation.services.objective_scores import objective_scores_refresh
from objective.blocks import parse_truth
from objective.score import score_page
from tests.ranking.rank_factories import RankedStudy, make_ranked_study

W, H = 800.0, 1000.0
TABLE = "<table><tr><td>year</td><td>value</td></tr><tr><td>2024</td><td>7</td></tr></table>"


def truth_page(k: int) -> dict[str, Any]:
    """Page ``k``'s truth: a title, two paragraphs and, on even pages, a table."""
    blocks: list[dict[str, Any]] = [
        {"type": "title", "text": f"Report number {k}", "bbox": [50, 40, 750, 90]},
        {
            "type": "text",
            "text": f"The first paragraph of page {k} tells what was measured.",
            "bbox": [50, 120, 750, 220],
        },
        {
            "type": "text",
            "text": "The second paragraph explains how the numbers were gathered.",
            "bbox": [50, 600, 750, 700],
        },
    ]
    if k % 2 == 0:
        blocks.append(
            {"type": "table", "text": "year value 2024 7", "html": TABLE, "bbox": [50, 300, 750, 500]}
        )
    return {"page": {"width": W, "height": H}, "blocks": blocks}


def render_of(truth: dict[str, Any], system: str, k: int) -> dict[str, Any]:
    """A system's render of the page: alpha copies it, beta drops the second paragraph, gamma
    rewrites the title and moves it down, delta has a changed table cell and mirrored boxes on odd pages."""
    blocks = [dict(b) for b in truth["blocks"]]
    if system == "beta":
        blocks = [b for b in blocks if not b["text"].startswith("The second")]
    elif system == "gamma":
        blocks[0] = {**blocks[0], "text": f"A different heading {k}", "bbox": [50, 900, 750, 950]}
    elif system == "delta":
        for b in blocks:
            if b["type"] == "table":
                b["html"] = TABLE.replace("<td>7</td>", "<td>9</td>")
            elif k % 2:
                x0, y0, x1, y1 = b["bbox"]
                b["bbox"] = [x0, H - y1, x1, H - y0]
    return {"page": dict(truth["page"]), "blocks": blocks}


def with_truth(
    ranked: RankedStudy, *, failed: tuple[str, str] | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """Truth on every page of the ranked study and each candidate's render blocks; (page, system) → blocks."""
    made: dict[tuple[str, str], dict[str, Any]] = {}
    for k, page in enumerate(ranked.study.pages.order_by("position")):
        truth = truth_page(k)
        PageTruth.objects.create(page=page, blocks=truth)
        for candidate in Candidate.objects.filter(page=page).select_related("system"):
            blocks = render_of(truth, candidate.system.external_id, k)
            made[page.external_id, candidate.system.external_id] = blocks
            CandidateBlocks.objects.create(candidate=candidate, blocks=blocks)
    return made


def expected_page_scores(
    ranked: RankedStudy, made: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """system → page → the protocol's page score, computed straight from the blocks (no cache)."""
    truth = {
        p.page.external_id: p.blocks
        for p in PageTruth.objects.filter(page__study=ranked.study).select_related("page")
    }
    out: dict[str, dict[str, Any]] = {}
    for (page, system), blocks in made.items():
        out.setdefault(system, {})[page] = score_page(parse_truth(truth[page]), parse_truth(blocks))
    return out


def independent_intervals(
    by_page: dict[str, Any], pages: list[str], resamples: int, seed: int
) -> dict[str, Any]:
    """The page bootstrap written again: one stratum of sorted pages, numpy's default_rng(seed)
    drawing (resamples × pages) indices; means weighted by draw counts; 2.5 / 97.5 percentiles;
    S_obj = (0.3 TEDS + (1 − D_text) + S_layout) / 2.3 (without a table mean: the last two over 2)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(pages), size=(resamples, len(pages)))
    counts = np.zeros((resamples, len(pages)))
    for r in range(resamples):
        for i in draws[r]:
            counts[r, i] += 1

    def column(name: str) -> np.ndarray:
        return np.array(
            [np.nan if getattr(by_page[p], name) is None else getattr(by_page[p], name) for p in pages]
        )

    out: dict[str, Any] = {}
    means: dict[str, np.ndarray] = {}
    for name in ("teds", "teds_s", "d_text", "s_layout"):
        values = column(name)
        keep = ~np.isnan(values)
        weights = counts[:, keep]
        with np.errstate(invalid="ignore", divide="ignore"):
            means[name] = (weights @ values[keep]) / weights.sum(axis=1)
        out[name] = float(values[keep].mean())
        finite = means[name][np.isfinite(means[name])]
        out[f"{name}_ci95"] = [float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))]
    s_obj = np.where(
        np.isfinite(means["teds"]),
        (0.3 * np.nan_to_num(means["teds"]) + (1 - means["d_text"]) + means["s_layout"]) / 2.3,
        ((1 - means["d_text"]) + means["s_layout"]) / 2,
    )
    out["s_obj"] = (0.3 * out["teds"] + (1 - out["d_text"]) + out["s_layout"]) / 2.3
    out["s_obj_ci95"] = [float(np.percentile(s_obj, 2.5)), float(np.percentile(s_obj, 97.5))]
    return out


@pytest.mark.django_db
def test_scores_are_cached_per_candidate_and_computed_again_when_the_blocks_change() -> None:
    ranked = make_ranked_study("obj-cache", n_pages=4)
    made = with_truth(ranked)
    first = objective_scores_refresh(study=ranked.study)
    assert (first.scored, first.kept) == (16, 0)
    expected = expected_page_scores(ranked, made)
    for row in ObjectiveScore.objects.filter(candidate__page__study=ranked.study).select_related(
        "candidate__page", "candidate__system"
    ):
        want = expected[row.candidate.system.external_id][row.candidate.page.external_id]
        assert row.score["d_text"] == pytest.approx(want.d_text) and row.score["s_layout"] == pytest.approx(
            want.s_layout
        )
    # alpha copies the truth: TEDS 1 where the page has a table, D_text 0, S_layout 1.
    alpha = ObjectiveScore.objects.get(
        candidate__page__position=0,
        candidate__system__external_id="alpha",
        candidate__page__study=ranked.study,
    )
    assert (alpha.score["teds"], alpha.score["d_text"], alpha.score["s_layout"]) == (1.0, 0.0, 1.0)
    again = objective_scores_refresh(study=ranked.study)
    assert (again.scored, again.kept) == (0, 16)
    changed = CandidateBlocks.objects.filter(candidate__page__study=ranked.study).first()
    assert changed is not None
    changed.blocks = {**changed.blocks, "blocks": changed.blocks["blocks"][:1]}
    changed.save()
    third = objective_scores_refresh(study=ranked.study)
    assert (third.scored, third.kept) == (1, 15)


@pytest.mark.django_db
def test_scores_in_a_process_pool_equal_those_scored_one_by_one() -> None:
    ranked = make_ranked_study("obj-pool", n_pages=6)
    with_truth(ranked)
    assert objective_scores_refresh(study=ranked.study, workers=2).scored == 24
    pooled = dict(ObjectiveScore.objects.values_list("candidate_id", "score"))
    ObjectiveScore.objects.all().delete()
    assert objective_scores_refresh(study=ranked.study, workers=1).scored == 24
    assert dict(ObjectiveScore.objects.values_list("candidate_id", "score")) == pooled


@pytest.mark.django_db
def test_a_failed_render_is_scored_as_an_empty_page_and_an_image_output_is_not_scored() -> None:
    ranked = make_ranked_study("obj-failed", n_pages=2)
    with_truth(ranked)
    failed = Candidate.objects.get(page__study=ranked.study, page__position=0, system__external_id="beta")
    CandidateBlocks.objects.filter(candidate=failed).delete()
    Candidate.objects.filter(pk=failed.pk).update(rendered=False, image=None)
    image_only = Candidate.objects.get(
        page__study=ranked.study, page__position=1, system__external_id="gamma"
    )
    CandidateBlocks.objects.filter(candidate=image_only).delete()
    done = objective_scores_refresh(study=ranked.study)
    assert done.unscored == {"an image output (no DOM, so no blocks to score)": 1}
    empty = ObjectiveScore.objects.get(candidate=failed).score
    assert (
        empty["d_text"] == 1.0 and empty["teds"] == 0.0
    )  # nothing visible: all text lost, the table unmatched
    assert not ObjectiveScore.objects.filter(candidate=image_only).exists()


def run_leaderboard(
    ranked: RankedStudy, tmp_path: Path, resamples: int, seed: int
) -> tuple[dict[str, Any], list[dict[str, str]], str]:
    out = tmp_path / "lb.json"
    call_command(
        "leaderboard",
        ranked.study.slug,
        "--coefficients",
        ranked.coefficient_set.name,
        "--json",
        str(out),
        "--csv",
        str(tmp_path / "lb.csv"),
        "--html",
        str(tmp_path / "lb.html"),
        "--bootstrap",
        str(resamples),
        "--seed",
        str(seed),
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    rows = list(csv.DictReader(io.StringIO((tmp_path / "lb.csv").read_text())))
    return json.loads(out.read_text()), rows, (tmp_path / "lb.html").read_text()


@pytest.mark.django_db
def test_leaderboard_json_csv_and_html_carry_the_objective_scores_with_independent_intervals(
    tmp_path: Path,
) -> None:
    ranked = make_ranked_study("obj-lb", n_pages=12)
    made = with_truth(ranked)
    resamples, seed = 300, 77
    report, rows, html = run_leaderboard(ranked, tmp_path, resamples, seed)
    section = report["objective_scores"]
    assert section["pages_with_truth"] == 12 and section["candidates_scored"] == 48
    assert section["bootstrap"] == {"resamples": resamples, "seed": seed, "units": "pages", "strata": 1}
    expected = expected_page_scores(ranked, made)
    pages = sorted(p for p in expected["alpha"])
    by_system = {row["system"]: row for row in section["systems"]}
    for system in ranked.systems:
        want = independent_intervals(expected[system], pages, resamples, seed)
        got = by_system[system]
        for name in ("teds", "teds_s", "d_text", "s_layout", "s_obj"):
            assert got[name] == pytest.approx(want[name], abs=1e-9), (system, name)
            assert got[f"{name}_ci95"] == pytest.approx(want[f"{name}_ci95"], abs=1e-9), (system, name)
        assert got["pages"] == 12 and got["table_pages"] == 6
        csv_row = next(r for r in rows if r["system"] == system)
        assert float(csv_row["s_obj"]) == pytest.approx(want["s_obj"], abs=1e-9)
        assert float(csv_row["d_text_ci95_low"]) == pytest.approx(want["d_text_ci95"][0], abs=1e-9)
        assert float(csv_row["teds_ci95_high"]) == pytest.approx(want["teds_ci95"][1], abs=1e-9)
    from ranking.objective_scores import METRICS as CSV_METRICS
    from stats.objective_intervals import METRICS

    assert CSV_METRICS == METRICS  # the CSV's columns name every metric the intervals compute
    # alpha copies the truth: the best S_obj, exactly 1.
    assert by_system["alpha"]["s_obj"] == pytest.approx(1.0)
    # The comparison with the ranking, computed from Arbiter's own S_obj, equals scipy's.
    fitted = {r["system"]: r["score"] for r in report["systems"]}
    x = [by_system[s]["s_obj"] for s in ranked.systems]
    y = [fitted[s] for s in ranked.systems]
    vs = section["vs_subjective"]
    assert vs["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert vs["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert vs["metric"] == "s_obj" and vs["n_systems"] == 4
    # The imported CSV's key is left to outside evaluators.
    assert "objective_vs_subjective" not in report
    assert 'id="objective-scores"' in html and "Spearman ρ" in html


@pytest.mark.django_db
def test_a_leaderboard_without_ground_truth_is_unchanged(tmp_path: Path) -> None:
    ranked = make_ranked_study("obj-none", n_pages=6)
    report, rows, html = run_leaderboard(ranked, tmp_path, 50, 1)
    assert "objective_scores" not in report
    assert "s_obj" not in rows[0] and 'id="objective-scores"' not in html


@pytest.mark.django_db
def test_study_page_fragment_and_api_show_the_scores_beside_the_rankings(researcher: Any) -> None:
    ranked = make_ranked_study("obj-page", n_pages=6, researchers=[researcher])
    made = with_truth(ranked)
    objective_scores_refresh(study=ranked.study)
    client = Client()
    client.force_login(researcher)
    detail = client.get(f"/studies/{ranked.study.slug}/")
    assert f'hx-get="/studies/{ranked.study.slug}/objective-summary/"'.encode() in detail.content
    fragment = client.get(f"/studies/{ranked.study.slug}/objective-summary/").content.decode()
    assert 'id="objective-summary-table"' in fragment and "<code>delta</code>" in fragment
    assert "24 of 24 candidates scored" in fragment
    api = APIClient()
    api.force_authenticate(researcher)
    answer = api.get(f"/api/studies/{ranked.study.slug}/objective/?resamples=200&seed=5")
    assert answer.status_code == 200
    data = answer.json()
    assert (data["to_score"], data["scored"]) == (24, 24)
    expected = expected_page_scores(ranked, made)
    pages = sorted(expected["alpha"])
    for row in data["systems"]:
        want = independent_intervals(expected[row["system"]], pages, 200, 5)
        assert row["s_obj"] == pytest.approx(want["s_obj"], abs=1e-9)
        assert row["s_layout_ci95"] == pytest.approx(want["s_layout_ci95"], abs=1e-9)
    bad = api.get(f"/api/studies/{ranked.study.slug}/objective/?resamples=0")
    assert bad.status_code == 400 and "resamples" in bad.json()["detail"]


@pytest.mark.django_db
def test_per_page_view_draws_matched_boxes_and_is_refused_to_raters(
    researcher: Any, rater_user: Any, other_researcher: Any
) -> None:
    ranked = make_ranked_study("obj-view", n_pages=4, researchers=[researcher])
    with_truth(ranked)
    objective_scores_refresh(study=ranked.study)
    client = Client()
    client.force_login(researcher)
    listing = client.get(f"/studies/{ranked.study.slug}/objective/?by=d_text").content.decode()
    # Worst first by D_text: beta (a dropped paragraph) and gamma (a rewritten title) before alpha and
    # delta, whose texts are the truth's (D_text 0).
    order = re.findall(r"<tr>\s*<td><code>[^<]+</code></td>\s*<td><code>([^<]+)</code>", listing)
    assert len(order) == 16 and set(order[:8]) == {"beta", "gamma"} and set(order[8:]) == {"alpha", "delta"}
    assert 'id="objective-pages"' in listing and "16 of 16" in listing
    score = ObjectiveScore.objects.get(
        candidate__page__study=ranked.study,
        candidate__page__position=0,
        candidate__system__external_id="beta",
    )
    url = f"/studies/{ranked.study.slug}/objective/{score.candidate_id}/"
    assert url in listing
    page = client.get(url).content.decode()
    truth_blocks = len(PageTruth.objects.get(page=score.candidate.page).blocks["blocks"])
    render_blocks = len(CandidateBlocks.objects.get(candidate_id=score.candidate_id).blocks["blocks"])
    truth_pane = page.split('id="objective-truth"')[1].split("</figure>")[0]
    render_pane = page.split('id="objective-render"')[1].split("</figure>")[0]
    assert (
        truth_pane.count("<rect ") == truth_blocks == 4 and render_pane.count("<rect ") == render_blocks == 3
    )
    # beta dropped the second paragraph: that truth block is unmatched (dashed), every render block matched.
    assert (
        truth_pane.count('stroke-dasharray="6 4"') == 1 and render_pane.count('stroke-dasharray="6 4"') == 0
    )
    # A matched pair has the same colour on both sides.
    truth_colours = {c.split('"')[0] for c in truth_pane.split('stroke="')[1:]}
    render_colours = {c.split('"')[0] for c in render_pane.split('stroke="')[1:]}
    assert render_colours <= truth_colours and len(render_colours) == 3
    assert f"/studies/{ranked.study.slug}/objective/{score.candidate_id}/truth.png" in truth_pane
    # Raters (and another study's researcher) never reach it.
    rater = Client()
    rater.force_login(rater_user)
    for path in (url, f"/studies/{ranked.study.slug}/objective/", f"{url}render.png"):
        assert rater.get(path).status_code == 403
    other = Client()
    other.force_login(other_researcher)
    assert other.get(url).status_code == 404


@pytest.mark.django_db
def test_objective_page_shows_progress_and_scores_the_missing_on_request(researcher: Any) -> None:
    ranked = make_ranked_study("obj-refresh", n_pages=3, researchers=[researcher])
    with_truth(ranked)
    client = Client()
    client.force_login(researcher)
    url = f"/studies/{ranked.study.slug}/objective/"
    before = client.get(url).content.decode()
    # Nothing scored yet: the count, a progress bar that polls, the button, and what to do next.
    assert (
        "0 of 12" in before and 'hx-trigger="every 2s"' in before and "Score the missing candidates" in before
    )
    assert "No candidate is scored yet" in before
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="objective-status"') and "<table" not in fragment
    done = client.post(f"{url}refresh/")
    assert done.status_code == 302 and done["Location"] == url
    after = client.get(url).content.decode()
    assert "12 of 12" in after and 'hx-trigger="every 2s"' not in after
    assert ObjectiveScore.objects.filter(candidate__page__study=ranked.study).count() == 12


@pytest.mark.django_db
def test_a_queued_leaderboard_scores_the_missing_first_and_equals_the_single_computation(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from ranking.leaderboard import leaderboard_compute
    from ranking.models import Leaderboard
    from ranking.tasks import leaderboard_start

    settings.ARBITER_LEADERBOARD_CHUNK_RESAMPLES = 40
    ranked = make_ranked_study("obj-run", n_pages=8)
    with_truth(ranked)
    assert not ObjectiveScore.objects.exists()  # nothing scored before the run
    with django_capture_on_commit_callbacks(execute=True):
        leaderboard = leaderboard_start(study=ranked.study, coefficient_set="frozen", resamples=120, seed=4)
    leaderboard.refresh_from_db()
    assert leaderboard.status == Leaderboard.Status.DONE, leaderboard.error
    assert leaderboard.result["objective_scores"]["candidates_scored"] == 32
    single = leaderboard_compute(study=ranked.study, coefficient_set="frozen", resamples=120, seed=4)
    assert leaderboard.result["objective_scores"] == single["objective_scores"]


@pytest.mark.django_db
def test_study_page_fragment_sets_the_scores_beside_the_newest_judge_ranking(researcher: Any) -> None:
    from ranking.leaderboard import leaderboard_compute

    ranked = make_ranked_study("obj-beside", n_pages=8, researchers=[researcher])
    with_truth(ranked)
    objective_scores_refresh(study=ranked.study)
    record: list[Any] = []
    report = leaderboard_compute(
        study=ranked.study, coefficient_set="frozen", resamples=60, seed=2, record=record
    )
    client = Client()
    client.force_login(researcher)
    fragment = client.get(f"/studies/{ranked.study.slug}/objective-summary/").content.decode()
    assert "Rank, judges (frozen)" in fragment
    ranks = {r["system"]: r["rank"] for r in report["systems"]}
    s_obj = {r["system"]: r["s_obj"] for r in report["objective_scores"]["systems"]}
    for system in ranked.systems:  # each system's row carries the leaderboard's rank beside its S_obj
        row = fragment.split(f"<td><code>{system}</code></td>")[1].split("</tr>")[0]
        assert f'<td class="num">{ranks[system]}</td>' in row
        assert f"{s_obj[system]:.3f}" in row
    x = [s_obj[s] for s in ranked.systems]
    y = [-ranks[s] for s in ranked.systems]
    rho, tau = stats.spearmanr(x, y).statistic, stats.kendalltau(x, y).statistic
    assert f"Spearman ρ = {rho:.3f}, Kendall τ = {tau:.3f}" in fragment
