"""Study REST API and researcher pages (docs/protocol.md "Files" bundles): personas, scoping, upload,
download."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Study
from annotation.services.bundles.importing import study_import_bundle
from tests.annotation.test_bundles import copy_bundle, edit_doc, snapshot, zip_folder


@pytest.fixture
def example_zip(tmp_path: Path, examples_dir: Path) -> Path:
    return zip_folder(examples_dir / "bundle", tmp_path / "example.zip")


@pytest.fixture
def example_study(db: None, examples_dir: Path, researcher: Any) -> Study:
    return study_import_bundle(path=examples_dir / "bundle", user=researcher)


def api(user: Any | None = None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def upload(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="application/zip")


# --- REST: reading ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_list_is_scoped_to_the_researchers_studies(example_study: Study, researcher: Any, other_researcher: Any,
                                                   admin_user: Any) -> None:
    own = api(researcher).get("/api/studies/")
    assert own.status_code == 200
    assert [s["slug"] for s in own.json()["results"]] == ["example"]
    assert api(other_researcher).get("/api/studies/").json()["results"] == []
    assert [s["slug"] for s in api(admin_user).get("/api/studies/").json()["results"]] == ["example"]


@pytest.mark.django_db
def test_detail_and_lists(example_study: Study, researcher: Any) -> None:
    client = api(researcher)
    detail = client.get("/api/studies/example/").json()
    assert detail["counts"] == {"pages": 3, "systems": 3, "candidates": 9, "failed_renders": 1, "comparisons": 3,
                                "comparisons_by_set": {"human": 2, "deployment": 1}}
    assert [a["id"] for a in detail["axes"]] == ["GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION", "TABLE"]
    systems = client.get("/api/studies/example/systems/").json()["results"]
    assert [(s["id"], s["name"], s["candidates"], s["failed_renders"]) for s in systems] == [
        ("alpha", "Alpha Parser v2", 3, 0), ("beta", "Beta Render 7B", 3, 0), ("gamma", "Gamma Doc Large", 3, 1)]
    pages = client.get("/api/studies/example/pages/").json()["results"]
    assert [p["id"] for p in pages] == ["e00", "e01", "e02"] and pages[0]["targets"][0]["axis"] == "TABLE"
    comparisons = client.get("/api/studies/example/comparisons/").json()["results"]
    assert [(c["id"], c["page"], c["a"], c["b"], c["set"]) for c in comparisons] == [
        ("c1", "e00", "alpha", "beta", "human"), ("c2", "e01", "gamma", "alpha", "human"),
        ("c3", "e02", "beta", "alpha", "deployment")]
    deployment = client.get("/api/studies/example/comparisons/?set=deployment").json()["results"]
    assert [c["id"] for c in deployment] == ["c3"]
    assert client.get("/api/studies/example/comparisons/?set=pilot").status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize("suffix", ["", "export/", "systems/", "pages/", "comparisons/"])
def test_personas_cannot_reach_another_study(example_study: Study, suffix: str, other_researcher: Any,
                                             rater_user: Any) -> None:
    url = f"/api/studies/example/{suffix}"
    assert api(other_researcher).get(url).status_code == 404  # a study of someone else does not exist
    assert api(rater_user).get(url).status_code == 403
    assert api().get(url).status_code in (401, 403)
    assert api(other_researcher).get("/api/studies/no-such-study/").status_code == 404


@pytest.mark.django_db
def test_raters_and_anonymous_cannot_list_or_import(rater_user: Any, example_zip: Path) -> None:
    assert api(rater_user).get("/api/studies/").status_code == 403
    assert api().get("/api/studies/").status_code in (401, 403)
    assert api(rater_user).post("/api/studies/import/", {"file": upload(example_zip)}, format="multipart").status_code == 403
    assert api().post("/api/studies/import/", {"file": upload(example_zip)}, format="multipart").status_code in (401, 403)
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_token_authentication(researcher: Any, example_study: Study) -> None:
    token = Token.objects.create(user=researcher)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get("/api/studies/example/").status_code == 200
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert client.get("/api/studies/example/").status_code in (401, 403)


# --- REST: import and export -----------------------------------------------------------------


@pytest.mark.django_db
def test_api_import_creates_the_study_for_the_uploader(researcher: Any, other_researcher: Any, example_zip: Path) -> None:
    response = api(researcher).post("/api/studies/import/", {"file": upload(example_zip)}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json() == {"slug": "example", "title": "Example fidelity study"}
    study = Study.objects.get(slug="example")
    assert list(study.researchers.all()) == [researcher]
    assert api(other_researcher).get("/api/studies/example/").status_code == 404
    again = api(researcher).post("/api/studies/import/", {"file": upload(example_zip)}, format="multipart")
    assert again.status_code == 400
    assert again.json() == {"detail": "study.json $.slug: a study with slug 'example' already exists"}


@pytest.mark.django_db
def test_api_import_of_a_bad_bundle_is_400_with_one_line(researcher: Any, tmp_path: Path, examples_dir: Path) -> None:
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d["candidates"][4].update(system="delta"))
    archive = zip_folder(bundle, tmp_path / "bad.zip")
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    response = api(researcher).post("/api/studies/import/", {"file": upload(archive)}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {"detail": "study.json $.candidates[4].system: unknown system 'delta'"}
    assert snapshot(media) == before

    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    response = api(researcher).post("/api/studies/import/", {"file": upload(tmp_path / "junk.zip")}, format="multipart")
    assert response.status_code == 400 and response.json()["detail"].startswith("junk.zip: not a ZIP file")
    response = api(researcher).post("/api/studies/import/", {}, format="multipart")
    assert response.status_code == 400 and response.json()["detail"].startswith("file:")
    assert snapshot(media) == before


@pytest.mark.django_db
def test_api_import_spooled_to_a_temporary_file(researcher: Any, example_zip: Path, settings: Any) -> None:
    """Uploads over FILE_UPLOAD_MAX_MEMORY_SIZE arrive as temporary files; same result."""
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 100
    response = api(researcher).post("/api/studies/import/", {"file": upload(example_zip)}, format="multipart")
    assert response.status_code == 201


@pytest.mark.django_db
def test_api_upload_size_cap(researcher: Any, example_zip: Path, settings: Any) -> None:
    settings.ARBITER_MAX_UPLOAD_BYTES = 1000
    response = api(researcher).post("/api/studies/import/", {"file": upload(example_zip)}, format="multipart")
    assert response.status_code == 400
    assert "over the 1,000-byte limit" in response.json()["detail"]
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_api_export_downloads_a_bundle_that_imports_again(example_study: Study, researcher: Any, examples_dir: Path) -> None:
    response = api(researcher).get("/api/studies/example/export/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert 'filename="example.zip"' in response["Content-Disposition"]
    data = b"".join(response.streaming_content)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        doc = json.loads(archive.read("study.json"))
        assert len(archive.namelist()) == 12
    assert doc == json.loads((examples_dir / "bundle" / "study.json").read_text())


@pytest.mark.django_db
def test_schema_documents_the_study_endpoints(researcher: Any) -> None:
    response = api(researcher).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for path in ("/api/studies/", "/api/studies/import/", "/api/studies/{slug}/", "/api/studies/{slug}/export/",
                 "/api/studies/{slug}/systems/", "/api/studies/{slug}/pages/", "/api/studies/{slug}/comparisons/"):
        assert path in paths
    assert "multipart/form-data" in paths["/api/studies/import/"]["post"]["requestBody"]["content"]


# --- researcher pages ------------------------------------------------------------------------


def logged_in(user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def csrf_token(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.cookies["csrftoken"].value


@pytest.mark.django_db
def test_upload_page_imports_and_redirects(researcher: Any, example_zip: Path) -> None:
    client = logged_in(researcher)
    url = reverse("studies:import")
    page = client.get(url)
    assert b'type="file"' in page.content and b"csrfmiddlewaretoken" in page.content
    token = csrf_token(client, url)
    response = client.post(url, {"bundle": upload(example_zip), "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert response["Location"] == reverse("studies:detail", args=["example"])
    detail = client.get(response["Location"])
    assert detail.status_code == 200
    text = detail.content.decode()
    assert 'id="count-pages">3<' in text and 'id="count-comparisons">3<' in text
    assert "human: 2" in text and "deployment: 1" in text and "GLOBAL_LAYOUT_FIDELITY" in text
    assert reverse("studies:export", args=["example"]) in text


@pytest.mark.django_db
def test_upload_page_without_csrf_is_refused(researcher: Any, example_zip: Path) -> None:
    client = logged_in(researcher)
    response = client.post(reverse("studies:import"), {"bundle": upload(example_zip)})
    assert response.status_code == 403
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_upload_page_shows_the_one_line_error(researcher: Any, tmp_path: Path, examples_dir: Path) -> None:
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d["pages"][0]["targets"][0].update(axis="CHART"))
    archive = zip_folder(bundle, tmp_path / "bad.zip")
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    client = logged_in(researcher)
    url = reverse("studies:import")
    response = client.post(url, {"bundle": upload(archive), "csrfmiddlewaretoken": csrf_token(client, url)})
    assert response.status_code == 400
    assert "study.json $.pages[0].targets[0].axis: unknown axis &#x27;CHART&#x27;" in response.content.decode()
    assert snapshot(media) == before


@pytest.mark.django_db
def test_pages_are_for_researchers_of_the_study(example_study: Study, other_researcher: Any, rater_user: Any,
                                                researcher: Any) -> None:
    detail = reverse("studies:detail", args=["example"])
    export = reverse("studies:export", args=["example"])
    assert logged_in(other_researcher).get(detail).status_code == 404
    assert logged_in(other_researcher).get(export).status_code == 404
    assert logged_in(rater_user).get(detail).status_code == 403
    assert logged_in(rater_user).get(reverse("studies:import")).status_code == 403
    anonymous = Client().get(detail)
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    download = logged_in(researcher).get(export)
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    assert zipfile.is_zipfile(io.BytesIO(b"".join(download.streaming_content)))
