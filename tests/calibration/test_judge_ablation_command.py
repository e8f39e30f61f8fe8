"""The ``judge_ablation`` command, the researcher page and the REST endpoint (issue 16 part 1)
against the pure ``judge_ablation`` on evidence recomputed here from the factory's own outputs."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from annotation.models import Candidate, Page, StoredImage
from calibration.selectors.ablation import estimated_image_tokens
from judges.models import JudgeOutput
from stats.judge_ablation import judge_ablation
from tests.calibration.cal_factories import make_calibration_study

pytestmark = pytest.mark.django_db

AXIS_SCORE = {"A": 1, "TIE": 0, "B": -2}


def prepare(slug: str, researchers: tuple[Any, ...] = (), n_blocks: int = 3) -> Any:
    cal = make_calibration_study(slug, researchers=researchers, n_blocks=n_blocks)
    outputs = list(JudgeOutput.objects.filter(comparison__study=cal.study, status="valid"))
    for out in outputs:
        out.axis_scores = [{"id": "LAYOUT", "score": AXIS_SCORE[out.winner]}, {"id": "TEXT", "score": 0}]
    JudgeOutput.objects.bulk_update(outputs, ["axis_scores"])
    image = StoredImage.objects.create(sha256="a" * 64, file="images/a.png", width=1024, height=768, size_bytes=1)
    Page.objects.filter(study=cal.study).update(image=image)
    Candidate.objects.filter(page__study=cal.study).update(image=image)
    return cal


def independent_evidence(cal: Any) -> dict[str, Any]:
    """Overall and axis evidence per comparison and judge from the factory's frames (pandas)."""
    human = cal.human[cal.human["n_valid"] > 0].reset_index(drop=True)
    out = cal.judge_outputs[cal.judge_outputs["status"] == "valid"].copy()
    out["vote"] = out["winner"].map({"A": 1.0, "TIE": 0.5, "B": 0.0})
    out["axis"] = out["winner"].map(lambda w: ((AXIS_SCORE[w] + 0) / 2 + 2) / 4)
    overall = out.pivot_table(index="comparison", columns="judge", values="vote", aggfunc="mean")
    axis = out.pivot_table(index="comparison", columns="judge", values="axis", aggfunc="mean")
    judges = sorted(cal.judges)
    comps = human["comparison"].tolist()
    return {
        "overall": overall.reindex(index=comps, columns=judges).to_numpy(dtype=float),
        "axis": axis.reindex(index=comps, columns=judges).to_numpy(dtype=float),
        "h": human["h"].to_numpy(dtype=float),
        "valid_votes": human["n_valid"].to_numpy(dtype=float),
        "blocks": human["block"].astype(str).tolist(),
        "pages": human["page"].astype(str).tolist(),
        "judges": judges,
    }


def assert_close(got: Any, want: Any, path: str = "$") -> None:
    if isinstance(want, dict):
        for k in want:
            assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {got} != {want}"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def test_estimated_image_tokens_follow_the_documented_rule() -> None:
    assert estimated_image_tokens(1024, 768) == 85 + 170 * 4
    assert estimated_image_tokens(512, 512) == 85 + 170
    assert estimated_image_tokens(4096, 1024) == 85 + 170 * 4  # 2048 × 512 after fitting 2048 × 2048
    assert estimated_image_tokens(2048, 2048) == 85 + 170 * 4  # short side 768: 768 × 768
    assert estimated_image_tokens(0, 10) == 0


def test_command_equals_the_pure_ablation_and_writes_html(tmp_path: Path) -> None:
    cal = prepare("abl-cmd")
    out, html = tmp_path / "a.json", tmp_path / "a.html"
    call_command("judge_ablation", "abl-cmd", "--json", str(out), "--html", str(html), "--bootstrap", "60", "--seed", "3")
    report = json.loads(out.read_text())
    evidence = independent_evidence(cal)
    tokens = 3 * (85 + 170 * 4)
    calls = (
        cal.judge_outputs[cal.judge_outputs["comparison"].isin(cal.human.loc[cal.human["n_valid"] > 0, "comparison"])]
        .groupby("judge").size() / int((cal.human["n_valid"] > 0).sum())
    )
    costs = [tokens * float(calls[j]) for j in evidence["judges"]]
    direct = judge_ablation(**evidence, costs=costs, cost_unit=report["cost_unit"], resamples=60, seed=3).to_dict()
    assert_close(report, direct)
    assert report["study"] == "abl-cmd" and report["axis_evidence"] is True
    assert report["cost_method"]["tokens_per_call"] == tokens
    assert len(report["subsets"]) == 2 ** len(report["judges"]) - 1
    assert report["outer_folds"] == ["blk-1", "blk-2", "blk-3"]
    text = html.read_text()
    assert "different estimator from the frozen OLS proxy" in text and "Pareto" in text
    assert "<script" not in text and "data:image/svg+xml;base64," in text


def test_cost_comes_from_recorded_usage_and_prices_when_every_judge_has_them(tmp_path: Path) -> None:
    """Issue 16 part 1 with issue 14's usage: dollars per comparison from what the calls reported."""
    from judges.models import Judge

    cal = prepare("abl-usage")
    human = set(cal.human.loc[cal.human["n_valid"] > 0, "comparison"])
    outputs = list(JudgeOutput.objects.filter(comparison__study=cal.study).select_related("comparison", "judge"))
    for i, out in enumerate(outputs):
        out.input_tokens, out.output_tokens = 1000 + 7 * i, 50 + i % 5
    JudgeOutput.objects.bulk_update(outputs, ["input_tokens", "output_tokens"])
    prices = {}
    for k, judge in enumerate(Judge.objects.filter(outputs__comparison__study=cal.study).distinct().order_by("name")):
        judge.price_input_per_mtok, judge.price_output_per_mtok = 1.0 + k, 4.0 + 2 * k
        judge.save(update_fields=["price_input_per_mtok", "price_output_per_mtok"])
        prices[judge.name] = (judge.price_input_per_mtok, judge.price_output_per_mtok)
    out = tmp_path / "a.json"
    call_command("judge_ablation", "abl-usage", "--json", str(out), "--bootstrap", "40", "--seed", "3")
    report = json.loads(out.read_text())
    assert report["cost_unit"] == "US dollars per comparison"
    assert report["cost_method"]["source"] == "recorded usage × the judges' prices"
    for judge in report["judges"]:
        mine = [o for o in outputs if o.judge.name == judge and o.comparison.external_id in human]
        p_in, p_out = prices[judge]
        dollars = sum(o.input_tokens * p_in + o.output_tokens * p_out for o in mine) / 1e6
        expected = dollars / len({o.comparison.external_id for o in mine})
        got = report["cost_method"]["per_judge"][judge]["cost_per_comparison_usd"]
        assert math.isclose(got, expected, rel_tol=1e-4), (judge, got, expected)
    single = {s["judges"][0]: s["cost_per_comparison"] for s in report["subsets"] if len(s["judges"]) == 1}
    assert all(math.isclose(single[j], report["cost_method"]["per_judge"][j]["cost_per_comparison_usd"], rel_tol=1e-4)
               for j in report["judges"])


def test_too_few_blocks_is_one_line(tmp_path: Path) -> None:
    prepare("abl-one", n_blocks=1)
    out = tmp_path / "x.json"
    with pytest.raises(CommandError) as err:
        call_command("judge_ablation", "abl-one", "--json", str(out), "--bootstrap", "10")
    assert "at least two annotation blocks" in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()
    with pytest.raises(CommandError, match="no study"):
        call_command("judge_ablation", "nope", "--json", str(out))


def test_api_and_page(researcher, other_researcher, rater_user) -> None:  # type: ignore[no-untyped-def]
    from calibration.services.ablation import judge_ablation_report

    cal = prepare("abl-web", researchers=(researcher,))
    client = Client()
    client.force_login(researcher)
    url = reverse("calibration:api-ablation", args=[cal.study.slug])
    got = client.get(url, {"bootstrap": 20, "seed": 4})
    assert got.status_code == 200, got.content
    assert got.json() == json.loads(json.dumps(judge_ablation_report(study=cal.study, resamples=20, seed=4)))
    assert client.get(url, {"bootstrap": 0}).status_code == 400
    other = Client()
    other.force_login(other_researcher)
    assert other.get(url).status_code == 404
    rater = Client()
    rater.force_login(rater_user)
    assert rater.get(url).status_code == 403
    page = reverse("calibration:ablation", args=[cal.study.slug])
    assert b"Compute the nested ablation" in client.get(page).content
    pending = client.post(page, {"bootstrap": "20", "seed": "4"}).content.decode()
    # The form answers at once with the indicator; the result's own htmx request computes it.
    assert "By number of judges" not in pending and "Computing the ablation (20 resamples)" in pending
    assert 'hx-get="?bootstrap=20&amp;seed=4&amp;part=result" hx-trigger="load"' in pending
    result = {"bootstrap": "20", "seed": "4", "part": "result"}
    shown = client.get(page, result, headers={"HX-Request": "true"})
    assert shown.status_code == 200 and b"By number of judges" in shown.content and b"Pareto" in shown.content
    assert b"<html" not in shown.content and b"hx-trigger" not in shown.content
    assert "HX-Request" in shown["Vary"] and b"By number of judges" in client.get(page, result).content
    download = client.get(page, {"download": "json", "bootstrap": "20", "seed": "4"})
    assert download["Content-Disposition"].endswith('judge-ablation.json"')
    assert json.loads(download.content) == got.json()
    bad = client.post(page, {"bootstrap": "999999", "seed": "4"})
    assert bad.status_code == 400 and b"at most" in bad.content and b"hx-trigger" not in bad.content
    assert client.post(page, {"bootstrap": "20", "seed": "x"}).status_code == 400
    assert other.get(page).status_code == 404


@pytest.mark.django_db
def test_a_judge_whose_outputs_are_all_invalid_is_named_on_the_terminal(tmp_path: Path) -> None:
    """Left out of the ablation with its name and why, in the report and on stderr (not blamed on blocks)."""
    cal = prepare("abl-invalid")
    n = JudgeOutput.objects.filter(comparison__study=cal.study, judge__name="cal-gemini").update(
        status="invalid", winner=""
    )
    assert n > 0
    out, err = io.StringIO(), io.StringIO()
    call_command("judge_ablation", "abl-invalid", "--json", str(tmp_path / "x.json"), "--bootstrap", "10",
                 stdout=out, stderr=err)
    report = json.loads((tmp_path / "x.json").read_text())
    assert "cal-gemini" not in report["judges"] and "block" not in out.getvalue()
    assert err.getvalue().splitlines() == [
        f"judge cal-gemini left out: no valid output on the human set: all {n} of its outputs are invalid "
        f"({n} failed validation or transport)"
    ]


@pytest.mark.django_db
def test_an_ablation_that_cannot_be_computed_replaces_the_indicator_with_its_error(researcher) -> None:  # type: ignore[no-untyped-def]
    """htmx swaps no 4xx answer, so the result's request says the error with a 200 in place of the indicator."""
    cal = prepare("abl-none", researchers=(researcher,))
    JudgeOutput.objects.filter(comparison__study=cal.study).update(status="invalid", winner="")
    client = Client()
    client.force_login(researcher)
    page = reverse("calibration:ablation", args=[cal.study.slug])
    params = {"bootstrap": "20", "seed": "4", "part": "result"}
    fragment = client.get(page, params, headers={"HX-Request": "true"})
    body = fragment.content.decode()
    assert fragment.status_code == 200 and 'role="alert"' in body and "hx-trigger" not in body
    assert "By number of judges" not in body and "<html" not in body
    assert client.get(page, params).status_code == 400  # the whole page (no htmx) keeps its 400
