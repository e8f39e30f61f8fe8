"""Study bundles (docs/protocol.md "Files"): import, export, round trip, neutralization, command line.

The helpers at the top are shared with test_bundles_bad_input.py and test_studies_api.py.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from PIL import Image, PngImagePlugin

from annotation.errors import ValidationFailed
from annotation.images import NEUTRAL_FILL
from annotation.models import AuditEvent, Axis, Candidate, Comparison, Page, StoredImage, Study, System
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle

# --- shared helpers --------------------------------------------------------------------------


def copy_bundle(examples_dir: Path, target: Path) -> Path:
    """A writable copy of the protocol example bundle."""
    shutil.copytree(examples_dir / "bundle", target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    target.chmod(0o755)
    return target


def read_doc(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "study.json").read_text())


def write_doc(bundle: Path, doc: dict[str, Any]) -> None:
    (bundle / "study.json").write_text(json.dumps(doc, indent=1))


def edit_doc(bundle: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    doc = read_doc(bundle)
    change(doc)
    write_doc(bundle, doc)
    return bundle


def zip_folder(folder: Path, target: Path, *, prefix: str = "") -> Path:
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, prefix + path.relative_to(folder).as_posix())
    return target


def png_bytes(size: tuple[int, int] = (60, 80), color: tuple[int, int, int] = (30, 90, 160), **save: Any) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG", **save)
    return buffer.getvalue()


def snapshot(media: Path) -> tuple[dict[str, int], list[str]]:
    """Row counts of every project table and every path under MEDIA_ROOT."""
    counts = {
        model._meta.label: model.objects.count()
        for model in apps.get_models()
        if model._meta.app_label in {"annotation", "judges", "calibration", "ranking", "auth", "authtoken"}
    }
    files = sorted(p.relative_to(media).as_posix() for p in media.rglob("*")) if media.exists() else []
    return counts, files


def pixels(path: Path) -> tuple[tuple[int, int], bytes]:
    with Image.open(path) as image:
        return image.size, image.convert("RGBA").tobytes()


# --- import ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_import_example_folder_creates_the_study(examples_dir: Path, researcher: Any) -> None:
    study = study_import_bundle(path=examples_dir / "bundle", user=researcher)
    doc = json.loads((examples_dir / "bundle" / "study.json").read_text())

    assert study.slug == "example" and study.title == doc["title"] and study.kind == "pairwise_reference"
    assert study.instructions_md == doc["instructions_md"]
    assert [(a.axis_id, a.scope, a.position) for a in Axis.objects.filter(study=study)] == [
        (a["id"], a["scope"], i) for i, a in enumerate(doc["axes"])
    ]
    assert [(s.external_id, s.name) for s in System.objects.filter(study=study)] == [
        (s["id"], s["name"]) for s in doc["systems"]
    ]
    pages = list(Page.objects.filter(study=study))
    assert [p.external_id for p in pages] == ["e00", "e01", "e02"]
    assert pages[0].targets == doc["pages"][0]["targets"]
    assert pages[0].media == doc["pages"][0]["media"]
    assert pages[0].meta == {"language": "en"}
    assert Candidate.objects.filter(page__study=study).count() == 9
    failed = Candidate.objects.get(page__external_id="e02", system__external_id="gamma")
    assert failed.rendered is False and failed.image is None and failed.neutralized_image is None
    comparisons = list(Comparison.objects.filter(study=study).select_related("candidate_a__system", "candidate_b__system"))
    # A/B order is kept exactly as given.
    assert [(c.external_id, c.page.external_id, c.candidate_a.system.external_id, c.candidate_b.system.external_id, c.set)
            for c in comparisons] == [(c["id"], c["page"], c["a"], c["b"], c["set"]) for c in doc["comparisons"]]
    assert list(study.researchers.all()) == [researcher]
    assert study.created_by == researcher
    event = AuditEvent.objects.get(action="study.import")
    assert event.study == study and event.actor == researcher and event.target == "example"
    assert event.details["candidates"] == 9


@pytest.mark.django_db
def test_images_are_stored_under_content_hashes_without_metadata(tmp_path: Path, examples_dir: Path) -> None:
    bundle = copy_bundle(examples_dir, tmp_path / "b")
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", "alpha-parser-v2 secret")
    (bundle / "images" / "e00-alpha.png").write_bytes(png_bytes(pnginfo=info) + b"<script>trailer</script>")
    study = study_import_bundle(path=bundle)
    media = Path(settings.MEDIA_ROOT)
    stored = Candidate.objects.get(page__study=study, page__external_id="e00", system__external_id="alpha").image
    assert stored is not None
    data = (media / stored.file.name).read_bytes()
    assert b"alpha-parser" not in data and b"<script" not in data
    import hashlib

    assert hashlib.sha256(data).hexdigest() == stored.sha256
    assert stored.file.name == f"images/{stored.sha256[:2]}/{stored.sha256}.png"
    # No file name from the bundle survives anywhere in the media folder.
    # (Names are "images", two hex digits, or a content hash; a hash may well hold "e00".)
    names = [p.name for p in media.rglob("*")]
    assert all(re.fullmatch(r"images|[0-9a-f]{2}|[0-9a-f]{64}\.png", n) for n in names), names
    assert not (media / ".staging").exists()


@pytest.mark.django_db
def test_neutralized_variants_for_every_entry_with_media(examples_dir: Path) -> None:
    study = study_import_bundle(path=examples_dir / "bundle")
    media = Path(settings.MEDIA_ROOT)
    for page in Page.objects.filter(study=study):
        assert page.neutralized_image is not None and page.neutralized_image != page.image
    for candidate in Candidate.objects.filter(page__study=study, rendered=True):
        assert candidate.neutralized_image is not None
    page = Page.objects.get(study=study, external_id="e00")
    assert page.image is not None and page.neutralized_image is not None
    (width, height), _ = pixels(media / page.image.file.name)
    with Image.open(media / page.neutralized_image.file.name) as neutral:
        x0, y0, x1, y1 = page.media[0]["bbox_1000"]
        # Inside the region: the flat neutral fill (away from the outline and the cross).
        cx = round((x0 + (x1 - x0) * 0.5) * width / 1000)
        cy = round((y0 + (y1 - y0) * 0.25) * height / 1000)
        assert neutral.convert("RGB").getpixel((cx, cy)) == NEUTRAL_FILL
        assert neutral.size == (width, height)


@pytest.mark.django_db
def test_entries_without_media_get_no_neutralized_image(tmp_path: Path, examples_dir: Path) -> None:
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d["pages"][1].update(media=[]))
    study = study_import_bundle(path=bundle)
    assert Page.objects.get(study=study, external_id="e01").neutralized_image is None
    assert Page.objects.get(study=study, external_id="e00").neutralized_image is not None


@pytest.mark.django_db
def test_zip_bundle_and_zip_with_one_top_folder(tmp_path: Path, examples_dir: Path) -> None:
    flat = zip_folder(examples_dir / "bundle", tmp_path / "flat.zip")
    assert study_import_bundle(path=flat).slug == "example"
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d.update(slug="nested"))
    nested = zip_folder(bundle, tmp_path / "nested.zip", prefix="my-bundle/")
    study = study_import_bundle(path=nested)
    assert study.slug == "nested" and Page.objects.filter(study=study).count() == 3
    # Identical pixels are stored once and shared between the two studies.
    assert StoredImage.objects.count() == len({*Page.objects.values_list("image", flat=True)} |
                                              {*Page.objects.values_list("neutralized_image", flat=True)} |
                                              {*Candidate.objects.exclude(image=None).values_list("image", flat=True)} |
                                              {*Candidate.objects.exclude(neutralized_image=None).values_list("neutralized_image", flat=True)})


@pytest.mark.django_db
def test_optional_keys_may_be_omitted(tmp_path: Path, examples_dir: Path) -> None:
    def strip(doc: dict[str, Any]) -> None:
        del doc["comparisons"]
        for page in doc["pages"]:
            del page["meta"], page["media"]
            for target in page["targets"]:
                del target["role"], target["description"]
        for candidate in doc["candidates"]:
            del candidate["media"]

    study = study_import_bundle(path=edit_doc(copy_bundle(examples_dir, tmp_path / "b"), strip))
    assert Comparison.objects.filter(study=study).count() == 0
    page = Page.objects.get(study=study, external_id="e00")
    assert page.meta == {} and page.media == [] and page.neutralized_image is None
    assert page.targets == [{"axis": "TABLE", "role": "", "bbox_1000": [66, 450, 934, 650], "description": ""}]


@pytest.mark.django_db
def test_judge_prompt_is_imported_and_exported(tmp_path: Path, examples_dir: Path) -> None:
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d.update(judge_prompt="Compare {A} {B}"))
    study = study_import_bundle(path=bundle)
    assert study.judge_prompt == "Compare {A} {B}"
    out = study_export_bundle(study=study, path=tmp_path / "out")
    assert read_doc(out)["judge_prompt"] == "Compare {A} {B}"


@pytest.mark.django_db
def test_blocks_are_imported_and_exported(tmp_path: Path, examples_dir: Path) -> None:
    """Pages' and candidates' blocks (docs/protocol.md "Blocks from the DOM"): type and box, kept
    as given and written back; an entry without them has none and its export has no key."""
    title = {"type": "title", "bbox_1000": [50, 20.5, 600, 40]}
    table = {"type": "table", "bbox_1000": [50, 450, 950, 650]}

    def add(doc: dict[str, Any]) -> None:
        doc["pages"][0]["blocks"] = [title, table]
        doc["candidates"][0]["blocks"] = [table]

    study = study_import_bundle(path=edit_doc(copy_bundle(examples_dir, tmp_path / "b"), add))
    doc = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert doc["pages"][0]["blocks"] == [title, table] and doc["candidates"][0]["blocks"] == [table]
    assert "blocks" not in doc["pages"][1] and "blocks" not in doc["candidates"][1]
    page = Page.objects.get(study=study, external_id=doc["pages"][0]["id"])
    assert page.blocks == [title, table]
    first = doc["candidates"][0]
    assert Candidate.objects.get(page__study=study, page__external_id=first["page"],
                                 system__external_id=first["system"]).blocks == [table]


def test_settings_defaults_are_the_study_model_defaults() -> None:
    from annotation.services.bundles.reference_format import SETTINGS_DEFAULTS

    assert {key: Study._meta.get_field(key).default for key in SETTINGS_DEFAULTS} == SETTINGS_DEFAULTS


@pytest.mark.django_db
def test_scheduling_settings_survive_export_and_import(tmp_path: Path, examples_dir: Path) -> None:
    """A study's seed, hidden repeats, minimum gap and neutralization go out under ``settings``
    (only when one differs from its default) and come back on import; left out, the defaults."""
    study = study_import_bundle(path=examples_dir / "bundle")
    assert "settings" not in read_doc(study_export_bundle(study=study, path=tmp_path / "plain"))
    Study.objects.filter(pk=study.pk).update(seed=7, hidden_repeats=2, min_gap=3, neutralize_media=False)
    study.refresh_from_db()
    out = study_export_bundle(study=study, path=tmp_path / "changed")
    doc = read_doc(out)
    assert doc["settings"] == {"seed": 7, "hidden_repeats": 2, "min_gap": 3, "neutralize_media": False}
    write_doc(out, doc | {"slug": "example-again"})
    again = study_import_bundle(path=out)
    assert (again.seed, again.hidden_repeats, again.min_gap, again.neutralize_media) == (7, 2, 3, False)
    # A subset is fine; the rest take their defaults.
    partial = edit_doc(copy_bundle(examples_dir, tmp_path / "partial"),
                       lambda d: d.update(slug="partial", settings={"seed": 11}))
    study = study_import_bundle(path=partial)
    assert (study.seed, study.hidden_repeats, study.min_gap, study.neutralize_media) == (11, 6, 20, True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("settings_value", "message"),
    [
        ({"seed": -1}, "study.json $.settings.seed: expected an integer from 0 to 9223372036854775807, got -1"),
        ({"seed": 2**63}, "study.json $.settings.seed: expected an integer from 0 to"),
        ({"min_gap": "3"}, "study.json $.settings.min_gap: expected an integer from 1 to 2147483647"),
        ({"min_gap": 0}, "study.json $.settings.min_gap: expected an integer from 1 to 2147483647, got 0"),
        ({"hidden_repeats": 2**31}, "study.json $.settings.hidden_repeats: expected an integer from 0 to 2147483647"),
        ({"hidden_repeats": True}, "study.json $.settings.hidden_repeats: expected an integer from 0 to 2147483647, got true"),
        ({"neutralize_media": "no"}, "study.json $.settings.neutralize_media: expected true or false"),
        ({"blocks": 3}, "study.json $.settings.blocks: unknown key"),
        ([1], "study.json $.settings: expected an object"),
    ],
)
def test_bad_settings_are_refused_in_one_line(tmp_path: Path, examples_dir: Path, settings_value: Any, message: str) -> None:
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d.update(settings=settings_value))
    with pytest.raises(ValidationFailed) as info:
        study_import_bundle(path=bundle)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not Study.objects.exists()


# --- export and round trip -------------------------------------------------------------------


@pytest.mark.django_db
def test_export_of_the_example_reproduces_its_study_json(tmp_path: Path, examples_dir: Path) -> None:
    study = study_import_bundle(path=examples_dir / "bundle")
    out = study_export_bundle(study=study, path=tmp_path / "export")
    assert read_doc(out) == json.loads((examples_dir / "bundle" / "study.json").read_text())
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == sorted(["study.json", *(f"images/{p.name}" for p in (examples_dir / "bundle" / "images").iterdir())])


@pytest.mark.django_db
def test_export_zip_then_import_gives_the_same_study(tmp_path: Path, examples_dir: Path) -> None:
    original = study_import_bundle(path=examples_dir / "bundle")
    archive = study_export_bundle(study=original, path=tmp_path / "exported.zip")
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        doc = json.loads(z.read("study.json"))
    assert len(names) == len(set(names)) == 12  # study.json + 11 images, each once
    assert all(n == "study.json" or n.startswith("images/") for n in names)
    assert set(doc) == {"slug", "title", "kind", "instructions_md", "axes", "systems", "pages", "candidates", "comparisons"}

    # Import the export under another slug and compare everything but the slug.
    doc["slug"] = "example-copy"
    copy_dir = tmp_path / "copy"
    with zipfile.ZipFile(archive) as z:
        for name in names:
            (copy_dir / name).parent.mkdir(parents=True, exist_ok=True)
            (copy_dir / name).write_bytes(z.read(name))
    write_doc(copy_dir, doc)
    copy = study_import_bundle(path=copy_dir)

    media = Path(settings.MEDIA_ROOT)

    def describe(study: Study) -> list[Any]:
        rows: list[Any] = [study.title, study.kind, study.instructions_md, study.judge_prompt]
        rows += list(Axis.objects.filter(study=study).values_list("axis_id", "scope", "description", "position"))
        rows += list(System.objects.filter(study=study).values_list("external_id", "name", "position"))
        for page in Page.objects.filter(study=study):
            rows.append((page.external_id, page.targets, page.media, page.meta, page.position,
                         pixels(media / page.image.file.name), page.neutralized_image.sha256))
        for c in Candidate.objects.filter(page__study=study).select_related("page", "system"):
            rows.append((c.page.external_id, c.system.external_id, c.rendered, c.media,
                         pixels(media / c.image.file.name) if c.image else None,
                         c.neutralized_image.sha256 if c.neutralized_image else None))
        rows += [(c.external_id, c.page.external_id, c.candidate_a.system.external_id, c.candidate_b.system.external_id, c.set)
                 for c in Comparison.objects.filter(study=study)]
        return rows

    assert describe(copy) == describe(original)
    # Re-encoding the stored pixels gives the same content hashes: no new image files.
    assert set(Page.objects.filter(study=copy).values_list("image__sha256", flat=True)) == set(
        Page.objects.filter(study=original).values_list("image__sha256", flat=True)
    )


@pytest.mark.django_db
def test_export_names_images_neutrally_even_for_awkward_ids(tmp_path: Path, examples_dir: Path) -> None:
    def awkward(doc: dict[str, Any]) -> None:
        doc["systems"][0]["id"] = "org/model..v2"
        for c in doc["candidates"]:
            if c["system"] == "alpha":
                c["system"] = "org/model..v2"
        for c in doc["comparisons"]:
            for side in ("a", "b"):
                if c[side] == "alpha":
                    c[side] = "org/model..v2"

    study = study_import_bundle(path=edit_doc(copy_bundle(examples_dir, tmp_path / "b"), awkward))
    out = study_export_bundle(study=study, path=tmp_path / "out.zip")
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
    assert all(n == "study.json" or (n.startswith("images/") and n.count("/") == 1 and ".." not in n) for n in names)
    # ...and the export imports again.
    with zipfile.ZipFile(out) as z:
        doc = json.loads(z.read("study.json"))
    assert {c["system"] for c in doc["candidates"]} == {"org/model..v2", "beta", "gamma"}


@pytest.mark.django_db
def test_export_refuses_a_non_empty_folder(tmp_path: Path, examples_dir: Path) -> None:
    from annotation.errors import ArbiterError

    study = study_import_bundle(path=examples_dir / "bundle")
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(ArbiterError, match="not empty"):
        study_export_bundle(study=study, path=target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


# --- command line ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_commands_print_the_slug_and_export(tmp_path: Path, examples_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_study", str(examples_dir / "bundle"))
    assert capsys.readouterr().out.strip() == "example"
    assert AuditEvent.objects.get(action="study.import").actor_label == "command line"
    call_command("export_study", "example", str(tmp_path / "e.zip"))
    assert zipfile.is_zipfile(tmp_path / "e.zip")


@pytest.mark.django_db
def test_export_of_an_unknown_slug_is_one_line(tmp_path: Path) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as caught:
        call_command("export_study", "nope", str(tmp_path / "e.zip"))
    assert str(caught.value) == "no study with slug 'nope'"
    assert not (tmp_path / "e.zip").exists()


@pytest.mark.django_db
def test_zip_members_are_read_from_the_archive_never_extracted(
    tmp_path: Path, examples_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a bundle must never be extracted to disk")

    monkeypatch.setattr(zipfile.ZipFile, "extract", refuse)
    monkeypatch.setattr(zipfile.ZipFile, "extractall", refuse)
    (tmp_path / "upload").mkdir()
    archive = zip_folder(examples_dir / "bundle", tmp_path / "upload" / "bundle.zip", prefix="./")
    assert study_import_bundle(path=archive).slug == "example"
    assert [p.name for p in (tmp_path / "upload").iterdir()] == ["bundle.zip"]


@pytest.mark.django_db
@pytest.mark.slow
def test_worker_processes_give_the_same_result_and_the_same_errors(
    tmp_path: Path, examples_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Big imports clean images in worker processes; results and one-line errors are the same."""
    from annotation.errors import ValidationFailed
    from annotation.services.bundles import images as bundle_images

    in_process = study_import_bundle(path=examples_dir / "bundle")
    def hashes(study: Study) -> list[tuple[str, str]]:
        rows = Candidate.objects.filter(page__study=study).values_list("image__sha256", "neutralized_image__sha256")
        return sorted((a or "", b or "") for a, b in rows)

    expected = hashes(in_process)

    monkeypatch.setattr(bundle_images, "PROCESS_POOL_MIN_IMAGES", 0)
    monkeypatch.setattr(bundle_images, "IMAGE_WORKERS", 2)
    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), lambda d: d.update(slug="in-workers"))
    in_workers = study_import_bundle(path=bundle)
    assert hashes(in_workers) == expected

    # A limit overridden in this process reaches the workers; the error is the same one line.
    bad = edit_doc(copy_bundle(examples_dir, tmp_path / "bad"), lambda d: d.update(slug="bad"))
    (bad / "images" / "e01-beta.png").write_bytes(png_bytes(size=(600, 20)))
    settings.ARBITER_IMAGE_MAX_EDGE = 500
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    with pytest.raises(ValidationFailed) as caught:
        study_import_bundle(path=bad)
    assert str(caught.value).startswith("images/e01-beta.png: the image is too large: 600 × 20 pixels")
    assert snapshot(media) == before


@pytest.mark.django_db
def test_schedule_blocks_defaults_to_the_study_settings(tmp_path: Path, examples_dir: Path, admin_user: Any) -> None:
    """A bundle's settings are the defaults of ``schedule_blocks`` and of the schedule API: the
    protocol example (2 schedulable comparisons) cannot hold 6 repeats 20 trials apart, but its settings
    can."""
    from rest_framework.test import APIClient

    from annotation.models import Assignment, Trial

    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"),
                      lambda d: d.update(settings={"seed": 3, "hidden_repeats": 1, "min_gap": 1}))
    study = study_import_bundle(path=bundle)
    out = io.StringIO()
    call_command("schedule_blocks", study.slug, "--blocks", "1", "--block-size", "2", "--raters", "1", stdout=out)
    assert "2 comparisons, 1 planned assignments, 3 trials each" in out.getvalue() and "seed 3;" in out.getvalue()
    assignment = Assignment.objects.get(block__study=study)
    assert Trial.objects.filter(assignment=assignment, is_repeat=True).count() == 1

    other = study_import_bundle(path=edit_doc(bundle, lambda d: d.update(slug="example-api")))
    client = APIClient()
    client.force_authenticate(admin_user)
    r = client.post(f"/api/studies/{other.slug}/schedule/", {"blocks": 1, "block_size": 2, "raters": [1]}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()[0]["seed"] == 3
    assert Trial.objects.filter(assignment__block__study=other).count() == 3
