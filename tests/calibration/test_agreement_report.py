"""Agreement report for a study (docs/protocol.md "Human reference and agreement", "Commands", "Report keys"):
command, service wiring, HTML, page and API access."""

from __future__ import annotations

import base64
import io
import json
import re
from itertools import combinations
from pathlib import Path
from xml.etree import ElementTree

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotation.models import Assignment, AssignmentState, Vote
from annotation.selectors.votes import votes_frame
from annotation.services.votes_csv import votes_import_csv
from calibration.services.agreement import agreement_report_compute, agreement_report_for_study
from tests.annotation.factories import EXAMPLE_ROWS, make_rated_study, make_study, write_votes_csv
from tests.calibration.figure_checks import page_figures

pytestmark = pytest.mark.django_db

CI = {"value": float, "ci95": list}
SPEC_KEYS = {  # docs/protocol.md "Report keys" agreement_report (the same shape the contract check uses)
    "n_comparisons": int, "n_main_annotations": int, "n_valid_annotations": int, "coverage": float,
    "n_repeat_pairs": int, "exact_agreement": {**CI, "n_pairs": int}, "fleiss_kappa": CI,
    "krippendorff_alpha_ordinal": CI, "unanimous_share": float, "unique_plurality_share": float,
    "hidden_repeat_agreement": {"agree": int, "n": int, "value": float}, "human_reference": list,
    "human_ranking": list, "leave_one_rater_out": {"min_spearman": float, "max_rank_movement": int, "per_rater": list},
    "bootstrap": {"resamples": int, "seed": int},
}


def missing_keys(obj: object, spec: dict, where: str = "") -> list[str]:
    out = []
    for key, sub in spec.items():
        if not isinstance(obj, dict) or key not in obj:
            out.append(where + key)
        elif isinstance(sub, dict):
            out += missing_keys(obj[key], sub, f"{where}{key}.")
        elif sub is list and not isinstance(obj[key], list):
            out.append(f"{where}{key} (not a list)")
        elif sub in (int, float) and not isinstance(obj[key], (int, float)):
            out.append(f"{where}{key} (not a number: {obj[key]!r})")
    return out


@pytest.fixture
def rated(tmp_path: Path, researcher):  # type: ignore[no-untyped-def]
    return make_rated_study("rated", researchers=[researcher], tmp_dir=tmp_path, seed=11)


def run_report(tmp_path: Path, *args: str, name: str = "report.json") -> dict:
    out = tmp_path / name
    call_command("agreement_report", *args, "--json", str(out), stdout=io.StringIO())
    return json.loads(out.read_text())


# ---------------------------------------------------------------------------------------------
# Command and service
# ---------------------------------------------------------------------------------------------


def test_command_json_has_the_spec_keys_and_the_same_seed_reproduces_it(tmp_path: Path, rated) -> None:  # type: ignore[no-untyped-def]
    first = run_report(tmp_path, "rated", "--bootstrap", "120", "--seed", "5", name="a.json")
    assert missing_keys(first, SPEC_KEYS) == []
    assert first["bootstrap"]["resamples"] == 120 and first["bootstrap"]["seed"] == 5
    again = run_report(tmp_path, "rated", "--bootstrap", "120", "--seed", "5", name="b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    other = run_report(tmp_path, "rated", "--bootstrap", "120", "--seed", "6", name="c.json")
    assert other["fleiss_kappa"]["value"] == first["fleiss_kappa"]["value"]
    assert other["fleiss_kappa"]["ci95"] != first["fleiss_kappa"]["ci95"]
    assert again == first


def test_command_defaults_are_2000_resamples_and_the_studys_seed(tmp_path: Path, rated) -> None:  # type: ignore[no-untyped-def]
    report = run_report(tmp_path, "rated")
    assert report["bootstrap"]["resamples"] == 2000 and report["bootstrap"]["seed"] == rated.seed == 11


def test_report_counts_match_the_stored_votes(rated) -> None:  # type: ignore[no-untyped-def]
    report = agreement_report_for_study(study=rated, resamples=20, seed=1)
    votes = list(Vote.objects.filter(trial__assignment__block__study=rated).values_list(
        "trial__comparison__external_id", "trial__assignment__rater__external_id", "trial__is_repeat", "label"))
    main = [v for v in votes if not v[2]]
    valid = [v for v in main if v[3] != "CANNOT_JUDGE"]
    assert report["n_main_annotations"] == len(main)
    assert report["n_valid_annotations"] == len(valid)
    assert report["coverage"] == pytest.approx(len(valid) / len(main))
    # h and exact agreement by a brute-force loop over the stored votes
    # (docs/protocol.md "Human reference and agreement").
    by_comparison: dict[str, list[str]] = {}
    for comparison, _, _, label in valid:
        by_comparison.setdefault(comparison, []).append(label)
    h = {r["comparison"]: r["h"] for r in report["human_reference"]}
    assert set(h) == set(by_comparison)
    for comparison, labels in by_comparison.items():
        want = (labels.count("A") + 0.5 * labels.count("TIE")) / len(labels)
        assert h[comparison] == pytest.approx(want)
    pairs = [(x == y) for labels in by_comparison.values() for x, y in combinations(labels, 2)]
    assert report["exact_agreement"]["n_pairs"] == len(pairs)
    assert report["exact_agreement"]["value"] == pytest.approx(sum(pairs) / len(pairs))
    # Hidden repeats: original vs repeat of the same rater and comparison.
    original = {(c, r): lab for c, r, rep, lab in votes if not rep}
    repeats = [(original[c, r] == lab) for c, r, rep, lab in votes if rep]
    assert report["hidden_repeat_agreement"] == {
        "agree": sum(repeats), "n": len(repeats), "value": pytest.approx(sum(repeats) / len(repeats))
    }
    assert [s["system"] for s in report["human_ranking"]] == ["alpha", "beta", "gamma", "delta"]


def test_voided_assignments_are_excluded(rated) -> None:  # type: ignore[no-untyped-def]
    before = agreement_report_for_study(study=rated, resamples=20, seed=1)
    voided = Assignment.objects.filter(block__study=rated, rater__external_id="b0-r0").get()
    n_main = Vote.objects.filter(trial__assignment=voided, trial__is_repeat=False).count()
    Assignment.objects.filter(pk=voided.pk).update(state=AssignmentState.VOIDED)
    after = agreement_report_for_study(study=rated, resamples=20, seed=1)
    assert after["n_main_annotations"] == before["n_main_annotations"] - n_main
    assert "b0-r0" not in {q["rater"] for q in after["rater_quality"]}
    assert "b0-r0" not in {p["rater"] for p in after["leave_one_rater_out"]["per_rater"]}
    assert "b0-r0" in {p["rater"] for p in before["leave_one_rater_out"]["per_rater"]}


def test_example_bundle_and_votes_end_to_end(tmp_path: Path, examples_dir: Path) -> None:
    bundles = pytest.importorskip("annotation.services.bundles.importing")
    study = bundles.study_import_bundle(path=examples_dir / "bundle")
    votes_import_csv(study=study, path=examples_dir / "votes.csv")
    report = agreement_report_for_study(study=study, resamples=50, seed=1)
    assert (report["n_main_annotations"], report["n_valid_annotations"], report["n_comparisons"]) == (4, 3, 2)
    assert report["hidden_repeat_agreement"] == {"agree": 1, "n": 1, "value": 1.0}
    assert {r["comparison"]: (r["h"], r["n_A"], r["n_T"], r["n_B"]) for r in report["human_reference"]} == {
        "c1": (0.5, 1, 0, 1),
        "c2": (0.5, 0, 1, 0),
    }


def test_a_study_without_votes_still_reports(tmp_path: Path) -> None:
    make_study()
    report = run_report(tmp_path, "example", "--bootstrap", "10", "--html", str(tmp_path / "r.html"))
    assert report["n_comparisons"] == 0 and report["n_main_annotations"] == 0
    assert report["human_reference"] == [] and report["exact_agreement"]["value"] is None
    assert "<script" not in (tmp_path / "r.html").read_text()


def test_command_errors_are_one_line_and_write_nothing(tmp_path: Path, rated) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("agreement_report", "nope", "--json", str(out))
    with pytest.raises(CommandError, match=r"field 'bootstrap': expected an integer 1–100000, got 0"):
        call_command("agreement_report", "rated", "--json", str(out), "--bootstrap", "0")
    with pytest.raises(CommandError, match=r"field 'seed': expected a non-negative integer, got -3"):
        call_command("agreement_report", "rated", "--json", str(out), "--seed", "-3")
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# HTML export
# ---------------------------------------------------------------------------------------------


def assert_self_contained(html: str) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html.lower() and "@import" not in html
    sources = re.findall(r'<img[^>]*\ssrc="([^"]+)"', html)
    assert len(sources) == 4
    for src in sources:
        assert src.startswith("data:image/svg+xml;base64,")
        svg = base64.b64decode(src.split(",", 1)[1])
        root = ElementTree.fromstring(svg)
        assert root.tag.endswith("svg")
        assert b"<script" not in svg and b"xlink:href=\"http" not in svg


def test_html_report_is_self_contained_with_four_figures(tmp_path: Path, rated) -> None:  # type: ignore[no-untyped-def]
    html_path = tmp_path / "r.html"
    report = run_report(tmp_path, "rated", "--bootstrap", "50", "--seed", "2", "--html", str(html_path))
    html = html_path.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert_self_contained(html)
    assert "Agreement report: Study rated" in html
    assert f"{report['exact_agreement']['value']:.3f}" in html
    for row in report["human_ranking"]:
        assert row["system"] in html
    # Same inputs, same bytes (figures carry no date, fixed ids).
    again = tmp_path / "again.html"
    run_report(tmp_path, "rated", "--bootstrap", "50", "--seed", "2", "--html", str(again), name="again.json")
    assert again.read_bytes() == html_path.read_bytes()


def test_the_ranking_plot_draws_the_leave_one_rater_out_refits(rated, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from calibration import agreement_plots
    from calibration.services.agreement import agreement_report_html
    from tests.stats.test_agreement import refit_leave_one_rater_out_scores

    drawn = []
    plot = agreement_plots.human_ranking_plot
    monkeypatch.setattr(
        agreement_plots, "human_ranking_plot", lambda ranking, scores: drawn.append(scores) or plot(ranking, scores)
    )
    agreement = agreement_report_compute(study=rated, resamples=10, seed=1)
    agreement_report_html(agreement)
    [scores] = drawn
    assert scores == refit_leave_one_rater_out_scores(votes_frame(study=rated))
    n_raters = len(agreement.report["leave_one_rater_out"]["per_rater"])
    assert set(scores) == {s["system"] for s in agreement.report["human_ranking"]}
    assert all(len(v) == n_raters for v in scores.values())
    full = {s["system"]: s["score"] for s in agreement.report["human_ranking"]}
    for system, values in scores.items():  # each left-out fit stays near the full fit
        assert min(values) - 100 < full[system] < max(values) + 100


# ---------------------------------------------------------------------------------------------
# Researcher page and REST endpoint (personas)
# ---------------------------------------------------------------------------------------------


def agreement_body(client: Client, page: str) -> str:
    """The agreement page's numbers, from the URL its htmx placeholder asks (as the browser does)."""
    import html
    import re

    found = re.search(r'id="agreement-body" hx-get="([^"]+)"', page)
    assert found, page[:500]
    response = client.get(html.unescape(found.group(1)), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


def test_page_for_the_researcher(client: Client, researcher, rated) -> None:  # type: ignore[no-untyped-def]
    client.force_login(researcher)
    response = client.get("/studies/rated/agreement/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "200 bootstrap resamples" in page and "Computing the agreement" in page
    assert "Fleiss κ" not in page  # the numbers come on the page's own htmx request
    body = agreement_body(client, page)
    assert "Fleiss κ" in body
    # The figures are drawn on requests of their own, so the page shows its numbers at once.
    sources = page_figures(client, body, under="/studies/rated/agreement/figures/", count=4)
    assert client.get(sources[0].replace("/agreement.svg", "/nothing.svg")).status_code == 404
    response = client.get("/studies/rated/agreement/?bootstrap=30&seed=4")
    assert response.status_code == 200 and "30 bootstrap resamples" in response.content.decode()
    assert "Fleiss κ" in agreement_body(client, response.content.decode())
    response = client.get("/studies/rated/agreement/?bootstrap=lots")
    assert response.status_code == 400 and b"field 'bootstrap'" in response.content


def test_html_download(client: Client, researcher, rated) -> None:  # type: ignore[no-untyped-def]
    client.force_login(researcher)
    response = client.get("/studies/rated/agreement/report.html?bootstrap=20&seed=3")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="rated-agreement.html"'
    assert_self_contained(response.content.decode())


def test_page_access_by_persona(client: Client, rated, other_researcher, rater_user) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/studies/rated/agreement/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(other_researcher)
    assert client.get("/studies/rated/agreement/").status_code == 404
    assert client.get("/studies/rated/agreement/report.html").status_code == 404
    client.force_login(rater_user)
    assert client.get("/studies/rated/agreement/").status_code == 403
    assert client.get("/studies/rated/agreement/report.html").status_code == 403
    figure = "/studies/rated/agreement/figures/0123456789abcdef0123456789abcdef/agreement.svg"
    assert client.get(figure).status_code == 403
    client.force_login(other_researcher)
    assert client.get(figure).status_code == 404


def test_api_returns_the_report(client: Client, researcher, rated) -> None:  # type: ignore[no-untyped-def]
    client.force_login(researcher)
    response = client.get("/api/studies/rated/agreement/?bootstrap=40&seed=9")
    assert response.status_code == 200
    data = response.json()
    assert missing_keys(data, SPEC_KEYS) == []
    assert data["bootstrap"]["resamples"] == 40 and data["bootstrap"]["seed"] == 9
    assert data == agreement_report_for_study(study=rated, resamples=40, seed=9)
    response = client.get("/api/studies/rated/agreement/?bootstrap=0")
    assert response.status_code == 400 and "field 'bootstrap'" in response.json()["detail"]
    response = client.get("/api/studies/rated/agreement/?bootstrap=20")
    assert response.json()["bootstrap"]["seed"] == rated.seed


def test_api_access_by_persona(client: Client, rated, other_researcher, rater_user) -> None:  # type: ignore[no-untyped-def]
    assert client.get("/api/studies/rated/agreement/?bootstrap=5").status_code in (401, 403)
    client.force_login(other_researcher)
    assert client.get("/api/studies/rated/agreement/?bootstrap=5").status_code == 404
    client.force_login(rater_user)
    assert client.get("/api/studies/rated/agreement/?bootstrap=5").status_code == 403


def test_factory_votes_file_imports(tmp_path: Path) -> None:
    """The factories' example rows are the protocol example (guards the fixtures above)."""
    study = make_study()
    assert votes_import_csv(study=study, path=write_votes_csv(tmp_path / "v.csv", EXAMPLE_ROWS)).rows == 5
