"""Ground truth into a study (issue 48 item 2; docs/protocol.md "Ground truth"): ``new_study --truth
DIR``, the upload's ground-truth folder (page and API), per-page refusals that lose nothing else,
and the bundle round-trip."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import Candidate, CandidateBlocks, Page, PageTruth, Study
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
from tests.annotation.test_new_study import png
from tests.annotation.test_new_study import zipped as new_study_zipped

GOOD = {
    "page": {"width": 60, "height": 80},
    "blocks": [
        {"type": "title", "text": "Results", "bbox": [5, 5, 55, 15]},
        {
            "type": "table",
            "text": "a b",
            "html": "<table><tr><td>a</td><td>b</td></tr></table>",
            "bbox": [5, 20, 55, 60],
        },
    ],
}


def truth_with(**block: Any) -> dict[str, Any]:
    return {
        "page": {"width": 60, "height": 80},
        "blocks": [{"type": "text", "text": "x", "bbox": [1, 1, 10, 10], **block}],
    }


@pytest.fixture
def truth_folders(tmp_path: Path) -> Path:
    """refs/p0..p4 and two systems (PNG); truth/: p0 good, p1 a box outside the page, p2 an unknown
    type, p3 table HTML without cells, p4 not JSON; p9 a page the study does not have."""
    root = tmp_path / "in"
    for i in range(5):
        png(root / "refs" / f"p{i}.png", shade=10 * i)
        png(root / "out" / "gpt" / f"p{i}.png", shade=10 * i + 1)
        png(root / "out" / "claude" / f"p{i}.png", shade=10 * i + 2)
    truth = root / "truth"
    truth.mkdir()
    (truth / "p0.json").write_text(json.dumps(GOOD))
    (truth / "p1.json").write_text(json.dumps(truth_with(bbox=[1, 1, 10, 500])))
    (truth / "p2.json").write_text(json.dumps(truth_with(type="sidebar")))
    (truth / "p3.json").write_text(json.dumps(truth_with(type="table", html="<p>no cells</p>")))
    (truth / "p4.json").write_text("{not json")
    (truth / "p9.json").write_text(json.dumps(GOOD))
    return root


REFUSED = {
    "p1": "truth/p1.json: blocks[0].bbox: outside the page 0..60 x 0..80",
    "p2": "truth/p2.json: blocks[0].type: expected one of",
    "p3": "truth/p3.json: blocks[0].html: the table HTML does not parse into cells",
    "p4": "truth/p4.json: not JSON (line 1, column 2)",
}


def command(root: Path, *extra: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "new_study",
        "pairwise_reference",
        "--reference",
        str(root / "refs"),
        "--system",
        f"gpt={root / 'out' / 'gpt'}",
        "--system",
        f"claude={root / 'out' / 'claude'}",
        "--truth",
        str(root / "truth"),
        "--slug",
        "with-truth",
        *extra,
        stdout=out,
        stderr=err,
    )
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_dry_run_reports_each_refused_page_and_the_real_run_keeps_every_other(truth_folders: Path) -> None:
    report, _ = command(truth_folders, "--dry-run")
    assert "ground truth: 1 of 5 pages (0 rendered from HTML)" in report
    assert "ground truth refused (those pages are left without truth): 4" in report
    for page, reason in REFUSED.items():
        line = next(line for line in report.splitlines() if line.strip().startswith(f"{page}: "))
        assert reason.split(": ", 1)[1] in line and line.strip().startswith(f"{page}: ")
        assert str(truth_folders) in line  # the file is named (its full path on the command line)
    assert "p9.json (ground truth of no page of the study)" in report
    assert "a real run would import this" in report
    assert Study.objects.count() == 0

    _, err = command(truth_folders)
    study = Study.objects.get(slug="with-truth")
    # Nothing else is lost: every page, both systems' candidates and every pair.
    assert Page.objects.filter(study=study).count() == 5
    assert Candidate.objects.filter(page__study=study).count() == 10
    kept = PageTruth.objects.get(page__study=study)
    assert kept.page.external_id == "p0"
    assert kept.blocks["blocks"][1]["html"] == GOOD["blocks"][1]["html"]
    assert kept.blocks["page"] == {"width": 60, "height": 80}
    assert "ground truth refused for 4 pages, left without it" in err
    # Image outputs have no DOM: nothing to score, said so.
    assert "objective scores: 0 candidates scored" in err


@pytest.mark.django_db
def test_truth_is_refused_for_a_kind_without_candidates_of_pages(truth_folders: Path) -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError) as caught:
        call_command(
            "new_study",
            "rating",
            "--system",
            f"gpt={truth_folders / 'out' / 'gpt'}",
            "--truth",
            str(truth_folders / "truth"),
            "--slug",
            "r",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert "--truth" in str(caught.value) and "\n" not in str(caught.value)


def zipped(root: Path) -> SimpleUploadedFile:
    return new_study_zipped(root, names=("refs", "out/gpt", "out/claude", "truth"))


@pytest.mark.django_db
def test_api_upload_with_truth_reports_refused_pages_and_makes_the_study(
    truth_folders: Path, researcher: Any
) -> None:
    client = APIClient()
    client.force_authenticate(researcher)
    form = {
        "kind": "pairwise_reference",
        "reference": "refs",
        "truth": "truth",
        "options": json.dumps({"slug": "api-truth"}),
    }
    dry = client.post(
        "/api/studies/new/", {**form, "file": zipped(truth_folders), "dry_run": "true"}, format="multipart"
    )
    assert dry.status_code == 200, dry.content
    report = dry.json()["report"]
    for reason in REFUSED.values():  # named as uploaded: the archive's name, never a server path
        assert f"folders.zip/{reason}" in report
    assert dry.json()["counts"]["pages_with_truth"] == 1
    # The truth folder is not a system.
    assert "system truth" not in report and dry.json()["counts"]["systems"] == 2
    made = client.post("/api/studies/new/", {**form, "file": zipped(truth_folders)}, format="multipart")
    assert made.status_code == 201, made.content
    study = Study.objects.get(slug="api-truth")
    assert list(PageTruth.objects.filter(page__study=study).values_list("page__external_id", flat=True)) == [
        "p0"
    ]
    assert Candidate.objects.filter(page__study=study).count() == 10


@pytest.mark.django_db
def test_api_truth_field_errors_name_the_field(truth_folders: Path, researcher: Any) -> None:
    client = APIClient()
    client.force_authenticate(researcher)
    missing = client.post(
        "/api/studies/new/",
        {
            "kind": "pairwise_reference",
            "reference": "refs",
            "truth": "nowhere",
            "options": json.dumps({"slug": "x"}),
            "file": zipped(truth_folders),
            "dry_run": "true",
        },
        format="multipart",
    )
    assert missing.status_code == 400 and missing.json()["detail"].startswith("truth: ")
    other_kind = client.post(
        "/api/studies/new/",
        {"kind": "rating", "truth": "truth", "file": zipped(truth_folders), "dry_run": "true"},
        format="multipart",
    )
    assert other_kind.status_code == 400 and other_kind.json()["detail"].startswith("truth: ")


@pytest.mark.django_db
def test_upload_page_has_the_truth_field_and_names_it_in_errors(truth_folders: Path, researcher: Any) -> None:
    client = Client()
    client.force_login(researcher)
    page = client.get("/studies/new/")
    assert b'name="truth"' in page.content and b'id="id_truth_help"' in page.content
    bad = client.post("/studies/new/", {"kind": "rating", "truth": "truth", "archive": zipped(truth_folders)})
    assert bad.status_code == 400 and b"truth: ground truth is scored against" in bad.content
    dry = client.post(
        "/studies/new/",
        {
            "kind": "pairwise_reference",
            "reference": "refs",
            "truth": "truth",
            "options": json.dumps({"slug": "pt"}),
            "archive": zipped(truth_folders),
            "dry_run": "1",
        },
    )
    assert dry.status_code == 302
    result = client.get(dry["Location"]).content.decode()
    assert "ground truth refused (those pages are left without truth): 4" in result
    assert "folders.zip/truth/p2.json: blocks[0].type: expected one of" in result


@pytest.mark.django_db
def test_bundle_round_trip_keeps_truth_and_render_blocks(truth_folders: Path, tmp_path: Path) -> None:
    command(truth_folders)
    study = Study.objects.get(slug="with-truth")
    candidate = Candidate.objects.get(page__study=study, page__external_id="p0", system__external_id="gpt")
    # A render's table need not parse into cells (a role=table grid): kept, as the protocol reads
    # a prediction, where a truth's would be refused.
    render_blocks = {
        "page": {"width": 60.0, "height": 80.0},
        "blocks": [
            {"type": "text", "text": "Results", "bbox": [5.0, 5.0, 55.0, 15.0]},
            {
                "type": "table",
                "text": "a grid",
                "html": '<div role="table">a grid</div>',
                "bbox": [5.0, 20.0, 55.0, 60.0],
            },
        ],
    }
    CandidateBlocks.objects.create(candidate=candidate, blocks=render_blocks)
    bundle = study_export_bundle(study=study, path=tmp_path / "bundle")
    document = json.loads((bundle / "study.json").read_text())
    pages = {p["id"]: p for p in document["pages"]}
    assert "truth" in pages["p0"] and "truth" not in pages["p1"]
    document["slug"] = "with-truth-again"
    (bundle / "study.json").write_text(json.dumps(document))
    again = study_import_bundle(path=bundle)
    assert PageTruth.objects.get(page__study=again).blocks == PageTruth.objects.get(page__study=study).blocks
    kept = CandidateBlocks.objects.get(candidate__page__study=again)
    assert kept.candidate.page.external_id == "p0" and kept.candidate.system.external_id == "gpt"
    assert kept.blocks == render_blocks
    from annotation.services.objective_scores import objective_scores_refresh

    assert objective_scores_refresh(study=again).scored == 1  # scored, its table by its text


@pytest.mark.django_db
def test_a_bundle_with_bad_truth_names_the_field(truth_folders: Path, tmp_path: Path) -> None:
    from annotation.errors import ValidationFailed

    command(truth_folders)
    bundle = study_export_bundle(study=Study.objects.get(slug="with-truth"), path=tmp_path / "bundle")
    document = json.loads((bundle / "study.json").read_text())
    document["slug"] = "bad-truth"
    document["pages"][0]["truth"]["blocks"][0]["bbox"] = [0, 0, 999, 10]
    (bundle / "study.json").write_text(json.dumps(document))
    with pytest.raises(ValidationFailed) as caught:
        study_import_bundle(path=bundle)
    assert "$.pages[0].truth.blocks[0].bbox" in str(caught.value) and "outside the page" in str(caught.value)


@pytest.mark.django_db
def test_truth_files_are_named_by_the_same_match_pattern(tmp_path: Path) -> None:
    root = tmp_path / "in"
    for i in range(2):
        png(root / "refs" / f"ref-{i}.png")
        png(root / "gpt" / f"gpt-{i}.png", shade=3)
    (root / "truth").mkdir()
    (root / "truth" / "truth-1.json").write_text(json.dumps(GOOD))
    (root / "truth" / "notes.json").write_text(json.dumps(GOOD))
    out = io.StringIO()
    call_command(
        "new_study",
        "pairwise_reference",
        "--reference",
        str(root / "refs"),
        "--system",
        f"gpt={root / 'gpt'}",
        "--match",
        r"(?P<page>\d+)",
        "--truth",
        str(root / "truth"),
        "--slug",
        "matched",
        "--dry-run",
        stdout=out,
        stderr=io.StringIO(),
    )
    report = out.getvalue()
    assert "ground truth: 1 of 2 pages" in report
    assert "notes.json (does not match --match)" in report
