"""The study's failure rule (docs/protocol.md "Failed renders in the leaderboard"): taken from
``new_study --render-failures``, the upload page and ``POST /api/studies/new/``'s
``render_failures``, kept in ``Study.options["render"]["failure_rule"]``, exported in the bundle and
read back; the study page shows it with each system's failure rate. A study of images whose
``gpt`` lacks page p2 (a failed render) needs no browser."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import Study
from annotation.services.bundles.exporting import study_export_to_temporary_zip
from tests.annotation.test_new_study import fails, folder_args, png, run, zipped

pytestmark = pytest.mark.django_db


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """refs/p0..p3; claude has every page, gpt lacks p2 (its failed render)."""
    root = tmp_path / "in"
    for i in range(4):
        png(root / "refs" / f"p{i}.png", shade=10 * i)
        png(root / "out" / "claude" / f"p{i}.png", shade=10 * i + 2)
        if i != 2:
            png(root / "out" / "gpt" / f"p{i}.png", shade=10 * i + 1)
    return root


def test_the_command_keeps_the_rule_exports_it_and_the_study_page_shows_the_failure_rates(
    folders: Path,
    researcher: Any,
    tmp_path: Path,
) -> None:
    dry = run(*folder_args(folders, "--render-failures", "aescode", "--dry-run"))
    assert "Render failures: aescode rule (in the leaderboards)" in dry
    run(*folder_args(folders, "--render-failures", "aescode", "--researcher", researcher.username))
    study = Study.objects.get(slug="fs")
    assert study.options["render"]["failure_rule"] == "aescode"
    assert study.options["render"]["viewport"] == "1280x720"  # the render settings' defaults beside it

    client = Client()
    client.force_login(researcher)
    page = client.get("/studies/fs/").content.decode()
    assert 'Render failures: <strong id="render-failure-rule">AesCode</strong> rule' in page
    # gpt failed to render 1 of its 4 pages (p2 has no image), claude none.
    assert (
        '<tr data-system="gpt"><td><code>gpt</code></td><td class="num">4</td><td class="num">1</td>'
        '<td class="num">25% (1 of 4)</td></tr>' in page
    )
    assert '<td class="num">0% (0 of 4)</td>' in page

    # The bundle carries the rule; imported back (under another slug) the study has the same one.
    exported = json.loads(zipfile.ZipFile(study_export_to_temporary_zip(study=study)).read("study.json"))
    assert exported["render"]["failure_rule"] == "aescode"
    with zipfile.ZipFile(study_export_to_temporary_zip(study=study)) as archive:
        archive.extractall(tmp_path / "bundle")
    document = json.loads((tmp_path / "bundle" / "study.json").read_text())
    document["slug"] = "fs-again"
    (tmp_path / "bundle" / "study.json").write_text(json.dumps(document))
    call_command("import_study", str(tmp_path / "bundle"), stdout=io.StringIO())
    assert Study.objects.get(slug="fs-again").options["render"] == study.options["render"]


def test_a_study_without_the_flag_follows_ambihtmlbench_and_bad_rules_are_one_line(folders: Path) -> None:
    run(*folder_args(folders, "--option", 'render={"mode": "canvas"}'))
    assert Study.objects.get(slug="fs").options["render"]["failure_rule"] == "ambihtmlbench"
    message = fails(*folder_args(folders, "--slug", "x", "--option", 'render={"failure_rule": "strict"}'))
    assert message == "option render: failure_rule: expected ambihtmlbench or aescode, got 'strict'"
    message = fails(
        *folder_args(
            folders,
            "--slug",
            "y",
            "--render-failures",
            "aescode",
            "--option",
            'render={"failure_rule": "ambihtmlbench"}',
        )
    )
    assert (
        message
        == "--render-failures: the render option's failure_rule is 'ambihtmlbench'; give the rule once"
    )


def test_the_api_and_the_upload_page_take_render_failures(folders: Path, researcher: Any) -> None:
    api = APIClient()
    api.force_authenticate(researcher)
    form = {
        "kind": "pairwise_reference",
        "reference": "refs",
        "slug": "api-rule",
        "render_failures": "aescode",
    }
    made = api.post("/api/studies/new/", {**form, "file": zipped(folders)}, format="multipart")
    assert made.status_code == 201, made.content
    assert Study.objects.get(slug="api-rule").options["render"]["failure_rule"] == "aescode"
    bad = api.post(
        "/api/studies/new/",
        {**form, "slug": "api-bad", "render_failures": "strict", "file": zipped(folders)},
        format="multipart",
    )
    assert bad.status_code == 400 and bad.json()["detail"].startswith("render_failures: ")

    page = Client()
    page.force_login(researcher)
    assert b'<select name="render_failures" id="id_render_failures">' in page.get("/studies/new/").content
    made = page.post(
        "/studies/new/",
        {
            "kind": "pairwise_reference",
            "reference": "refs",
            "slug": "page-rule",
            "render_failures": "aescode",
            "archive": zipped(folders),
        },
    )
    assert made.status_code == 302, made.content.decode()[-500:]
    assert Study.objects.get(slug="page-rule").options["render"]["failure_rule"] == "aescode"
    wrong = page.post(
        "/studies/new/",
        {
            "kind": "pairwise_reference",
            "reference": "refs",
            "slug": "page-bad",
            "render_failures": "nope",
            "archive": zipped(folders),
        },
    )
    assert (
        wrong.status_code == 400
        and b"render_failures: expected ambihtmlbench or aescode, got &#x27;nope&#x27;" in wrong.content
    )
