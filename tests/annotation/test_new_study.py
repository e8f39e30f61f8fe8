"""``new_study`` (issue 29): folders, manifests, --match, dry run, one-line errors, all or nothing,
the upload page and the API (annotation/services/new_study/)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from PIL import Image
from rest_framework.test import APIClient

from annotation.models import Candidate, Comparison, Page, Predicate, StoredImage, Study


def png(path: Path, size: tuple[int, int] = (60, 80), mode: str = "RGB", shade: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    color: Any = shade if mode == "L" else (shade, 100, 200, 255)[: len(mode)]
    Image.new(mode, size, color).save(path)
    return path


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """refs/p0..p3; gpt lacks p2 and has a stray p9; claude has one tall and one RGBA image."""
    root = tmp_path / "in"
    for i in range(4):
        png(root / "refs" / f"p{i}.png", shade=10 * i)
        if i != 2:
            png(root / "out" / "gpt" / f"p{i}.png", shade=10 * i + 1)
        png(root / "out" / "claude" / f"p{i}.png", size=(60, 90) if i == 1 else (60, 80), mode="RGBA" if i == 3 else "RGB",
            shade=10 * i + 2)
    png(root / "out" / "gpt" / "p9.png")
    return root


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("new_study", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def fails(*args: str) -> str:
    with pytest.raises(CommandError) as caught:
        run(*args)
    message = str(caught.value)
    assert "\n" not in message
    return message


def dry_run_stops(*args: str) -> tuple[str, str]:
    """(the report on stdout, the one-line error) of a dry run whose real run would stop: exit 1."""
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("new_study", *args, stdout=out, stderr=io.StringIO())
    message = str(caught.value)
    assert "\n" not in message and message.startswith("a real run would stop: ")
    assert out.getvalue().rstrip().endswith(message)
    return out.getvalue(), message


def folder_args(root: Path, *more: str) -> list[str]:
    return ["pairwise_reference", "--reference", str(root / "refs"), "--system", f"gpt={root / 'out/gpt'}",
            "--system", f"claude={root / 'out/claude'}", "--slug", "fs", *more]


def nothing_written() -> None:
    assert Study.objects.count() == 0 and StoredImage.objects.count() == 0
    assert not any(Path(settings.MEDIA_ROOT).rglob("*.png"))
    archive = Path(settings.ARBITER_BUNDLE_ARCHIVE)
    assert not archive.exists() or not any(archive.iterdir())


# --- folders ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_dry_run_counts_every_problem_and_writes_nothing(folders: Path) -> None:
    report = run(*folder_args(folders), "--dry-run")
    assert "pages: 4 (4 reference images)" in report
    assert "system gpt: 3 images, 1 page missing its image" in report
    assert "system claude: 4 images\n" in report
    assert "pages missing a system's image: 1\n  gpt: p2\n" in report
    assert "stray files: 1\n" in report and "p9.png (no reference image for page 'p9')" in report
    assert "duplicate stems: 0" in report and "not images: 0" in report
    assert "size outliers: 1\n" in report and "claude/p1.png 60 × 90 (most of claude: 60 × 80)" in report
    assert "colour-mode outliers: 1\n" in report and "claude/p3.png RGBA (most of claude: RGB)" in report
    # 4 pages × 2 systems, one failed render; one pair on each page with both systems (3 of 4).
    assert "would create: pages 4, systems 2, images 11, candidates 8, failed renders 1, comparisons 3" in report
    assert report.rstrip().endswith("a real run would import this")
    nothing_written()


@pytest.mark.django_db
def test_folders_import_the_bundle_and_keep_it(folders: Path) -> None:
    out = run(*folder_args(folders, "--option", "title=Folder study", "--option", 'settings={"hidden_repeats": 2}'))
    assert out.splitlines()[0] == "fs"
    study = Study.objects.get(slug="fs")
    assert study.title == "Folder study" and study.hidden_repeats == 2
    assert Page.objects.filter(study=study).count() == 4
    candidates = Candidate.objects.filter(page__study=study)
    assert candidates.count() == 8 and candidates.filter(rendered=False).get().page.external_id == "p2"
    assert Comparison.objects.filter(study=study, set="human").count() == 3
    kept = Path(out.split("bundle kept in ")[1].strip())
    assert kept.parent == Path(settings.ARBITER_BUNDLE_ARCHIVE)
    document = json.loads((kept / "study.json").read_text())
    assert document["slug"] == "fs" and len(document["candidates"]) == 8
    # The kept bundle is exactly what import_study reads.
    document["slug"] = "fs-again"
    (kept / "study.json").write_text(json.dumps(document))
    call_command("import_study", str(kept), stdout=io.StringIO())
    assert Candidate.objects.filter(page__study__slug="fs-again").count() == 8


@pytest.mark.django_db
def test_match_names_the_page_when_file_names_differ(tmp_path: Path) -> None:
    png(tmp_path / "refs" / "page_001_ref.png")
    png(tmp_path / "refs" / "page_002_ref.png")
    png(tmp_path / "a" / "a-page_001.png")
    png(tmp_path / "a" / "a-page_002.png")
    png(tmp_path / "b" / "page_001.b.png")
    (tmp_path / "b" / "readme.md").write_text("not matched, so not read")
    report = run("pairwise_reference", "--reference", str(tmp_path / "refs"), "--system", f"a={tmp_path / 'a'}",
                 "--system", f"b={tmp_path / 'b'}", "--match", r"(?P<page>page_\d+)", "--slug", "m", "--dry-run")
    assert "system a: 2 images\n" in report and "system b: 1 images, 1 page missing its image" in report
    assert "stray files: 1\n" in report and "readme.md (does not match --match)" in report
    run("pairwise_reference", "--reference", str(tmp_path / "refs"), "--system", f"a={tmp_path / 'a'}",
        "--system", f"b={tmp_path / 'b'}", "--match", r"page_(\d+)", "--slug", "m")
    assert sorted(Page.objects.values_list("external_id", flat=True)) == ["001", "002"]


# --- manifests -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_csv_manifest_with_paths_relative_to_it(folders: Path) -> None:
    (folders / "m.csv").write_text(
        "page,reference,system,image\n"
        "p0,refs/p0.png,gpt,out/gpt/p0.png\n"
        "p0,refs/p0.png,claude,out/claude/p0.png\n"
        "p1,refs/p1.png,gpt,out/gpt/p1.png\n"
        "p1,refs/p1.png,claude,\n"
    )
    report = run("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "mc", "--dry-run")
    assert "pages: 2 (2 reference images)" in report and "system claude: 1 images, 1 page missing its image" in report
    run("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "mc", "--comparisons", "none")
    study = Study.objects.get(slug="mc")
    assert Candidate.objects.filter(page__study=study, rendered=True).count() == 3
    assert not Comparison.objects.filter(study=study).exists()


@pytest.mark.django_db
def test_a_manifest_may_name_its_columns_the_usual_other_ways(folders: Path) -> None:
    """``page_id``, ``Reference Path``, ``system_name``, ``image_path`` read as the four columns, and a
    JSONL page id may be a number; a column given twice, or one that is no column, is one line."""
    (folders / "m.csv").write_text(
        "page_id,Reference Path,system_name,image_path\n"
        "p0,refs/p0.png,gpt,out/gpt/p0.png\n"
        "p0,refs/p0.png,claude,out/claude/p0.png\n"
    )
    run("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "aliases")
    assert list(Page.objects.filter(study__slug="aliases").values_list("external_id", flat=True)) == ["p0"]
    rows = [{"id": 7, "reference": "refs/p0.png", "model": "gpt", "path": "out/gpt/p0.png"},
            {"id": 7, "reference": "refs/p0.png", "model": "claude", "path": "out/claude/p0.png"}]
    (folders / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run("pairwise_reference", "--manifest", str(folders / "m.jsonl"), "--slug", "numbered")
    assert list(Page.objects.filter(study__slug="numbered").values_list("external_id", flat=True)) == ["7"]
    (folders / "m.csv").write_text("page,page_id,reference,system,image\np0,p0,refs/p0.png,gpt,out/gpt/p0.png\n")
    assert fails("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "x") == (
        f"{folders / 'm.csv'}:1: columns 'page' and 'page_id' both give 'page'")
    (folders / "m.csv").write_text("page,reference,system,picture\np0,refs/p0.png,gpt,out/gpt/p0.png\n")
    assert fails("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "x") == (
        f"{folders / 'm.csv'}:1: unknown column 'picture' (expected: page, reference, system, image, text)")


@pytest.mark.django_db
def test_jsonl_manifest_of_a_pairwise_study_with_brief_texts(folders: Path) -> None:
    rows = [
        {"page": "b1", "system": "gpt", "image": "out/gpt/p0.png", "text": "A poster for a jazz night."},
        {"page": "b1", "system": "claude", "image": "out/claude/p0.png"},
        {"page": "b2", "system": "gpt", "image": "out/gpt/p1.png", "text": "A bakery's page."},
        {"page": "b2", "system": "claude", "image": "out/claude/p1.png"},
    ]
    (folders / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run("pairwise", "--manifest", str(folders / "m.jsonl"), "--slug", "pj")
    study = Study.objects.get(slug="pj")
    assert dict(Page.objects.filter(study=study).values_list("external_id", "text")) == {
        "b1": "A poster for a jazz night.", "b2": "A bakery's page."}
    assert Comparison.objects.filter(study=study).count() == 2  # the pairwise kind's default: every pair


@pytest.mark.django_db
def test_rating_and_checklist_from_folders(folders: Path, tmp_path: Path) -> None:
    systems = ["--system", f"gpt={folders / 'out/gpt'}", "--system", f"claude={folders / 'out/claude'}"]
    run("rating", *systems, "--slug", "r", "--option", 'options={"scale": [1, 7]}')
    rating = Study.objects.get(slug="r")
    assert rating.options["scale"] == [1, 7] and Candidate.objects.filter(page__study=rating).count() == 8
    predicates = tmp_path / "q.csv"
    predicates.write_text("page,system,question,type\np0,gpt,Is there a headline?,Layout\np1,claude,Is it warm?,\n")
    run("checklist", *systems, "--slug", "c", "--predicates", str(predicates))
    assert sorted(Predicate.objects.filter(study__slug="c").values_list("question", flat=True)) == [
        "Is it warm?", "Is there a headline?"]


# --- one-line errors -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_folder_that_does_not_exist(folders: Path) -> None:
    message = fails("rating", "--system", f"gpt={folders / 'nope'}", "--slug", "x")
    assert message == f"{folders / 'nope'}: no such folder (--system gpt)"


@pytest.mark.django_db
def test_two_systems_with_the_same_name(folders: Path) -> None:
    message = fails("rating", "--system", f"gpt={folders / 'out/gpt'}", "--system", f"gpt={folders / 'out/claude'}",
                    "--slug", "x")
    assert message.startswith(f"{folders / 'out/claude'}: system 'gpt' is given twice")


@pytest.mark.django_db
def test_a_path_out_of_the_manifests_folder(folders: Path, tmp_path: Path) -> None:
    png(tmp_path / "outside.png")
    (folders / "m.csv").write_text("page,reference,system,image\np0,refs/p0.png,gpt,../../outside.png\n")
    message = fails("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "x")
    assert message == f"{folders / 'm.csv'}:2: ../../outside.png: the path climbs out of the manifest's folder"
    (folders / "m.csv").write_text("page,reference,system,image\np0,refs/p0.png,gpt,https://example.org/a.png\n")
    assert "only paths relative to the manifest, s3:// and https:// URLs of the media bucket are read" in fails(
        "pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "x")
    (folders / "m.csv").write_text("page,reference,system,image\np0,refs/p0.png,gpt,s3://bucket/a.png\n")
    assert "s3:// paths are read through the media storage, and it is not S3" in fails(
        "pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "x")
    nothing_written()


@pytest.mark.django_db
def test_a_file_not_named_like_an_image_is_a_stray_file(folders: Path) -> None:
    """Issue 40: a notes.txt in a system folder stopped the real run; it is listed and left out."""
    (folders / "out" / "gpt" / "notes.txt").write_text("hello")
    (folders / "refs" / "README").write_text("hello")
    report = run(*folder_args(folders), "--dry-run")
    assert "not images: 0\n" in report and "a real run would import this" in report
    assert f"{folders / 'out/gpt/notes.txt'} (not an image or HTML by its extension: .png, .jpg, .jpeg, .webp, .html, .htm)" in report
    assert f"{folders / 'refs/README'} (not an image or HTML by its extension" in report
    err = io.StringIO()
    call_command("new_study", *folder_args(folders), stdout=io.StringIO(), stderr=err)
    assert "ignored 3 stray files" in err.getvalue()  # p9.png, notes.txt, README
    assert Page.objects.filter(study__slug="fs").count() == 4


@pytest.mark.django_db
def test_a_file_named_like_an_image_that_is_not_one_still_stops_the_run(folders: Path) -> None:
    (folders / "out" / "gpt" / "notes.png").write_text("hello")
    report, _ = dry_run_stops(*folder_args(folders), "--dry-run")
    assert "not images: 1\n" in report and "notes.png: not a PNG, JPEG or WebP image" in report
    assert fails(*folder_args(folders)) == f"{folders / 'out/gpt/notes.png'}: not a PNG, JPEG or WebP image"
    nothing_written()


@pytest.mark.django_db
def test_a_failed_render_with_a_near_match_gets_the_match_pattern_that_pairs_them(tmp_path: Path) -> None:
    """Issue 40: sysB/page-03.png beside refs/page_03.png was a stray file plus a failed render."""
    root = tmp_path / "in"
    for i in (1, 2, 3):
        png(root / "refs" / f"page_0{i}.png", shade=i)
        png(root / "sysA" / f"page_0{i}.png", shade=i + 1)
        png(root / "sysB" / (f"page-0{i}.png" if i == 3 else f"page_0{i}.png"), shade=i + 2)
    args = ["pairwise_reference", "--reference", str(root / "refs"), "--system", f"sysA={root / 'sysA'}",
            "--system", f"sysB={root / 'sysB'}", "--slug", "near"]
    report = run(*args, "--dry-run")
    hint = (f"sysB: page_03 ({root / 'sysB/page-03.png'} has the same number with another separator; "
            "--match '(?P<page>\\d+)' would pair them (page ids become the numbers))")
    assert hint in report
    pattern = hint.split("--match '", 1)[1].split("'", 1)[0]
    paired = run(*args, "--dry-run", "--match", pattern)
    assert "pages missing a system's image: 0\n" in paired and "stray files: 0\n" in paired
    err = io.StringIO()
    call_command("new_study", *args, stdout=io.StringIO(), stderr=err)
    assert "failed render sysB: page_03: " in err.getvalue() and f"--match '{pattern}'" in err.getvalue()


@pytest.mark.django_db
def test_a_stem_found_twice(folders: Path) -> None:
    png(folders / "out" / "claude" / "p0.webp").write_bytes(
        (lambda b: (Image.new("RGB", (60, 80)).save(b, format="WEBP"), b.getvalue())[1])(io.BytesIO()))
    report, _ = dry_run_stops(*folder_args(folders), "--dry-run")
    assert "duplicate stems: 1\n" in report
    message = fails(*folder_args(folders))
    assert message == (f"{folders / 'out/claude/p0.webp'}: page id 'p0' found twice in one folder "
                       f"(also {folders / 'out/claude/p0.png'})")
    nothing_written()


@pytest.mark.django_db
def test_all_or_nothing_when_the_bundle_validator_refuses(folders: Path) -> None:
    """An option the bundle refuses, a slug in use, a truncated image: nothing is kept."""
    assert "unknown key" in fails(*folder_args(folders, "--option", "bogus=1"))
    nothing_written()
    data = (folders / "out" / "gpt" / "p1.png").read_bytes()
    (folders / "out" / "gpt" / "p1.png").write_bytes(data[: len(data) // 2])
    message = fails(*folder_args(folders))
    assert message.startswith(f"{folders / 'out/gpt/p1.png'}: ") and "cannot be" in message
    nothing_written()


@pytest.mark.django_db
def test_dry_run_stops_where_the_bundle_check_would(folders: Path) -> None:
    """The dry run checks study.json as the import does: it does not promise an import that a
    missing slug, a bad axis or a slug in use would stop."""
    no_slug = [a for a in folder_args(folders, "--dry-run") if a not in ("--slug", "fs")]
    # Issue 40: one line naming --slug, not study.json's $.slug twice.
    expected = '--slug: required: the new study\'s slug, as in --slug my-study (or "slug" in --options)'
    assert fails(*no_slug) == expected and fails(*no_slug[:-1]) == expected
    _, message = dry_run_stops(*folder_args(folders, "--dry-run", "--option", 'axes=[{"name": "x"}]'))
    assert message == "a real run would stop: study.json $.axes[0].id: required key is missing"
    nothing_written()
    run(*folder_args(folders))
    _, message = dry_run_stops(*folder_args(folders, "--dry-run"))
    assert message == "a real run would stop: study.json $.slug: a study with slug 'fs' already exists"


@pytest.mark.django_db
def test_a_page_file_that_is_not_an_image_is_not_counted_as_one(folders: Path) -> None:
    (folders / "out" / "gpt" / "p1.png").write_text("not pixels")
    report, message = dry_run_stops(*folder_args(folders), "--dry-run")
    assert "system gpt: 2 images, 1 page missing its image\n" in report  # p1 is not an image, p2 is missing
    assert "not images: 1\n" in report
    assert "would create: pages 4, systems 2, images 10," in report
    assert message == f"a real run would stop: {folders / 'out/gpt/p1.png'}: not a PNG, JPEG or WebP image"
    nothing_written()


# --- the page and the API --------------------------------------------------------------------


def zipped(root: Path, *, names: tuple[str, ...] = ("refs", "out/gpt", "out/claude")) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            for path in sorted((root / name).iterdir()):
                archive.write(path, f"{Path(name).name}/{path.name}")
    return SimpleUploadedFile("folders.zip", buffer.getvalue(), content_type="application/zip")


@pytest.mark.django_db
def test_api_dry_run_then_create(folders: Path, researcher: Any) -> None:
    client = APIClient()
    client.force_authenticate(researcher)
    form = {"kind": "pairwise_reference", "reference": "refs", "options": json.dumps({"slug": "api-study"})}
    dry = client.post("/api/studies/new/", {**form, "file": zipped(folders), "dry_run": "true"}, format="multipart")
    assert dry.status_code == 200, dry.content
    assert dry.json()["slug"] is None and dry.json()["counts"]["failed_renders"] == 1
    assert "folders.zip/gpt/p9.png (no reference image for page 'p9')" in dry.json()["report"]
    nothing_written()
    made = client.post("/api/studies/new/", {**form, "file": zipped(folders)}, format="multipart")
    assert made.status_code == 201, made.content
    assert made.json()["slug"] == "api-study"
    study = Study.objects.get(slug="api-study")
    assert study.researchers.filter(pk=researcher.pk).exists()
    again = client.post("/api/studies/new/", {**form, "file": zipped(folders)}, format="multipart")
    assert again.status_code == 400 and "already exists" in again.json()["detail"]
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"studies_new" in schema.content


@pytest.mark.django_db
def test_api_refuses_raters(folders: Path, rater_user: Any) -> None:
    client = APIClient()
    client.force_authenticate(rater_user)
    response = client.post("/api/studies/new/", {"kind": "rating", "file": zipped(folders)}, format="multipart")
    assert response.status_code == 403
    nothing_written()


@pytest.mark.django_db
def test_upload_page_dry_run_and_create(folders: Path, researcher: Any) -> None:
    client = Client()
    client.force_login(researcher)
    assert client.get("/studies/new/").status_code == 200
    form = {"kind": "rating", "options": json.dumps({"slug": "page-study", "title": "From the page"})}
    dry = client.post("/studies/new/", {**form, "archive": zipped(folders, names=("out/gpt", "out/claude")), "dry_run": "1"})
    assert dry.status_code == 302 and "/studies/new/runs/" in dry["Location"]
    result = client.get(dry["Location"])
    assert b"system gpt: 4 images" in result.content and b'id="new-study-create"' in result.content
    nothing_written()
    bad = client.post("/studies/new/", {**form, "options": "[1]", "archive": zipped(folders, names=("out/gpt",))})
    assert bad.status_code == 400 and b"options: expected a JSON object of study.json keys" in bad.content
    # The dry run's result makes the study from the same upload: nothing is uploaded again.
    made = client.post(dry["Location"] + "create/")
    assert made.status_code == 302 and made["Location"].endswith("/studies/page-study/")
    again = client.post(dry["Location"] + "create/")  # its upload is taken: not made twice
    assert again.status_code == 302 and b"upload it again" in client.get(again["Location"]).content
    assert Candidate.objects.filter(page__study__slug="page-study").count() == 8


@pytest.mark.django_db
def test_upload_page_takes_a_title_and_suggests_the_slug_from_it(folders: Path, researcher: Any) -> None:
    """Issue 40: a researcher who never wrote a study.json got "study.json $.slug: required key is missing"."""
    client = Client()
    client.force_login(researcher)
    page = client.get("/studies/new/").content.decode()
    assert 'name="title"' in page and 'name="slug"' in page and 'data-slug-from="id_title"' in page
    archive = ("out/gpt", "out/claude")
    nameless = client.post("/studies/new/", {"kind": "rating", "archive": zipped(folders, names=archive), "dry_run": "1"}, follow=True)
    assert b"a real run would stop: slug: required: give the study a slug (or a title to make one from)" in nameless.content
    form = {"kind": "rating", "title": "Table fidelity, March run"}
    dry = client.post("/studies/new/", {**form, "archive": zipped(folders, names=archive), "dry_run": "1"}, follow=True)
    assert dry.status_code == 200 and b"a real run would import this" in dry.content
    made = client.post("/studies/new/", {**form, "archive": zipped(folders, names=archive)})
    assert made.status_code == 302 and made["Location"].endswith("/studies/table-fidelity-march-run/")
    assert Study.objects.get(slug="table-fidelity-march-run").title == "Table fidelity, March run"
    typed = client.post("/studies/new/", {**form, "slug": "mine", "archive": zipped(folders, names=archive)})
    assert typed.status_code == 302 and Study.objects.filter(slug="mine").exists()
    twice = client.post("/studies/new/", {**form, "slug": "x", "options": '{"slug": "y"}', "archive": zipped(folders, names=archive)})
    assert twice.status_code == 400 and b"option &#x27;slug&#x27; is given twice" in twice.content


@pytest.mark.django_db
def test_api_takes_a_title_and_a_slug(folders: Path, researcher: Any) -> None:
    client = APIClient()
    client.force_authenticate(researcher)
    form = {"kind": "rating", "title": "Über study"}
    made = client.post("/api/studies/new/", {**form, "file": zipped(folders, names=("out/gpt", "out/claude"))},
                       format="multipart")
    assert made.status_code == 201, made.content
    assert made.json()["slug"] == "uber-study" and Study.objects.get(slug="uber-study").title == "Über study"
    # The report of a real run says what it made, not that its own study's slug is taken.
    report = made.json()["report"]
    assert report.startswith("new_study rating (created study uber-study)") and "already exists" not in report
    assert report.rstrip().endswith("created: study uber-study")


@pytest.mark.django_db
def test_a_link_leading_out_of_the_manifests_folder(folders: Path, tmp_path: Path) -> None:
    outside = png(tmp_path / "elsewhere" / "secret.png")
    (folders / "out" / "gpt" / "link.png").symlink_to(outside)
    (folders / "m.csv").write_text("page,reference,system,image\np0,refs/p0.png,gpt,out/gpt/link.png\n")
    message = fails("pairwise_reference", "--manifest", str(folders / "m.csv"), "--slug", "x")
    assert message == f"{folders / 'm.csv'}:2: out/gpt/link.png: the path climbs out of the manifest's folder"
    nothing_written()


@pytest.mark.django_db
def test_api_refuses_an_unsafe_zip_entry(researcher: Any) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../escape.png", b"x")
    client = APIClient()
    client.force_authenticate(researcher)
    response = client.post("/api/studies/new/", {"kind": "rating", "file": SimpleUploadedFile("evil.zip", buffer.getvalue())},
                           format="multipart")
    assert response.status_code == 400
    assert response.json()["detail"] == "evil.zip: '../escape.png': unsafe ZIP entry: the path contains '..'"
    nothing_written()


@pytest.mark.django_db
def test_the_real_run_says_how_many_stray_files_it_ignored(folders: Path) -> None:
    err = io.StringIO()
    call_command("new_study", *folder_args(folders), stdout=io.StringIO(), stderr=err)
    assert err.getvalue().strip() == "ignored 1 stray file (new_study --dry-run lists them)"


@pytest.mark.django_db
def test_researcher_option_makes_the_account_see_the_study(folders: Path, researcher: Any) -> None:
    """A study made on the command line is seen on the web only by its researchers (and admins)."""
    message = fails(*folder_args(folders, "--researcher", "nobody-here"))
    assert message.startswith("--researcher: no account named 'nobody-here'")
    nothing_written()
    run(*folder_args(folders, "--researcher", researcher.get_username()))
    study = Study.objects.get(slug="fs")
    assert list(study.researchers.all()) == [researcher]
    client = Client()
    client.force_login(researcher)
    assert client.get("/api/studies/fs/").status_code == 200
    other = folder_args(folders)
    other[other.index("fs")] = "fs-2"
    run(*other)  # without the option: no researcher
    assert not Study.objects.get(slug="fs-2").researchers.exists()


@pytest.mark.django_db
def test_a_link_leading_out_of_a_system_or_reference_folder(folders: Path, tmp_path: Path) -> None:
    """Issue 37 item 5: folder mode refuses links out of the folder, as manifests do."""
    outside = png(tmp_path / "elsewhere" / "secret.png")
    (folders / "out" / "gpt" / "p8.png").symlink_to(outside)
    message = fails(*folder_args(folders))
    assert message == f"{folders / 'out/gpt'}: p8.png: the path climbs out of its folder"
    (folders / "out" / "gpt" / "p8.png").unlink()
    (folders / "refs" / "p8.png").symlink_to(folders / "out" / "gpt" / "p0.png")  # a sibling folder is outside too
    assert fails(*folder_args(folders)) == f"{folders / 'refs'}: p8.png: the path climbs out of its folder"
    nothing_written()
    (folders / "refs" / "p8.png").unlink()
    (folders / "refs" / "p8.png").symlink_to(folders / "refs" / "p0.png")  # inside its own folder: read
    assert "pages: 5 (5 reference images)" in run(*folder_args(folders), "--dry-run")


@pytest.mark.django_db
def test_a_pattern_that_backtracks_is_stopped_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37 item 2: each file name is matched with a time limit, and all of them with a budget."""
    for n in range(28, 31):
        png(tmp_path / "refs" / f"{'a' * n}!.png")
        png(tmp_path / "a" / f"{'a' * n}!.png")
    args = ("pairwise_reference", "--reference", str(tmp_path / "refs"), "--system", f"a={tmp_path / 'a'}", "--slug", "m")
    message = fails(*args, "--match", r"^(a|aa)+$")
    assert message.startswith("--match: the pattern takes too long on the file name 'aaaa")
    monkeypatch.setattr("annotation.services.new_study.inputs.MATCH_SECONDS_TOTAL", 0.0)
    assert fails(*args, "--match", r"(?P<page>a+)") == "--match: matching the file names took over 0 s; simplify the pattern"
    assert fails(*args, "--match", "(").startswith("--match: not a regular expression")


@pytest.mark.django_db
def test_what_a_kind_reads_of_the_files_is_refused_for_the_other_kinds_in_one_line(folders: Path, tmp_path: Path) -> None:
    """The kind's design decides (annotation/kinds/: ``has_reference``, ``new_study_makes``,
    ``takes_predicates``); the messages name the kind, the flag, the option or the manifest line."""
    gpt = f"gpt={folders / 'out/gpt'}"
    assert fails("rating", "--reference", str(folders / "refs"), "--system", gpt, "--slug", "r") == (
        "--reference: a rating study has no reference images"
    )
    assert fails("pairwise_reference", "--system", gpt, "--slug", "r") == (
        "--reference: a pairwise_reference study needs its reference folder"
    )
    assert fails(*folder_args(folders, "--option", "pages=[]")) == (
        "option pages: new_study makes 'pages' from the files; leave it out of the options"
    )
    assert fails("checklist", "--system", gpt, "--slug", "r", "--option", "items=[]") == (
        "option items: new_study makes 'items' from the files; leave it out of the options"
    )
    questions = tmp_path / "questions.csv"
    questions.write_text("page,system,question\np0,gpt,Is it red?\n", encoding="utf-8")
    assert fails("pairwise", "--system", gpt, "--slug", "r", "--predicates", str(questions)) == (
        "--predicates: predicates are for checklist studies, not pairwise"
    )
    manifest = folders / "manifest.csv"
    manifest.write_text("page,reference,system,image\np0,refs/p0.png,gpt,out/gpt/p0.png\n", encoding="utf-8")
    assert fails("rating", "--manifest", str(manifest), "--slug", "r") == (
        f"{manifest}:2: a rating study has no reference images; leave the column empty"
    )
    manifest.write_text("page,system,image\np0,gpt,out/gpt/p0.png\n", encoding="utf-8")
    assert fails("pairwise_reference", "--manifest", str(manifest), "--slug", "r") == (
        f"{manifest}: page 'p0' has no reference image in any row"
    )
    nothing_written()
