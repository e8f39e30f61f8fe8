"""Bundles of the other study kinds (docs/bundle-kinds.md "Study bundles of the other kinds"): import, export,
round trip, bad input.

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
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
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


# --- variants a reader of docs/protocol.md "Files" / docs/bundle-kinds.md "Study bundles of the other kinds"
# alone may write -------------------------------------


def _imported(bundle: Path, doc: dict[str, Any]) -> Study:
    write_doc(bundle, doc)
    return study_import_bundle(path=bundle)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_empty_reference_keys_are_ignored_and_a_judge_prompt_is_kept(kind: str, tmp_path: Path) -> None:
    original = study_import_bundle(path=FIXTURES / kind)
    bundle = kind_bundle(kind, tmp_path / "bundle")
    doc = read_doc(bundle)
    prompt = "Which image answers the brief better?"
    doc.update(slug=f"{kind}-spec8", axes=[], pages=[], candidates=[], judge_prompt=prompt)
    study = _imported(bundle, doc)

    assert study_content(study) == study_content(original)
    assert (study.judge_prompt, original.judge_prompt) == (prompt, "")
    # The export leaves the empty docs/protocol.md "Files" keys out and keeps the prompt; the fixture's own
    # export has none.
    expected = read_doc(FIXTURES / kind) | {"slug": f"{kind}-spec8", "judge_prompt": prompt}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert exported == expected
    assert "judge_prompt" not in read_doc(study_export_bundle(study=original, path=tmp_path / "original"))


@pytest.mark.django_db
def test_rating_options_may_be_given_at_the_top_level(tmp_path: Path) -> None:
    bundle = kind_bundle("rating", tmp_path / "bundle")
    fixture = read_doc(FIXTURES / "rating")
    doc = read_doc(bundle)
    options = doc.pop("options")
    study = _imported(bundle, doc | options)
    assert study.options == fixture["options"]
    # Exported in the canonical form: the fixture itself.
    assert read_doc(study_export_bundle(study=study, path=tmp_path / "out")) == fixture

    # Split between both places, the rest defaulted.
    doc.update(slug="rating-split", options={"scale": [0, 10]}, dimensions=["colour", "layout"])
    study = _imported(bundle, doc)
    assert study.options == {"scale": [0, 10], "dimensions": ["colour", "layout"], "margin": 0.5}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "split"))
    assert exported["options"] == study.options and "dimensions" not in exported and "scale" not in exported


@pytest.mark.django_db
def test_a_rating_study_without_dimensions_rates_overall(tmp_path: Path) -> None:
    bundle = kind_bundle("rating", tmp_path / "bundle")
    doc = read_doc(bundle)
    doc["options"] = {"scale": [1, 7]}
    study = _imported(bundle, doc)
    assert study.options == {"scale": [1, 7], "dimensions": ["overall"], "margin": 0.5}

    del doc["options"]
    doc["slug"] = "rating-no-options"
    study = _imported(bundle, doc)
    assert study.options == {"scale": [1, 5], "dimensions": ["overall"], "margin": 0.5}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert exported["options"] == {"scale": [1, 5], "dimensions": ["overall"], "margin": 0.5}


@pytest.mark.django_db
def test_checklist_k_may_be_given_at_the_top_level(tmp_path: Path) -> None:
    bundle = kind_bundle("checklist", tmp_path / "bundle")
    doc = read_doc(bundle)
    del doc["options"]
    doc["k"] = 5
    study = _imported(bundle, doc)
    assert study.options == {"k": 5}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert exported == read_doc(FIXTURES / "checklist") | {"options": {"k": 5}}


@pytest.mark.django_db
def test_pairwise_comparisons_in_the_spec8_shape(tmp_path: Path) -> None:
    """``page`` for ``brief``, ``set: human``, system ids for items, and a brief left out: the
    same comparisons as the fixture's canonical ones, exported in the canonical form."""
    fixture = read_doc(FIXTURES / "pairwise")
    bundle = kind_bundle("pairwise", tmp_path / "bundle")
    doc = read_doc(bundle)
    doc["comparisons"] = [
        {"id": "c1", "page": "b1", "a": "alpha", "b": "beta", "set": "human"},
        {"id": "c2", "brief": "b1", "a": "b1-gamma", "b": "alpha"},
        {"id": "c3", "a": "b1-beta", "b": "b1-gamma"},
        {"id": "c4", "page": "b2", "a": "b2-alpha", "b": "beta", "set": "human"},
    ]
    study = _imported(bundle, doc)
    assert study_content(study)["comparisons"] == [
        (c["id"], c["brief"], c["a"], c["b"], "human") for c in fixture["comparisons"]
    ]
    assert read_doc(study_export_bundle(study=study, path=tmp_path / "out")) == fixture


@pytest.mark.django_db
def test_an_item_id_wins_over_a_system_id_of_the_same_name(tmp_path: Path) -> None:
    bundle = kind_bundle("pairwise", tmp_path / "bundle")
    doc = read_doc(bundle)
    assert doc["items"][4] == doc["items"][4] | {"id": "b2-beta", "brief": "b2", "system": "beta"}
    doc["items"][4]["id"] = "alpha"  # an item of system beta, named like system alpha
    doc["comparisons"] = [{"id": "c4", "page": "b2", "a": "alpha", "b": "b2-alpha"}]
    study = _imported(bundle, doc)
    comparison = Comparison.objects.select_related("candidate_a__system").get(study=study)
    a = comparison.candidate_a
    assert (a.external_id, a.system.external_id) == ("alpha", "beta")
    assert study_content(study)["comparisons"] == [("c4", "b2", "alpha", "b2-alpha", "human")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "answers",
    [
        ["yes", "unclear", "no", "", True],
        [True, "Unclear", False, None, "Yes"],
        ["YES", "uNcLeAr", "No", " ", "yes"],
    ],
)
def test_checklist_automatic_answers_in_any_case_or_as_booleans(answers: list[Any], tmp_path: Path) -> None:
    """The fixture's answers are YES, UNCLEAR, NO, none, YES; written any of these ways they import
    the same, stored upper case (blank for none), and export as the fixture."""
    fixture = read_doc(FIXTURES / "checklist")
    assert [p["automatic"] for p in fixture["predicates"]] == ["YES", "UNCLEAR", "NO", None, "YES"]
    bundle = kind_bundle("checklist", tmp_path / "bundle")
    doc = read_doc(bundle)
    for predicate, answer in zip(doc["predicates"], answers, strict=True):
        predicate["automatic"] = answer
    study = _imported(bundle, doc)
    stored = dict(Predicate.objects.filter(study=study).values_list("external_id", "automatic"))
    assert stored == {"p1": "YES", "p2": "UNCLEAR", "p3": "NO", "p4": "", "p5": "YES"}
    assert read_doc(study_export_bundle(study=study, path=tmp_path / "out")) == fixture


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


def _all(*changes: Change) -> Change:
    def change(doc: dict[str, Any]) -> None:
        for one in changes:
            one(doc)

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
    "pairwise: deployment set": ("pairwise", _set("comparisons.0.set", "deployment"),
                                 "study.json $.comparisons[0].set: 'deployment': a pairwise study has no deployment set"),
    "pairwise: unknown set": ("pairwise", _set("comparisons.0.set", "main"), "study.json $.comparisons[0].set: 'main' is not one of human, deployment"),
    "pairwise: page and brief both given": ("pairwise", _set("comparisons.0.page", "b1"),
                                            "study.json $.comparisons[0].page: give the brief once, as 'brief' or as 'page'"),
    "pairwise: unknown page": ("pairwise", _set("comparisons.0", {"id": "c1", "page": "b9", "a": "alpha", "b": "beta"}),
                               "study.json $.comparisons[0].page: unknown brief 'b9'"),
    "pairwise: system with no item in the brief": ("pairwise", _set("comparisons.3.b", "gamma"),
                                                   "study.json $.comparisons[3].b: system 'gamma' has no item in brief 'b2'"),
    "pairwise: system id given by page": ("pairwise", _set("comparisons.3", {"id": "c4", "page": "b2", "a": "alpha", "b": "delta"}),
                                          "study.json $.comparisons[3].b: unknown item 'delta' (nor a system with an item in brief 'b2')"),
    "pairwise: no brief, items of two briefs": ("pairwise", _set("comparisons.0", {"id": "c1", "a": "b1-alpha", "b": "b2-beta"}),
                                                "study.json $.comparisons[0].b: item 'b2-beta' belongs to brief 'b2', not 'b1' (the brief of item 'b1-alpha')"),
    "pairwise: no brief, a system id": ("pairwise", _set("comparisons.0", {"id": "c1", "a": "alpha", "b": "b1-beta"}),
                                        "study.json $.comparisons[0].a: unknown item 'alpha' (a system id needs the comparison's 'brief' or 'page')"),
    "pairwise: non-empty axes": ("pairwise", _set("axes", [{"id": "layout", "scope": "page"}]),
                                 "study.json $.axes: unknown key for kind 'pairwise' unless empty ([]): 'axes' is for pairwise_reference bundles (docs/protocol.md \"Files\")"),
    "pairwise: options are not a pairwise key": ("pairwise", _set("options", {}), "study.json $.options: unknown key for kind 'pairwise'"),
    "pairwise: dimensions are not a pairwise key": ("pairwise", _set("dimensions", ["overall"]), "study.json $.dimensions: unknown key for kind 'pairwise'"),
    "pairwise: judge prompt not a string": ("pairwise", _set("judge_prompt", None), "study.json $.judge_prompt: expected a string, got null"),
    "pairwise: no items": ("pairwise", _set("items", []), "study.json $.items: a study needs at least one item"),
    "pairwise: missing briefs": ("pairwise", _delete("briefs"), "study.json $.briefs: required key is missing (kind 'pairwise')"),
    "pairwise: item without a brief": ("pairwise", _delete("items.0.brief"),
                                       "study.json $.items[0].brief: required key is missing"),
    "rating: brief left out, its id taken": ("rating", _all(_delete("items.0.brief"), _set("briefs.0.id", "b1-alpha"),
                                                            _set("items.1.brief", "b1-alpha")),
                                             "study.json $.items[0].brief: left out, but brief 'b1-alpha' (the item's own id) is taken"),
    "rating: an item joins another image's own brief": ("rating", _all(_delete("items.0.brief"), _set("items.1.brief", "b1-alpha")),
                                                       "study.json $.items[1].brief: 'b1-alpha' is not a brief: item 'b1-alpha' has no brief"),
    "checklist: box object with an unknown key": ("checklist", _set("predicates.0.boxes.0", {"bbox_1000": [1, 2, 3, 4], "colour": "red"}),
                                                  "study.json $.predicates[0].boxes[0].colour: unknown key (expected: bbox_1000, role, label, description)"),
    "checklist: box object without coordinates": ("checklist", _set("predicates.0.boxes.0", {"role": "headline"}),
                                                  "study.json $.predicates[0].boxes[0].bbox_1000: required key is missing"),
    "pairwise: unsafe image path": ("pairwise", _set("items.0.image", "../x.png"), "study.json $.items[0].image: image path '../x.png' contains '..'"),
    "pairwise: image file missing": ("pairwise", _set("items.0.image", "images/none.png"), "study.json $.items[0].image: no file 'images/none.png' in the bundle"),
    # checklist
    "checklist: predicate on unknown item": ("checklist", _set("predicates.2.item", "i9"), "study.json $.predicates[2].item: unknown item 'i9'"),
    "checklist: automatic not an answer": ("checklist", _set("predicates.0.automatic", "MAYBE"),
                                           "study.json $.predicates[0].automatic: 'MAYBE' is not one of YES, NO, UNCLEAR"),
    "checklist: automatic in lower case but not an answer": ("checklist", _set("predicates.0.automatic", "maybe"),
                                                             "study.json $.predicates[0].automatic: 'maybe' is not one of YES, NO, UNCLEAR (any case)"),
    "checklist: automatic is a number": ("checklist", _set("predicates.0.automatic", 1),
                                         'study.json $.predicates[0].automatic: expected "YES", "NO", "UNCLEAR", true, false or null, got a number'),
    "checklist: box outside 0…1000": ("checklist", _set("predicates.0.boxes.0.2", 1200), "study.json $.predicates[0].boxes[0][2]: 1200 is outside 0…1000"),
    "checklist: box not a box": ("checklist", _set("predicates.0.boxes.0", [1, 2, 3]), "study.json $.predicates[0].boxes[0]: expected [x0, y0, x1, y1], got 3 numbers"),
    "checklist: duplicate predicate id": ("checklist", _set("predicates.1.id", "p1"), "study.json $.predicates[1].id: duplicate predicate id 'p1'"),
    "checklist: empty question": ("checklist", _set("predicates.1.question", ""), "study.json $.predicates[1].question: must not be empty"),
    "checklist: empty type": ("checklist", _set("predicates.1.type", ""), "study.json $.predicates[1].type: must not be empty"),
    "checklist: no predicates": ("checklist", _set("predicates", []), "study.json $.predicates: a checklist study needs at least one predicate"),
    "checklist: missing predicates": ("checklist", _delete("predicates"), "study.json $.predicates: required key is missing (kind 'checklist')"),
    "checklist: k is zero": ("checklist", _set("options.k", 0), "study.json $.options.k: raters per predicate must be at least 1, got 0"),
    "checklist: comparisons are not a checklist key": ("checklist", _set("comparisons", []), "study.json $.comparisons: unknown key for kind 'checklist'"),
    "checklist: k in both places": ("checklist", _set("k", 2), "study.json $.k: given both here and in $.options; give 'k' once"),
    "checklist: top-level k is zero": ("checklist", _all(_delete("options"), _set("k", 0)),
                                       "study.json $.k: raters per predicate must be at least 1, got 0"),
    "checklist: dimensions are not a checklist key": ("checklist", _set("dimensions", ["overall"]),
                                                      "study.json $.dimensions: unknown key for kind 'checklist'"),
    "checklist: non-empty pages": ("checklist", _set("pages", [{"id": "p1"}]),
                                   "study.json $.pages: unknown key for kind 'checklist' unless empty ([]): 'pages' is for pairwise_reference bundles"),
    # rating
    "rating: scale reversed": ("rating", _set("options.scale", [5, 1]), "study.json $.options.scale: low (5) must be less than high (1)"),
    "rating: scale of one value": ("rating", _set("options.scale", [1]), "study.json $.options.scale: expected [low, high], got 1 values"),
    "rating: scale not integers": ("rating", _set("options.scale", [1, 5.5]), "study.json $.options.scale[1]: expected an integer, got a number"),
    "rating: scale is a string": ("rating", _set("options.scale", "1-5"), "study.json $.options.scale: expected an array, got a string"),
    "rating: scale too long": ("rating", _set("options.scale", [0, 1000]), "study.json $.options.scale: 1001 points, over the limit of 101"),
    "rating: no dimensions": ("rating", _set("options.dimensions", []), "study.json $.options.dimensions: a rating study needs at least one dimension"),
    "rating: no top-level dimensions": ("rating", _all(_delete("options"), _set("dimensions", [])),
                                        "study.json $.dimensions: a rating study needs at least one dimension"),
    "rating: duplicate dimension": ("rating", _set("options.dimensions", ["a", "a"]), "study.json $.options.dimensions[1]: duplicate dimension 'a'"),
    "rating: margin zero": ("rating", _set("options.margin", 0), "study.json $.options.margin: the equivalence margin must be positive, got 0"),
    "rating: margin a string": ("rating", _set("options.margin", "0.5"), "study.json $.options.margin: expected a number, got a string"),
    "rating: unknown option": ("rating", _set("options.k", 3), "study.json $.options.k: unknown key"),
    "rating: options not an object": ("rating", _set("options", []), "study.json $.options: expected an object, got an array"),
    "rating: margin in both places": ("rating", _set("margin", 0.3), "study.json $.margin: given both here and in $.options; give 'margin' once"),
    "rating: dimensions in both places": ("rating", _set("dimensions", ["overall"]),
                                          "study.json $.dimensions: given both here and in $.options; give 'dimensions' once"),
    "rating: top-level scale reversed": ("rating", _all(_delete("options.scale"), _set("scale", [5, 1])),
                                         "study.json $.scale: low (5) must be less than high (1)"),
    "rating: top-level margin a string": ("rating", _all(_delete("options"), _set("margin", "0.5")),
                                          "study.json $.margin: expected a number, got a string"),
    "rating: k is not a rating key": ("rating", _set("k", 3), "study.json $.k: unknown key for kind 'rating'"),
    "rating: non-empty candidates": ("rating", _set("candidates", [{"page": "b1", "system": "alpha"}]),
                                     "study.json $.candidates: unknown key for kind 'rating' unless empty ([]): 'candidates' is for pairwise_reference bundles"),
    "rating: axes not an array": ("rating", _set("axes", {}), "study.json $.axes: expected an array, got an object"),
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
    _assert_one_line(
        str(caught.value),
        "study.json $.axes: unknown key for kind 'rating' unless empty ([]): 'axes' is for pairwise_reference bundles",
    )
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


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["checklist", "rating"])
def test_checklist_and_rating_images_may_come_without_a_brief(kind: str, tmp_path: Path) -> None:
    """docs/bundle-kinds.md "Study bundles of the other kinds" rates "one image (optionally its brief)": an
    item without ``brief`` (left out or null, with ``briefs`` itself left out) is its own brief, with no text;
    the export writes those briefs out, and export → import → export is identical."""
    bundle = kind_bundle(kind, tmp_path / "bundle")
    doc = read_doc(bundle)
    del doc["briefs"]
    for i, item in enumerate(doc["items"]):
        if i % 2:
            item["brief"] = None
        else:
            del item["brief"]
    study = _imported(bundle, doc | {"slug": f"{kind}-no-briefs"})
    pages = list(Page.objects.filter(study=study).order_by("position").values_list("external_id", "text"))
    assert pages == [(item["id"], "") for item in doc["items"]]
    for candidate in Candidate.objects.filter(page__study=study).select_related("page"):
        assert candidate.page.external_id == candidate.external_id
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert exported["briefs"] == [{"id": item["id"], "text": ""} for item in doc["items"]]
    assert [item["brief"] for item in exported["items"]] == [item["id"] for item in doc["items"]]
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "out", copy)
    write_doc(copy, exported | {"slug": f"{kind}-again"})
    second = study_import_bundle(path=copy)
    assert study_content(second) == study_content(study)
    assert read_doc(study_export_bundle(study=second, path=tmp_path / "out2")) == exported | {"slug": f"{kind}-again"}


@pytest.mark.django_db
def test_checklist_boxes_may_be_written_as_spec2_targets(tmp_path: Path) -> None:
    """A predicate box may be ``{bbox_1000, role?, label?, description?}``
    (docs/protocol.md "The study model"'s target shape): only the coordinates are stored, and the export
    writes the plain list."""
    fixture = read_doc(FIXTURES / "checklist")
    bundle = kind_bundle("checklist", tmp_path / "bundle")
    doc = read_doc(bundle)
    for predicate in doc["predicates"]:
        predicate["boxes"] = [
            {"bbox_1000": box, "role": "element", "label": f"box {j}"} if j % 2 == 0 else box
            for j, box in enumerate(predicate["boxes"])
        ]
    assert any(isinstance(b, dict) for p in doc["predicates"] for b in p["boxes"])
    study = _imported(bundle, doc)
    stored = dict(Predicate.objects.filter(study=study).values_list("external_id", "boxes"))
    assert stored == {p["id"]: p["boxes"] for p in fixture["predicates"]}
    assert read_doc(study_export_bundle(study=study, path=tmp_path / "out")) == fixture


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_kind_bundles_keep_the_scheduling_settings(kind: str, tmp_path: Path) -> None:
    study = study_import_bundle(path=FIXTURES / kind)
    assert "settings" not in read_doc(study_export_bundle(study=study, path=tmp_path / "plain"))
    Study.objects.filter(pk=study.pk).update(seed=5, min_gap=4)
    study.refresh_from_db()
    out = study_export_bundle(study=study, path=tmp_path / "out")
    doc = read_doc(out)
    assert doc["settings"] == {"seed": 5, "hidden_repeats": 6, "min_gap": 4, "neutralize_media": True}
    write_doc(out, doc | {"slug": f"{kind}-again"})
    again = study_import_bundle(path=out)
    assert (again.seed, again.min_gap) == (5, 4)
    assert read_doc(study_export_bundle(study=again, path=tmp_path / "out2")) == doc | {"slug": f"{kind}-again"}


@pytest.mark.django_db
def test_a_checklist_names_its_preference_study_in_its_options_and_exports_it(tmp_path: Path) -> None:
    """docs/bundle-kinds.md: ``options.preference_study`` (or top level) links a pairwise study; export writes it back."""
    checklist = kind_bundle("checklist", tmp_path / "checklist")
    doc = read_doc(checklist)
    doc["preference_study"] = "posters-pairwise"
    write_doc(checklist, doc)
    study = study_import_bundle(path=checklist)
    assert study.options == {"k": 3, "preference_study": "posters-pairwise"}
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert exported["options"] == {"k": 3, "preference_study": "posters-pairwise"}

    doc["preference_study"] = ["not", "a", "slug"]
    doc["slug"] = "checklist-bad"
    write_doc(checklist, doc)
    with pytest.raises(ValidationFailed, match=r"\$\.preference_study"):
        study_import_bundle(path=checklist)
