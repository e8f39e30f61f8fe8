"""Bundles of the other study kinds (SPEC §11, docs/bundle-kinds.md): import, export, round trip, bad input.

The example bundles are fixtures/bundles/<kind>/; their ``study.json`` is written in the export's
own form (every key, defaults filled in), so an export must reproduce it exactly.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction

from annotation.errors import ValidationFailed
from annotation.models import AuditEvent, Candidate, Comparison, Page, Predicate, Study, System
from annotation.services.bundles import study_export_bundle, study_import_bundle
from tests.annotation.test_bundles import copy_bundle, pixels, read_doc, snapshot, write_doc

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
KINDS = ("pairwise", "checklist", "rating")


def kind_bundle(kind: str, target: Path) -> Path:
    """A writable copy of fixtures/bundles/<kind>."""
    shutil.copytree(FIXTURES / kind, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def study_content(study: Study) -> dict[str, Any]:
    """Everything a kind bundle carries, by external ids and image hashes (no database ids)."""
    candidates = Candidate.objects.filter(page__study=study).select_related("page", "system", "image")
    return {
        "kind": study.kind,
        "title": study.title,
        "instructions_md": study.instructions_md,
        "options": study.options,
        "systems": sorted((s.external_id, s.name) for s in System.objects.filter(study=study)),
        "briefs": sorted((p.external_id, p.text, p.image_id) for p in Page.objects.filter(study=study)),
        "items": sorted(
            (c.external_id, c.page.external_id, c.system.external_id, c.image.sha256 if c.image else None,
             json.dumps(c.metrics, sort_keys=True), c.rendered)
            for c in candidates
        ),
        "predicates": [
            (p.external_id, p.candidate.external_id, p.question, p.boxes, p.automatic, p.question_type)
            for p in Predicate.objects.filter(study=study).select_related("candidate")
        ],
        "comparisons": [
            (c.external_id, c.page.external_id, c.candidate_a.external_id, c.candidate_b.external_id, c.set)
            for c in Comparison.objects.filter(study=study).select_related("page", "candidate_a", "candidate_b")
        ],
    }


# --- import ----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_import_maps_briefs_items_predicates_and_comparisons(kind: str, researcher: Any) -> None:
    doc = json.loads((FIXTURES / kind / "study.json").read_text())
    study = study_import_bundle(path=FIXTURES / kind, user=researcher)

    assert study.kind == kind and study.slug == doc["slug"] and study.title == doc["title"]
    assert study.options == doc.get("options", {})
    pages = list(Page.objects.filter(study=study))
    # A brief is a page with text and no image.
    assert [(p.external_id, p.text, p.image_id, p.position) for p in pages] == [
        (b["id"], b["text"], None, i) for i, b in enumerate(doc["briefs"])
    ]
    candidates = {c.external_id: c for c in Candidate.objects.filter(page__study=study).select_related("page", "system")}
    assert sorted(candidates) == sorted(i["id"] for i in doc["items"])
    for item in doc["items"]:
        c = candidates[item["id"]]
        assert (c.page.external_id, c.system.external_id, c.metrics, c.rendered) == (
            item["brief"], item["system"], item["metrics"], True
        )
        assert c.image is not None and c.neutralized_image is None
        assert pixels(Path(settings.MEDIA_ROOT) / c.image.file.name) == pixels(FIXTURES / kind / item["image"])

    predicates = list(Predicate.objects.filter(study=study).select_related("candidate"))
    assert [(p.external_id, p.candidate.external_id, p.question, p.boxes, p.automatic or None, p.question_type or None)
            for p in predicates] == [
        (p["id"], p["item"], p["question"], p["boxes"], p["automatic"], p.get("type")) for p in doc.get("predicates", [])
    ]
    comparisons = study_content(study)["comparisons"]
    assert comparisons == [(c["id"], c["brief"], c["a"], c["b"], "human") for c in doc.get("comparisons", [])]
    event = AuditEvent.objects.get(action="study.import", study=study)
    assert event.details["items"] == len(doc["items"]) and event.details["kind"] == kind
    assert list(study.researchers.all()) == [researcher]


@pytest.mark.django_db
def test_checklist_fixture_covers_every_automatic_answer_and_an_untagged_predicate() -> None:
    study = study_import_bundle(path=FIXTURES / "checklist")
    rows = Predicate.objects.filter(study=study)
    assert {p.automatic for p in rows} == {"YES", "NO", "UNCLEAR", ""}
    assert "" in {p.question_type for p in rows}
    assert Predicate.objects.get(study=study, external_id="p5").boxes == [[583, 469, 875, 875], [83, 438, 542, 875]]


# --- round trip ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("suffix", ["", ".zip"])
def test_export_reproduces_the_bundle_and_imports_back_the_same_study(kind: str, suffix: str, tmp_path: Path) -> None:
    original = study_import_bundle(path=FIXTURES / kind)
    exported = study_export_bundle(study=original, path=tmp_path / f"export{suffix}")
    if suffix == ".zip":
        folder = tmp_path / "unzipped"
        shutil.unpack_archive(exported, folder)
        exported_folder = folder
    else:
        exported_folder = exported

    # study.json comes back exactly as the fixture (which is written in export form) ...
    exported_doc = read_doc(exported_folder)
    assert exported_doc == read_doc(FIXTURES / kind)
    # ... and every image with the same pixels.
    for item in exported_doc["items"]:
        assert pixels(exported_folder / item["image"]) == pixels(FIXTURES / kind / item["image"])

    # Importing the export (under another slug) gives the same study.
    exported_doc["slug"] = f"{kind}-again"
    write_doc(exported_folder, exported_doc)
    again = study_import_bundle(path=exported_folder)
    assert study_content(again) == study_content(original)
    # Export → import → export is the identity.
    second = study_export_bundle(study=again, path=tmp_path / "second")
    assert read_doc(second) == exported_doc


@pytest.mark.django_db
def test_export_command_writes_a_kind_bundle(tmp_path: Path) -> None:
    study_import_bundle(path=FIXTURES / "rating")
    call_command("export_study", "example-rating", str(tmp_path / "out"))
    assert read_doc(tmp_path / "out")["options"]["dimensions"] == ["aesthetics", "brief_fidelity"]


@pytest.mark.django_db
def test_pairwise_without_comparisons_compares_every_pair_of_each_brief(tmp_path: Path) -> None:
    bundle = kind_bundle("pairwise", tmp_path / "b")
    doc = read_doc(bundle)
    del doc["comparisons"]
    write_doc(bundle, doc)
    study = study_import_bundle(path=bundle)
    assert study_content(study)["comparisons"] == [
        ("b1-1", "b1", "b1-alpha", "b1-beta", "human"),
        ("b1-2", "b1", "b1-alpha", "b1-gamma", "human"),
        ("b1-3", "b1", "b1-beta", "b1-gamma", "human"),
        ("b2-1", "b2", "b2-alpha", "b2-beta", "human"),
    ]
    # An explicit empty list means no comparisons yet.
    doc["comparisons"], doc["slug"] = [], "pairwise-none"
    write_doc(bundle, doc)
    assert Comparison.objects.filter(study=study_import_bundle(path=bundle)).count() == 0


@pytest.mark.django_db
def test_defaults_are_filled_in_and_exported(tmp_path: Path) -> None:
    rating = kind_bundle("rating", tmp_path / "rating")
    doc = read_doc(rating)
    doc["options"] = {"dimensions": ["overall"]}
    for item in doc["items"]:
        del item["metrics"]
    write_doc(rating, doc)
    study = study_import_bundle(path=rating)
    assert study.options == {"scale": [1, 5], "dimensions": ["overall"], "margin": 0.5}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "rating-out"))
    assert exported["options"] == {"scale": [1, 5], "dimensions": ["overall"], "margin": 0.5}
    assert all(item["metrics"] == {} for item in exported["items"])

    checklist = kind_bundle("checklist", tmp_path / "checklist")
    doc = read_doc(checklist)
    del doc["options"]
    for predicate in doc["predicates"]:
        predicate.pop("boxes")
        predicate.pop("automatic")
    write_doc(checklist, doc)
    study = study_import_bundle(path=checklist)
    assert study.options == {"k": 3}
    assert {(p.automatic, json.dumps(p.boxes)) for p in Predicate.objects.filter(study=study)} == {("", "[]")}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "checklist-out"))
    assert exported["options"] == {"k": 3} and all(p["automatic"] is None for p in exported["predicates"])


@pytest.mark.django_db
def test_pairwise_reference_bundles_are_unchanged(examples_dir: Path, tmp_path: Path) -> None:
    study = study_import_bundle(path=examples_dir / "bundle")
    assert study.kind == "pairwise_reference" and Predicate.objects.count() == 0
    out = study_export_bundle(study=study, path=tmp_path / "out")
    assert read_doc(out) == read_doc(examples_dir / "bundle")


@pytest.mark.django_db
def test_predicate_automatic_answer_is_constrained_in_the_database() -> None:
    study = study_import_bundle(path=FIXTURES / "checklist")
    predicate = Predicate.objects.get(study=study, external_id="p1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Predicate.objects.filter(pk=predicate.pk).update(automatic="MAYBE")


# --- bad input -------------------------------------------------------------------------------

Change = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Change:
    """Set a value by a dotted path with list indices: 'items.0.metrics.clip'."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


def _delete(path: str) -> Change:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]

    return change


BAD: dict[str, tuple[str, Change, str]] = {
    # pairwise
    "pairwise: item of unknown brief": ("pairwise", _set("items.1.brief", "b9"), "study.json $.items[1].brief: unknown brief 'b9'"),
    "pairwise: item of unknown system": ("pairwise", _set("items.1.system", "delta"), "study.json $.items[1].system: unknown system 'delta'"),
    "pairwise: duplicate item id": ("pairwise", _set("items.1.id", "b1-alpha"), "study.json $.items[1].id: duplicate item id 'b1-alpha' (first at $.items[0])"),
    "pairwise: two items of one system in a brief": ("pairwise", _set("items.1.system", "alpha"),
                                                     "study.json $.items[1].system: brief 'b1' already has an item of system 'alpha'"),
    "pairwise: comparison across briefs": ("pairwise", _set("comparisons.0.b", "b2-beta"),
                                           "study.json $.comparisons[0].b: item 'b2-beta' belongs to brief 'b2', not 'b1'"),
    "pairwise: comparison of unknown item": ("pairwise", _set("comparisons.0.a", "b1-delta"), "study.json $.comparisons[0].a: unknown item 'b1-delta'"),
    "pairwise: comparison of unknown brief": ("pairwise", _set("comparisons.0.brief", "b9"), "study.json $.comparisons[0].brief: unknown brief 'b9'"),
    "pairwise: comparison of an item with itself": ("pairwise", _set("comparisons.0.b", "b1-alpha"),
                                                    "study.json $.comparisons[0].b: a comparison needs two different items"),
    "pairwise: reversed duplicate pair": ("pairwise", _set("comparisons.1", {"id": "c9", "brief": "b1", "a": "b1-beta", "b": "b1-alpha"}),
                                          "study.json $.comparisons[1]: duplicate pair 'b1-beta'/'b1-alpha' (first at $.comparisons[0]"),
    "pairwise: metric is a string": ("pairwise", _set("items.0.metrics.clip", "high"), "study.json $.items[0].metrics.clip: expected a number, got a string"),
    "pairwise: metric is a boolean": ("pairwise", _set("items.0.metrics.clip", True), "study.json $.items[0].metrics.clip: expected a number, got a boolean"),
    "pairwise: metrics is a list": ("pairwise", _set("items.0.metrics", [0.3]), "study.json $.items[0].metrics: expected an object {name: score}, got an array"),
    "pairwise: empty brief text": ("pairwise", _set("briefs.0.text", " "), "study.json $.briefs[0].text: must not be empty"),
    "pairwise: predicates are not a pairwise key": ("pairwise", _set("predicates", []), "study.json $.predicates: unknown key for kind 'pairwise'"),
    "pairwise: comparison with a set": ("pairwise", _set("comparisons.0.set", "human"), "study.json $.comparisons[0].set: unknown key"),
    "pairwise: no items": ("pairwise", _set("items", []), "study.json $.items: a study needs at least one item"),
    "pairwise: missing briefs": ("pairwise", _delete("briefs"), "study.json $.briefs: required key is missing (kind 'pairwise')"),
    "pairwise: unsafe image path": ("pairwise", _set("items.0.image", "../x.png"), "study.json $.items[0].image: image path '../x.png' contains '..'"),
    "pairwise: image file missing": ("pairwise", _set("items.0.image", "images/none.png"), "study.json $.items[0].image: no file 'images/none.png' in the bundle"),
    # checklist
    "checklist: predicate on unknown item": ("checklist", _set("predicates.2.item", "i9"), "study.json $.predicates[2].item: unknown item 'i9'"),
    "checklist: automatic not an answer": ("checklist", _set("predicates.0.automatic", "MAYBE"),
                                           "study.json $.predicates[0].automatic: 'MAYBE' is not one of YES, NO, UNCLEAR"),
    "checklist: automatic in lower case": ("checklist", _set("predicates.0.automatic", "yes"),
                                           "study.json $.predicates[0].automatic: 'yes' is not one of YES, NO, UNCLEAR"),
    "checklist: automatic is a boolean": ("checklist", _set("predicates.0.automatic", True),
                                          "study.json $.predicates[0].automatic: expected a string, got a boolean"),
    "checklist: box outside 0…1000": ("checklist", _set("predicates.0.boxes.0.2", 1200), "study.json $.predicates[0].boxes[0][2]: 1200 is outside 0…1000"),
    "checklist: box not a box": ("checklist", _set("predicates.0.boxes.0", [1, 2, 3]), "study.json $.predicates[0].boxes[0]: expected [x0, y0, x1, y1], got 3 numbers"),
    "checklist: duplicate predicate id": ("checklist", _set("predicates.1.id", "p1"), "study.json $.predicates[1].id: duplicate predicate id 'p1'"),
    "checklist: empty question": ("checklist", _set("predicates.1.question", ""), "study.json $.predicates[1].question: must not be empty"),
    "checklist: empty type": ("checklist", _set("predicates.1.type", ""), "study.json $.predicates[1].type: must not be empty"),
    "checklist: no predicates": ("checklist", _set("predicates", []), "study.json $.predicates: a checklist study needs at least one predicate"),
    "checklist: missing predicates": ("checklist", _delete("predicates"), "study.json $.predicates: required key is missing (kind 'checklist')"),
    "checklist: k is zero": ("checklist", _set("options.k", 0), "study.json $.options.k: raters per predicate must be at least 1, got 0"),
    "checklist: comparisons are not a checklist key": ("checklist", _set("comparisons", []), "study.json $.comparisons: unknown key for kind 'checklist'"),
    # rating
    "rating: scale reversed": ("rating", _set("options.scale", [5, 1]), "study.json $.options.scale: low (5) must be less than high (1)"),
    "rating: scale of one value": ("rating", _set("options.scale", [1]), "study.json $.options.scale: expected [low, high], got 1 values"),
    "rating: scale not integers": ("rating", _set("options.scale", [1, 5.5]), "study.json $.options.scale[1]: expected an integer, got a number"),
    "rating: scale is a string": ("rating", _set("options.scale", "1-5"), "study.json $.options.scale: expected an array, got a string"),
    "rating: scale too long": ("rating", _set("options.scale", [0, 1000]), "study.json $.options.scale: 1001 points, over the limit of 101"),
    "rating: dimensions missing": ("rating", _delete("options.dimensions"), "study.json $.options.dimensions: required key is missing"),
    "rating: no dimensions": ("rating", _set("options.dimensions", []), "study.json $.options.dimensions: a rating study needs at least one dimension"),
    "rating: duplicate dimension": ("rating", _set("options.dimensions", ["a", "a"]), "study.json $.options.dimensions[1]: duplicate dimension 'a'"),
    "rating: margin zero": ("rating", _set("options.margin", 0), "study.json $.options.margin: the equivalence margin must be positive, got 0"),
    "rating: margin a string": ("rating", _set("options.margin", "0.5"), "study.json $.options.margin: expected a number, got a string"),
    "rating: unknown option": ("rating", _set("options.k", 3), "study.json $.options.k: unknown key"),
    "rating: options missing": ("rating", _delete("options"), "study.json $.options: required key is missing (kind 'rating')"),
    "rating: predicates are not a rating key": ("rating", _set("predicates", []), "study.json $.predicates: unknown key for kind 'rating'"),
    "rating: item of unknown brief": ("rating", _set("items.0.brief", "b7"), "study.json $.items[0].brief: unknown brief 'b7'"),
}


def _assert_one_line(message: str, expected: str) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert expected in message, f"{message!r} does not contain {expected!r}"


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(BAD))
def test_bad_kind_bundle_is_refused_with_one_line_and_nothing_written(name: str, tmp_path: Path) -> None:
    kind, change, expected = BAD[name]
    bundle = kind_bundle(kind, tmp_path / "bundle")
    doc = read_doc(bundle)
    change(doc)
    write_doc(bundle, doc)
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(bundle))
    _assert_one_line(str(caught.value), expected)
    assert snapshot(media) == before
    # The service raises the same line to the web view and the API.
    with pytest.raises(ValidationFailed) as direct:
        study_import_bundle(path=bundle)
    assert str(direct.value) == str(caught.value)
    assert snapshot(media) == before


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_image_refuses_the_whole_kind_bundle(kind: str, tmp_path: Path) -> None:
    """The last image is bad: the earlier ones were already cleaned and staged, yet nothing is kept."""
    bundle = kind_bundle(kind, tmp_path / "bundle")
    last = read_doc(bundle)["items"][-1]["image"]
    (bundle / last).write_bytes(b"not a png at all")
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    with pytest.raises(ValidationFailed) as caught:
        study_import_bundle(path=bundle)
    _assert_one_line(str(caught.value), f"{last}: not a PNG, JPEG or WebP image")
    assert snapshot(media) == before


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_a_slug_in_use_refuses_the_kind_bundle(kind: str) -> None:
    study_import_bundle(path=FIXTURES / kind)
    before = snapshot(Path(settings.MEDIA_ROOT))
    with pytest.raises(ValidationFailed, match=r"study.json \$.slug: a study with slug .* already exists"):
        study_import_bundle(path=FIXTURES / kind)
    assert snapshot(Path(settings.MEDIA_ROOT)) == before


@pytest.mark.django_db
def test_a_reference_bundle_declaring_another_kind_names_the_first_foreign_key(examples_dir: Path, tmp_path: Path) -> None:
    bundle = copy_bundle(examples_dir, tmp_path / "bundle")
    doc = read_doc(bundle)
    doc["kind"] = "rating"
    write_doc(bundle, doc)
    before = snapshot(Path(settings.MEDIA_ROOT))
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(bundle))
    _assert_one_line(str(caught.value), "study.json $.axes: unknown key for kind 'rating'")
    assert snapshot(Path(settings.MEDIA_ROOT)) == before


@pytest.mark.django_db
def test_a_kind_bundle_declaring_pairwise_reference_is_refused(tmp_path: Path) -> None:
    bundle = kind_bundle("rating", tmp_path / "bundle")
    doc = read_doc(bundle)
    doc["kind"] = "pairwise_reference"
    write_doc(bundle, doc)
    with pytest.raises(ValidationFailed) as caught:
        study_import_bundle(path=bundle)
    _assert_one_line(str(caught.value), "study.json $.axes: required key is missing")
