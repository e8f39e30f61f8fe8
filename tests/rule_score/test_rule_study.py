"""The rule score in a study (docs/protocol.md "AesCode's rule score"): a bundle's briefs carry
their requirements and its items their result, both exported unchanged; ``rule_score`` and the
kind report give each system's Rule and channels with brief-bootstrap intervals; ``new_study``
scores HTML outputs against a requirements file (real Chromium for that one)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ValidationFailed
from annotation.models import Candidate, Page, Predicate, Study
from annotation.services.bundles.exporting import study_export_bundle
from kind_reports.rule import rule_score_report
from kind_reports.services import kind_report_compute, kind_report_html
from rule_score.requirements import parse_requirements
from rule_score.verifiers import rule_result
from tests.annotation.render.conftest import browser_available
from tests.kind_reports.kind_report_factories import VoteWriter, import_kind_study

REQUIREMENTS = {"text": ["hello", "world"], "canvas": {"width": 100, "height": 100}}


def result_with(text_found: int, outside_share: float) -> dict[str, Any]:
    """A render that shows ``text_found`` of the two strings and ``outside_share`` of its content
    area right of the 100 px canvas, scored by the verifiers themselves."""
    words = ["hello", "world"][:text_found]
    width = 100 / (1 - outside_share) if outside_share < 1 else 200
    dom = {"visible_text": " ".join(words), "content_boxes": [[0, 0, width, 10]], "truncated": False}
    return rule_result({"status": "ok", "dom": dom}, parse_requirements(REQUIREMENTS)).to_json()


# Per brief: (alpha's text found, alpha's share outside), (beta's ...). Rule = mean(text, boundary).
PLAN = {
    "b1": ((2, 0.0), (1, 0.0)),  # alpha 1.0; beta (0.5 + 1) / 2 = 0.75
    "b2": ((2, 0.5), (0, 0.0)),  # alpha (1 + 0.5) / 2 = 0.75; beta 0.5
    "b3": ((1, 0.0), (2, 0.0)),  # alpha 0.75; beta 1.0
}


def with_rule(doc: dict[str, Any]) -> None:
    systems = [s["id"] for s in doc["systems"]]
    for brief in doc["briefs"]:
        if brief["id"] in PLAN:
            brief["requirements"] = REQUIREMENTS
    for item in doc["items"]:
        if item["brief"] in PLAN:
            text, share = PLAN[item["brief"]][systems.index(item["system"])]
            item["rule"] = result_with(text, share)


@pytest.mark.django_db
def test_a_bundle_carries_requirements_and_rule_and_exports_them_unchanged(tmp_path: Path) -> None:
    study = import_kind_study("checklist", tmp_path, slug="rules", briefs=4, edit=with_rule)
    assert Page.objects.get(study=study, external_id="b1").requirements == REQUIREMENTS
    assert Page.objects.get(study=study, external_id="b4").requirements == {}
    stored = Candidate.objects.get(page__study=study, external_id="b2-alpha").rule
    assert stored["rule"] == 0.75 and stored["applicable"] == {
        "text": True,
        "boundary": True,
        "table": False,
        "chart": False,
    }
    exported = json.loads(
        (study_export_bundle(study=study, path=tmp_path / "out") / "study.json").read_text()
    )
    source = json.loads((tmp_path / "bundle-rules" / "study.json").read_text())
    assert exported["briefs"] == source["briefs"]
    without_image = [
        [{k: v for k, v in item.items() if k != "image"} for item in doc["items"]]
        for doc in (exported, source)
    ]
    assert without_image[0] == without_image[1]  # the export names images by item id


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda doc: doc["briefs"][0].update(requirements={"tables": [{"rows": [["a", None]]}]}),
            "study.json $.briefs[0].requirements.tables[0].rows[0][1]: expected a string or a number, got null",
        ),
        (
            lambda doc: doc["items"][0].update(rule={**result_with(2, 0.0), "rule": 0.5}),
            "study.json $.items[0].rule.rule: expected the mean of the scored channels' scores (null when none is scored)",
        ),
    ],
)
def test_bad_requirements_or_rule_in_a_bundle_are_one_line_naming_the_field(
    tmp_path: Path, edit: Any, message: str
) -> None:
    with pytest.raises(ValidationFailed) as error:
        import_kind_study("checklist", tmp_path, slug="bad", briefs=2, edit=edit)
    assert str(error.value) == message
    assert not Study.objects.filter(slug="bad").exists()


@pytest.mark.django_db
def test_rule_score_command_and_the_kind_report(tmp_path: Path) -> None:
    study = import_kind_study("checklist", tmp_path, slug="rules", briefs=4, edit=with_rule)
    out = io.StringIO()
    call_command(
        "rule_score", "rules", "--json", str(tmp_path / "rule.json"), "--bootstrap", "300", stdout=out
    )
    report = json.loads((tmp_path / "rule.json").read_text())
    alpha, beta = report["systems"]
    # Means worked out in PLAN: alpha (1 + 0.75 + 0.75) / 3, beta (0.75 + 0.5 + 1) / 3.
    assert (
        alpha["system"] == "alpha"
        and alpha["rule"]["mean"] == pytest.approx(2.5 / 3)
        and alpha["rule"]["n"] == 3
    )
    assert beta["rule"]["mean"] == pytest.approx(2.25 / 3)
    assert alpha["text"]["mean"] == pytest.approx(2.5 / 3) and alpha["boundary"]["mean"] == pytest.approx(
        2.5 / 3
    )
    assert beta["boundary"]["mean"] == 1.0 and beta["boundary"]["ci"] == [1.0, 1.0]
    assert alpha["table"] == {"mean": None, "ci": [None, None], "n": 0}  # not asked for: left out
    low, high = alpha["rule"]["ci"]
    assert 0.75 <= low <= alpha["rule"]["mean"] <= high <= 1.0  # resamples of three briefs' values
    assert (
        len(report["pages"]) == 6
        and report["pages"][0]["brief"] == "b1"
        and report["pages"][0]["item"] == "b1-alpha"
    )
    assert "alpha (3 outputs): rule 0.833 [" in out.getvalue()
    # The kind report shows the same per system (no page list).
    writer = VoteWriter(study)
    predicate = Predicate.objects.filter(study=study).order_by("position").first()
    assert predicate is not None
    writer.trial(
        writer.assignment(writer.rater("r1")), predicate, label="YES", rationale="seen", response_ms=3000
    )
    computed = kind_report_compute(study=study, resamples=300)
    assert computed.report["rule"]["systems"] == report["systems"] and "pages" not in computed.report["rule"]
    html = kind_report_html(computed)
    assert "Rule score" in html and "0.833" in html


@pytest.mark.django_db
def test_a_study_without_rule_scores_says_what_to_do(tmp_path: Path) -> None:
    study = import_kind_study("checklist", tmp_path, slug="plain", briefs=2)
    with pytest.raises(CommandError) as error:
        call_command("rule_score", "plain", stdout=io.StringIO())
    assert "no rule scores" in str(error.value) and "new_study --requirements FILE" in str(error.value)
    with pytest.raises(ValidationFailed):
        rule_score_report(study=study)


SLIDE = "<body style='margin:0'><h1>Hello</h1><p>world</p></body>"
WIDE = "<body style='margin:0'><h1>Hello</h1><img src='a.svg' style='position:absolute;left:300px;top:100px' width=200 height=50></body>"
SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='200' height='50'><rect width='200' height='50' fill='#06c'/></svg>"
RENDER = json.dumps(
    {"viewport": "400x300", "mode": "canvas", "timeout_s": 6, "max_height": 1000, "settle_ms": 200}
)


@pytest.mark.browser
@pytest.mark.django_db
def test_new_study_scores_html_outputs_against_a_requirements_file(tmp_path: Path) -> None:
    browser_available()
    root = tmp_path / "in"
    for system, html in (("ok", SLIDE), ("wide", WIDE)):
        (root / system).mkdir(parents=True)
        (root / system / "p0.html").write_text(html)
    (root / "wide" / "a.svg").write_text(SVG)
    (tmp_path / "req.json").write_text(
        json.dumps({"p0": {"text": ["hello world"], "canvas": {"width": 400, "height": 300}}})
    )
    (tmp_path / "predicates.csv").write_text(
        "page,system,question\np0,ok,Is it clear?\np0,wide,Is it clear?\n"
    )
    base = [
        "checklist",
        *[f"--system={s}={root / s}" for s in ("ok", "wide")],
        "--option",
        f"render={RENDER}",
        "--predicates",
        str(tmp_path / "predicates.csv"),
        "--requirements",
        str(tmp_path / "req.json"),
        "--slug",
        "ruled",
    ]
    dry = io.StringIO()
    call_command("new_study", *base, "--dry-run", stdout=dry, stderr=io.StringIO())
    assert "rule score: 1 briefs with requirements, 2 rendered outputs scored" in dry.getvalue()
    call_command("new_study", *base, stdout=io.StringIO(), stderr=io.StringIO())
    rule = {
        c.system.external_id: c.rule
        for c in Candidate.objects.filter(page__study__slug="ruled").select_related("system")
    }
    assert rule["ok"]["channels"]["text"]["score"] == 1.0 and rule["ok"]["rule"] == 1.0
    # "wide" shows "Hello" only: the string is missing. Its 200x50 image reaches 100 px past the 400 px
    # canvas: 5,000 of its 10,000 px² outside, over the image and the heading's text run together.
    text, boundary = rule["wide"]["channels"]["text"], rule["wide"]["channels"]["boundary"]
    assert text["score"] == 0.0 and text["missing"] == ["hello world"]
    assert boundary["boxes_outside"] == 1 and 5_000 / 20_000 < boundary["share_outside"] < 5_000 / 10_000
    assert rule["wide"]["rule"] == pytest.approx((0.0 + boundary["score"]) / 2)
    assert Page.objects.get(study__slug="ruled").requirements == {
        "text": ["hello world"],
        "canvas": {"width": 400, "height": 300},
    }
    unknown = [*base[:-4], "--slug", "x", "--option", 'requirements={"p9": {}}', "--dry-run"]
    with pytest.raises(CommandError) as error:
        call_command("new_study", *unknown, stdout=io.StringIO(), stderr=io.StringIO())
    assert str(error.value) == "option requirements: no page 'p9' in the study's files"


@pytest.mark.django_db
def test_the_api_gives_the_command_s_report_to_the_study_s_researchers_only(
    tmp_path: Path, researcher: Any, other_researcher: Any
) -> None:
    from rest_framework.test import APIClient

    import_kind_study(
        "checklist", tmp_path, slug="rules", briefs=4, edit=with_rule, researchers=(researcher,)
    )
    client = APIClient()
    client.force_authenticate(researcher)
    response = client.get("/api/studies/rules/rule-score/?bootstrap=300&seed=5")
    assert response.status_code == 200
    body = response.json()
    assert body["systems"][0]["rule"]["mean"] == pytest.approx(2.5 / 3) and len(body["pages"]) == 6
    assert body["bootstrap"] == {"resamples": 300, "seed": 5, "unit": "brief"}
    assert client.get("/api/studies/rules/rule-score/?bootstrap=0").status_code == 400
    client.force_authenticate(other_researcher)
    assert client.get("/api/studies/rules/rule-score/").status_code in (403, 404)


@pytest.mark.django_db
def test_a_pairwise_reference_bundle_carries_them_too_with_a_failed_render_at_zero(tmp_path: Path) -> None:
    import shutil

    from annotation.services.bundles.importing import study_import_bundle

    folder = tmp_path / "ref"
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "examples" / "bundle", folder)
    doc = json.loads((folder / "study.json").read_text())
    doc["pages"][0]["requirements"] = REQUIREMENTS
    failed = rule_result({"status": "failed", "dom": None}, parse_requirements(REQUIREMENTS)).to_json()
    for candidate in doc["candidates"]:
        if candidate["page"] == "e00":
            candidate["rule"] = failed if candidate["system"] == "gamma" else result_with(2, 0.0)
            if candidate["system"] == "gamma":
                candidate.update(rendered=False, image=None, media=[])
    (folder / "study.json").write_text(json.dumps(doc))
    study = study_import_bundle(path=folder)
    assert Page.objects.get(study=study, external_id="e00").requirements == REQUIREMENTS
    report = rule_score_report(study=study, resamples=200)
    assert [(s["system"], s["rule"]["mean"], s["rule"]["n"]) for s in report["systems"]] == [
        ("alpha", 1.0, 1),
        ("beta", 1.0, 1),
        ("gamma", 0.0, 1),  # the failed render: an explicit 0
    ]
    exported = json.loads(
        (study_export_bundle(study=study, path=tmp_path / "out") / "study.json").read_text()
    )
    assert exported["pages"][0]["requirements"] == REQUIREMENTS and "requirements" not in exported["pages"][1]
    assert [c.get("rule") for c in exported["candidates"][:3]] == [
        result_with(2, 0.0),
        result_with(2, 0.0),
        failed,
    ]
    assert "rule" not in exported["candidates"][3]


def test_an_upload_s_requirements_json_is_the_requirements_option(tmp_path: Path) -> None:
    from annotation.services.new_study.uploads import _with_requirements_file

    (tmp_path / "requirements.json").write_text(json.dumps({"p0": REQUIREMENTS}))
    assert _with_requirements_file(tmp_path, {"slug": "s"}, name="up.zip") == {
        "slug": "s",
        "requirements": {"p0": REQUIREMENTS},
    }
    with pytest.raises(ValidationFailed) as error:
        _with_requirements_file(tmp_path, {"requirements": {}}, name="up.zip")
    assert (
        str(error.value)
        == "up.zip/requirements.json: the requirements are given twice: in this file and in the options"
    )
    (tmp_path / "requirements.json").write_text("{")
    with pytest.raises(ValidationFailed) as error:
        _with_requirements_file(tmp_path, {}, name="up.zip")
    assert str(error.value).startswith("up.zip/requirements.json:1:")


def test_rule_score_over_render_folders_with_no_study(tmp_path: Path) -> None:
    """``rule_score --requirements FILE --system NAME=FOLDER``: render_pages' JSONs scored; a page with
    no JSON in a system's folder is its failed render (0)."""
    (tmp_path / "req.json").write_text(
        json.dumps({"p1": {"text": ["hello", "world"]}, "p2": {"text": ["hello"]}})
    )
    for system, pages in (("alpha", {"p1": "hello world", "p2": "hello"}), ("beta", {"p1": "hello"})):
        (tmp_path / system).mkdir()
        for page, text in pages.items():
            record = {"status": "ok", "dom": {"visible_text": text, "truncated": False}}
            (tmp_path / system / f"{page}.json").write_text(json.dumps(record))
    out = io.StringIO()
    call_command(
        "rule_score",
        "--requirements",
        str(tmp_path / "req.json"),
        f"--system=alpha={tmp_path / 'alpha'}",
        f"--system=beta={tmp_path / 'beta'}",
        "--json",
        str(tmp_path / "out.json"),
        "--bootstrap",
        "200",
        stdout=out,
    )
    report = json.loads((tmp_path / "out.json").read_text())
    means = {s["system"]: s["rule"]["mean"] for s in report["systems"]}
    assert means == {"alpha": 1.0, "beta": pytest.approx(0.25)}  # beta: (0.5 + 0) / 2
    assert [p.get("missing", False) for p in report["pages"]] == [False, False, False, True]
    assert "folders: 4 outputs of 2 briefs scored" in out.getvalue()
    with pytest.raises(CommandError) as error:
        call_command(
            "rule_score", "--requirements", str(tmp_path / "req.json"), "--system=alpha", stdout=io.StringIO()
        )
    assert "--system" in str(error.value) and "NAME=FOLDER" in str(error.value)
    with pytest.raises(CommandError) as error:
        call_command("rule_score", stdout=io.StringIO())
    assert "give a study's slug, or --requirements FILE" in str(error.value)
