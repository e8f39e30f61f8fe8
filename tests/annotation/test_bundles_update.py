"""``import_study --update`` (paper B.5 candidate versions): what it accepts, what it refuses.

A refusal is one line naming what differs, and writes nothing (row counts of every table and the
media folder unchanged), like every import.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.models import Candidate, CandidateVersion, Comparison, Study
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.bundles.update import study_update_bundle
from judges.models import Judge, JudgeOutput
from tests.annotation.test_bundles import copy_bundle, edit_doc, png_bytes, read_doc, snapshot, zip_folder


def _replace_image(bundle: Path, page: str = "e00", system: str = "beta", colour: tuple[int, int, int] = (9, 99, 199)) -> Path:
    name = f"images/{page}-{system}-new.png"
    (bundle / name).write_bytes(png_bytes(color=colour))

    def change(doc: dict[str, Any]) -> None:
        for c in doc["candidates"]:
            if (c["page"], c["system"]) == (page, system):
                c["image"] = name

    return edit_doc(bundle, change)


@pytest.fixture
def imported(examples_dir: Path, tmp_path: Path) -> tuple[Study, Path]:
    original = copy_bundle(examples_dir, tmp_path / "original")
    study = study_import_bundle(path=original)
    return study, copy_bundle(examples_dir, tmp_path / "update")


def _update(bundle: Path) -> str:
    out = io.StringIO()
    call_command("import_study", str(bundle), "--update", stdout=out)
    return out.getvalue().strip()


def _output(study: Study, comparison: str, **fields: Any) -> JudgeOutput:
    judge, _ = Judge.objects.get_or_create(name="j", defaults={"provider": "imported"})
    return JudgeOutput.objects.create(
        judge=judge, comparison=Comparison.objects.get(study=study, external_id=comparison), order="primary", **fields
    )


@pytest.mark.django_db
def test_an_update_replaces_the_changed_candidate_and_keeps_its_versions(imported: tuple[Study, Path]) -> None:
    study, bundle = imported
    old = Candidate.objects.get(page__study=study, page__external_id="e00", system__external_id="beta")
    valid = _output(study, "c1", status="valid", winner="A")
    untouched = _output(study, "c2", status="valid", winner="B")
    edit_doc(_replace_image(bundle), lambda d: d["candidates"][1].update(version_date="2026-12-01", version_note="re-run"))
    assert read_doc(bundle)["candidates"][1]["system"] == "beta"
    assert _update(bundle) == (
        "example: 1 candidate(s) replaced, 1 comparison(s) touched (1 of the human study), 1 outputs superseded"
    )
    new = Candidate.objects.get(pk=old.pk)
    assert new.version == 2 and new.image_id != old.image_id and new.neutralized_image_id != old.neutralized_image_id
    assert list(CandidateVersion.objects.filter(candidate=new).values_list("number", "image_id", "note")) == [
        (1, old.image_id, ""), (2, new.image_id, "re-run")
    ]
    assert JudgeOutput.all_versions.get(pk=valid.pk).superseded is True  # kept
    assert JudgeOutput.objects.filter(pk=valid.pk).count() == 0
    assert JudgeOutput.objects.get(pk=untouched.pk).superseded is False
    # A second update of the same candidate makes version 3 and keeps 1 and 2.
    _replace_image(bundle, colour=(1, 2, 3))
    assert "1 candidate(s) replaced" in _update(bundle)
    assert list(CandidateVersion.objects.filter(candidate=new).values_list("number", flat=True)) == [1, 2, 3]


@pytest.mark.django_db
def test_the_export_carries_the_current_versions_date_and_note(imported: tuple[Study, Path], tmp_path: Path) -> None:
    study, bundle = imported
    edit_doc(_replace_image(bundle), lambda d: d["candidates"][1].update(version_date="2026-12-01", version_note="n"))
    _update(bundle)
    out = study_export_bundle(study=study, path=tmp_path / "export")
    exported = read_doc(out)["candidates"][1]
    assert (exported["system"], exported["version_date"], exported["version_note"]) == ("beta", "2026-12-01", "n")
    # The export of the updated study is itself an update with nothing to change.
    with pytest.raises(CommandError, match="no candidate differs"):
        _update(out)


@pytest.mark.django_db
def test_an_updated_candidate_is_shown_as_a_display_image_and_its_upload_kept(
    imported: tuple[Study, Path], tmp_path: Path
) -> None:
    """SECURITY.md row 16 holds for new versions too: a 2x RGBA upload is shown as 8-bit RGB at the
    page reference's width; the upload is kept (original size and mode) and exported."""
    from PIL import Image

    study, bundle = imported
    page_width = Candidate.objects.get(page__study=study, page__external_id="e00", system__external_id="alpha").image.width
    buffer = io.BytesIO()
    Image.new("RGBA", (page_width * 2, 300), (200, 10, 10, 128)).save(buffer, format="PNG")
    (bundle / "images/e00-beta-2x.png").write_bytes(buffer.getvalue())

    def change(doc: dict[str, Any]) -> None:
        for c in doc["candidates"]:
            if (c["page"], c["system"]) == ("e00", "beta"):
                c["image"] = "images/e00-beta-2x.png"

    _update(edit_doc(bundle, change))
    new = Candidate.objects.select_related("image", "original_image").get(
        page__study=study, page__external_id="e00", system__external_id="beta"
    )
    assert (new.image.width, new.image.mode) == (page_width, "RGB")
    assert (new.original_image.width, new.original_image.mode) == (page_width * 2, "RGBA")
    shown = Image.open(new.image.file.path)
    assert (shown.width, shown.mode) == (page_width, "RGB")
    version = CandidateVersion.objects.get(candidate=new, number=2)
    assert (version.image_id, version.original_image_id) == (new.image_id, new.original_image_id)
    exported = study_export_bundle(study=study, path=tmp_path / "export")
    image = next(c["image"] for c in read_doc(exported)["candidates"] if (c["page"], c["system"]) == ("e00", "beta"))
    assert Image.open(exported / image).size == (page_width * 2, 300)


@pytest.mark.django_db
def test_a_zip_update_and_a_failed_render_that_now_renders(imported: tuple[Study, Path], tmp_path: Path) -> None:
    study, bundle = imported
    (bundle / "images" / "e02-gamma.png").write_bytes(png_bytes(color=(30, 170, 30)))

    def render(doc: dict[str, Any]) -> None:
        for c in doc["candidates"]:
            if (c["page"], c["system"]) == ("e02", "gamma"):
                c.update(image="images/e02-gamma.png", rendered=True)

    edit_doc(bundle, render)
    assert "0 comparison(s) touched" in _update(zip_folder(bundle, tmp_path / "u.zip"))
    candidate = Candidate.objects.get(page__study=study, page__external_id="e02", system__external_id="gamma")
    assert candidate.rendered and candidate.image is not None and candidate.version == 2


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value

    return change


def _drop_comparison(comparison: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: doc.update(comparisons=[c for c in doc["comparisons"] if c["id"] != comparison])


REFUSED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("title", _set("title", "Another"), "$.title: differs from the study's"),
    ("instructions", _set("instructions_md", "x"), "$.instructions_md: differs"),
    ("settings", _set("settings", {"seed": 5}), "$.settings.seed: 5 differs from the study's 20260830"),
    ("axis", _set("axes.0.description", "other"), "$.axes[0]: axis 'GLOBAL_LAYOUT_FIDELITY' differs"),
    ("axis added", lambda d: d["axes"].append({"id": "EXTRA", "scope": "fixed"}), "$.axes: 4 axes, the study has 3"),
    ("system name", _set("systems.1.name", "Renamed"), "$.systems[1]: system 'beta' differs"),
    ("page target", _set("pages.0.targets", []), "$.pages[0].targets: page 'e00': targets differ"),
    ("page meta", _set("pages.1.meta", {"x": 1}), "$.pages[1].meta: page 'e01': meta differ"),
    ("comparison sides", _set("comparisons.0.b", "gamma"), "$.comparisons[0]: comparison 'c1' differs"),
    ("comparison set", _set("comparisons.0.set", "deployment"), "comparison 'c1' differs from the study's (page, a, b, set)"),
    ("new comparison", lambda d: d["comparisons"].append({"id": "c9", "page": "e01", "a": "beta", "b": "gamma",
                                                         "set": "human"}), "comparison 'c9' is not one of the study's"),
    ("human comparison missing", _drop_comparison("c1"), "$.comparisons: comparison 'c1' of the study is missing"),
    ("candidate missing",
     lambda d: d.update(candidates=[c for c in d["candidates"] if (c["page"], c["system"]) != ("e02", "gamma")]),
     "the candidate of page 'e02' and system 'gamma' is missing"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "change", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_an_update_that_changes_anything_but_candidates_is_refused_whole(
    imported: tuple[Study, Path], case: str, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    _, bundle = imported
    _replace_image(bundle)  # a real candidate change as well: the other difference must still refuse it
    edit_doc(bundle, change)
    before = snapshot(Path(settings.MEDIA_ROOT))
    with pytest.raises(CommandError) as info:
        _update(bundle)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert "an update may change candidates only" in text
    assert snapshot(Path(settings.MEDIA_ROOT)) == before


@pytest.mark.django_db
def test_other_refusals_write_nothing(imported: tuple[Study, Path], examples_dir: Path, tmp_path: Path) -> None:
    study, bundle = imported
    before = snapshot(Path(settings.MEDIA_ROOT))
    cases: list[tuple[Path, str]] = []
    # The reference image's pixels changed.
    (bundle / "images" / "e00.png").write_bytes(png_bytes(color=(1, 1, 1)))
    cases.append((bundle, "$.pages[0].image: page 'e00': the reference image differs"))
    # No candidate changed.
    cases.append((copy_bundle(examples_dir, tmp_path / "same"), "no candidate differs from the study's"))
    # Another slug: nothing to update.
    cases.append((edit_doc(copy_bundle(examples_dir, tmp_path / "slug"), _set("slug", "other")),
                  "no study 'other' to update"))
    # A bad version date.
    bad_date = _replace_image(copy_bundle(examples_dir, tmp_path / "date"))
    cases.append((edit_doc(bad_date, _set("candidates.1.version_date", "2026-13-01")), "is not a date (YYYY-MM-DD)"))
    # A candidate in a comparison may not become a failed render (the comparison needs it).
    failed = copy_bundle(examples_dir, tmp_path / "failed")
    cases.append((edit_doc(failed, lambda d: d["candidates"][1].update(image=None, rendered=False, media=[])),
                  "failed to render page 'e00'"))
    for path, message in cases:
        with pytest.raises(CommandError) as info:
            _update(path)
        assert message in str(info.value), (path, str(info.value))
    assert snapshot(Path(settings.MEDIA_ROOT)) == before
    assert not CandidateVersion.objects.exists() and not Candidate.objects.filter(page__study=study, version=2).exists()


@pytest.mark.django_db
def test_an_update_waits_for_judge_calls_running_on_a_touched_comparison(imported: tuple[Study, Path]) -> None:
    study, bundle = imported
    _output(study, "c1", status="pending")
    _replace_image(bundle)
    before = snapshot(Path(settings.MEDIA_ROOT))
    with pytest.raises(CommandError, match=r"1 judge call\(s\) are queued or running on comparisons this update touches"):
        _update(bundle)
    assert snapshot(Path(settings.MEDIA_ROOT)) == before
    # A call on another comparison does not hold it up.
    JudgeOutput.objects.filter(comparison__external_id="c1").update(status="valid", winner="A")
    _output(study, "c2", status="running")
    assert "1 outputs superseded" in _update(bundle)


@pytest.mark.django_db
def test_kind_bundles_have_no_update(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
    kind = next(p for p in sorted(source.iterdir()) if p.is_dir() and json.loads((p / "study.json").read_text())["kind"] == "rating")
    with pytest.raises(CommandError, match="--update takes pairwise_reference bundles"):
        _update(kind)


@pytest.mark.django_db
def test_the_upload_page_updates_a_study_of_its_researcher_only(imported: tuple[Study, Path], tmp_path: Path) -> None:
    study, bundle = imported
    researchers = Group.objects.get_or_create(name="researcher")[0]
    owner = User.objects.create_user("owner", password="pw-owner-123456")
    stranger = User.objects.create_user("stranger", password="pw-stranger-123456")
    for user in (owner, stranger):
        user.groups.add(researchers)
    study.researchers.add(owner)
    archive = zip_folder(_replace_image(bundle), tmp_path / "update.zip").read_bytes()

    client = Client()
    client.force_login(stranger)
    response = client.post("/studies/import/", {"bundle": SimpleUploadedFile("u.zip", archive), "update": "1"})
    assert response.status_code == 400 and "no study &#x27;example&#x27; to update" in response.content.decode()
    assert Candidate.objects.filter(page__study=study, version=2).count() == 0

    client.force_login(owner)
    page = client.get("/studies/import/").content.decode()
    assert 'name="update"' in page
    response = client.post("/studies/import/", {"bundle": SimpleUploadedFile("u.zip", archive), "update": "1"}, follow=True)
    assert response.status_code == 200 and "1 candidate(s) replaced" in response.content.decode()
    assert Candidate.objects.filter(page__study=study, version=2).count() == 1
    # Without the box, the same bundle is a new import and its slug is taken.
    response = client.post("/studies/import/", {"bundle": SimpleUploadedFile("u.zip", archive)})
    assert response.status_code == 400 and "already exists" in response.content.decode()


@pytest.mark.django_db
def test_the_service_returns_what_it_did(imported: tuple[Study, Path]) -> None:
    _, bundle = imported
    _replace_image(bundle, page="e01", system="gamma")
    result = study_update_bundle(path=bundle)
    assert result.replaced == (("e01", "gamma", 2),)
    assert (result.comparisons_touched, result.human_comparisons_touched) == (1, 1)
    assert result.effects == {"outputs_superseded": 0}


@pytest.mark.django_db
def test_the_admin_shows_a_candidates_versions_read_only(imported: tuple[Study, Path], make_user: Any) -> None:
    study, bundle = imported
    admin_client = Client()
    admin_client.force_login(make_user("root", is_staff=True, is_superuser=True))
    edit_doc(_replace_image(bundle), lambda d: d["candidates"][1].update(version_note="second render"))
    _update(bundle)
    candidate = Candidate.objects.get(page__study=study, version=2)
    page = admin_client.get(f"/admin/annotation/candidate/{candidate.pk}/change/")
    assert page.status_code == 200 and "second render" in page.content.decode()


@pytest.mark.django_db
def test_the_rest_import_endpoint_takes_update(imported: tuple[Study, Path], tmp_path: Path, make_user: Any) -> None:
    from rest_framework.test import APIClient

    study, bundle = imported
    owner = make_user("api-owner", role="researcher")
    stranger = make_user("api-stranger", role="researcher")
    study.researchers.add(owner)
    archive = zip_folder(_replace_image(bundle), tmp_path / "u.zip").read_bytes()

    def post(user: Any, **data: Any) -> Any:
        client = APIClient()
        client.force_authenticate(user)
        return client.post("/api/studies/import/", {"file": SimpleUploadedFile("u.zip", archive), **data}, format="multipart")

    refused = post(stranger, update_existing="true")
    assert refused.status_code == 404 and "no study 'example' to update" in refused.json()["detail"]
    done = post(owner, update_existing="true")
    assert done.status_code == 200, done.content
    assert done.json() == {"slug": "example", "replaced": ["e00/beta@v2"], "comparisons_touched": 1,
                           "human_comparisons_touched": 1, "outputs_superseded": 0}
    assert post(owner).status_code == 400  # without update: the slug is taken
