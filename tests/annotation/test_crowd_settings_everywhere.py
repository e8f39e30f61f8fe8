"""Issue 29 item 2: the crowd settings page's values also go through ``study.json`` (``crowd``),
``PATCH /api/studies/<slug>/`` and ``export_study``, checked by one validator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.errors import ValidationFailed
from annotation.models import RATER_PAGE_DEFAULTS, AuditEvent, Study, rater_page_options
from annotation.services import crowd_settings
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.crowd_settings import (
    CROWD_DEFAULTS,
    CROWD_KEYS,
    CROWD_SETTINGS,
    RATER_PAGE_SETTINGS,
    crowd_settings_clean,
)
from tests.annotation.test_bundle_kinds import FIXTURES, KINDS, kind_bundle
from tests.annotation.test_bundles import copy_bundle, read_doc, write_doc

CROWD = {
    "accepting_participants": False,
    "completion_code": "C0DE42",
    "completion_url": "https://app.prolific.com/submissions/complete?cc={code}",
    "screened_out_url": "https://app.prolific.com/submissions/complete?cc=NOCODE",
    "screened_out_code": "OUT-7",
    "end_comment": True,
    "break_every": 25,
    # The rater page's settings, on the same settings page (issue 30), each off its default.
    "digit_keys": False,
    "axes_from_verdict": False,
    "mark_defaulted_axes": True,
}
ALL_DEFAULTS = {**CROWD_DEFAULTS, **RATER_PAGE_SETTINGS}

# (key, bad value, what the one-line error says)
BAD = [
    ("completion_url", "ftp://example.org/x", "The completion URL must start with https://"),
    ("screened_out_url", "prolific.com/done", "The screened-out URL must start with https://"),
    ("completion_code", "x" * 65, "at most 64 characters"),
    ("completion_code", 12, "expected text, got 12"),
    ("break_every", -1, "Breaks every N trials is a whole number from 0 to 10,000"),
    ("break_every", 10_001, "Breaks every N trials is a whole number from 0 to 10,000"),
    ("break_every", True, "Breaks every N trials is a whole number"),
    ("break_every", "20", "Breaks every N trials is a whole number"),
    ("end_comment", "yes", "expected true or false"),
    ("accepting_participants", None, "expected true or false, got null"),
    ("digit_keys", "no", "expected true or false"),
    ("mark_defaulted_axes", 1, "expected true or false, got 1"),
]


def crowd_of(study: Study) -> dict[str, Any]:
    study.refresh_from_db()
    return {**{name: getattr(study, name) for name in CROWD_SETTINGS}, **rater_page_options(study)}


def test_the_defaults_are_the_models_and_the_settings_are_the_pages_form() -> None:
    assert {name: Study._meta.get_field(name).get_default() for name in CROWD_SETTINGS} == CROWD_DEFAULTS
    template = (Path(__file__).resolve().parents[2] / "templates/annotation/research/study.html").read_text()
    form = template[template.index("crowd-settings") : template.index("Save settings")]
    assert RATER_PAGE_SETTINGS == RATER_PAGE_DEFAULTS
    assert sorted(name for name in CROWD_KEYS if f'name="{name}"' in form) == sorted(CROWD_KEYS)


def test_the_validator_names_the_field_or_the_json_path() -> None:
    assert crowd_settings_clean({"completion_url": "  https://x.org/done  "}) == {"completion_url": "https://x.org/done"}
    with pytest.raises(ValidationFailed) as err:
        crowd_settings_clean({"break_every": -3})
    assert str(err.value).startswith("field 'break_every': ")
    with pytest.raises(ValidationFailed) as err:
        crowd_settings_clean({"break_every": -3}, json_path="$.crowd", filename="study.json")
    assert str(err.value).startswith("study.json $.crowd.break_every: ")
    # The page's service and the bundle parsers call this one function (no second copy of the rules).
    import annotation.services.bundles.reference_format as reference_format
    import annotation.services.studies as studies

    assert studies.crowd_settings_clean is crowd_settings.crowd_settings_clean
    assert reference_format.crowd_settings_clean is crowd_settings.crowd_settings_clean
    assert not hasattr(studies, "_url_check")


# --- the bundle ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_bundle_with_crowd_settings_is_imported_and_exported_back(tmp_path: Path, examples_dir: Path) -> None:
    bundle = copy_bundle(examples_dir, tmp_path / "b")
    doc = read_doc(bundle)
    doc["crowd"] = dict(CROWD)
    write_doc(bundle, doc)
    study = study_import_bundle(path=bundle)
    assert crowd_of(study) == CROWD
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert exported["crowd"] == CROWD
    # Export → import → export unchanged.
    exported["slug"] = "crowd-again"
    write_doc(tmp_path / "out", exported)
    again = study_import_bundle(path=tmp_path / "out")
    assert crowd_of(again) == CROWD
    second = read_doc(study_export_bundle(study=again, path=tmp_path / "second"))
    assert second == exported


@pytest.mark.django_db
def test_a_partial_crowd_object_keeps_the_other_defaults_and_defaults_export_no_key(
    tmp_path: Path, examples_dir: Path
) -> None:
    bundle = copy_bundle(examples_dir, tmp_path / "b")
    doc = read_doc(bundle)
    doc["crowd"] = {"break_every": 0}
    doc["slug"] = "partial-crowd"
    write_doc(bundle, doc)
    study = study_import_bundle(path=bundle)
    assert crowd_of(study) == {**ALL_DEFAULTS, "break_every": 0}
    assert read_doc(study_export_bundle(study=study, path=tmp_path / "out"))["crowd"] == {
        **ALL_DEFAULTS,
        "break_every": 0,
    }
    plain = study_import_bundle(path=examples_dir / "bundle")
    assert "crowd" not in read_doc(study_export_bundle(study=plain, path=tmp_path / "plain"))


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "value", "message"), BAD)
def test_bad_crowd_values_in_a_bundle_are_one_line_naming_the_json_path(
    key: str, value: Any, message: str, tmp_path: Path, examples_dir: Path
) -> None:
    bundle = copy_bundle(examples_dir, tmp_path / "b")
    doc = read_doc(bundle)
    doc["crowd"] = {key: value}
    write_doc(bundle, doc)
    with pytest.raises(CommandError) as err:
        call_command("import_study", str(bundle))
    text = str(err.value)
    assert text.startswith(f"study.json $.crowd.{key}: ") and message in text and "\n" not in text
    assert not Study.objects.exists()


@pytest.mark.django_db
def test_unknown_crowd_keys_and_a_non_object_are_refused(tmp_path: Path, examples_dir: Path) -> None:
    bundle = copy_bundle(examples_dir, tmp_path / "b")
    doc = read_doc(bundle)
    for crowd, start in (({"complete_url": "https://x.org"}, "study.json $.crowd.complete_url: unknown key"),
                         ([1], "study.json $.crowd: expected an object")):
        doc["crowd"] = crowd
        write_doc(bundle, doc)
        with pytest.raises(ValidationFailed) as err:
            study_import_bundle(path=bundle)
        assert str(err.value).startswith(start)
    assert not Study.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_takes_and_exports_crowd_settings(kind: str, tmp_path: Path) -> None:
    bundle = kind_bundle(kind, tmp_path / kind)
    doc = read_doc(bundle)
    doc["crowd"] = dict(CROWD)
    write_doc(bundle, doc)
    study = study_import_bundle(path=bundle)
    assert crowd_of(study) == CROWD
    assert read_doc(study_export_bundle(study=study, path=tmp_path / "out")) == doc
    doc["crowd"] = {"break_every": 10_001}
    doc["slug"] = f"{kind}-bad"
    write_doc(bundle, doc)
    with pytest.raises(ValidationFailed, match=r"^study\.json \$\.crowd\.break_every: "):
        study_import_bundle(path=bundle)
    assert FIXTURES.exists()


@pytest.mark.django_db
def test_an_update_bundle_may_not_change_crowd_settings(tmp_path: Path, examples_dir: Path) -> None:
    study = study_import_bundle(path=examples_dir / "bundle")
    bundle = study_export_bundle(study=study, path=tmp_path / "out")
    doc = read_doc(bundle)
    doc["crowd"] = {"break_every": 7}
    write_doc(bundle, doc)
    with pytest.raises(CommandError) as err:
        call_command("import_study", "--update", str(bundle))
    assert str(err.value).startswith("study.json $.crowd.break_every: 7 differs from the study's 40")
    doc["crowd"] = {"break_every": 40}  # the study's own value: not a change, so the check moves on
    write_doc(bundle, doc)
    with pytest.raises(CommandError, match=r"^study\.json \$\.candidates: no candidate differs"):
        call_command("import_study", "--update", str(bundle))


# --- the API ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_patch_sets_every_crowd_setting_and_get_shows_them(examples_dir: Path, researcher: Any) -> None:
    study = study_import_bundle(path=examples_dir / "bundle", user=researcher)
    client = Client()
    client.force_login(researcher)
    url = f"/api/studies/{study.slug}/"
    assert {k: client.get(url).json()[k] for k in CROWD_KEYS} == ALL_DEFAULTS
    response = client.patch(url, CROWD, content_type="application/json")
    assert response.status_code == 200, response.content
    assert {k: response.json()[k] for k in CROWD_KEYS} == CROWD
    assert crowd_of(study) == CROWD
    event = AuditEvent.objects.get(action="study.update", study=study)
    assert event.details["fields"] == sorted(CROWD)


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "value", "message"), BAD)
def test_patch_refuses_bad_crowd_values_with_400_and_changes_nothing(
    key: str, value: Any, message: str, examples_dir: Path, researcher: Any
) -> None:
    study = study_import_bundle(path=examples_dir / "bundle", user=researcher)
    client = Client()
    client.force_login(researcher)
    response = client.patch(
        f"/api/studies/{study.slug}/", {key: value, "title": "changed"}, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert detail.startswith(f"field '{key}': ") and message in detail
    assert crowd_of(study) == ALL_DEFAULTS and study.title != "changed"


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["break_evry", "rater_page", "slug"])
def test_patch_refuses_a_key_it_does_not_change_instead_of_ignoring_it(
    key: str, examples_dir: Path, researcher: Any
) -> None:
    """A misspelt setting, a page-only one or a read-only field: 400 naming it, nothing changed."""
    study = study_import_bundle(path=examples_dir / "bundle", user=researcher)
    client = Client()
    client.force_login(researcher)
    response = client.patch(
        f"/api/studies/{study.slug}/", {key: 5, "title": "changed"}, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert detail.startswith(f"field '{key}': not a setting PATCH changes (it takes: title, ")
    assert "break_every" in detail and "\n" not in detail
    study.refresh_from_db()
    assert study.title != "changed"


@pytest.mark.django_db
def test_the_settings_page_still_saves_and_uses_the_same_messages(examples_dir: Path, researcher: Any) -> None:
    study = study_import_bundle(path=examples_dir / "bundle", user=researcher)
    client = Client()
    client.force_login(researcher)
    url = f"/research/studies/{study.slug}/settings/"
    page = client.post(
        url,
        {
            "accepting_participants": "on",
            "completion_url": CROWD["completion_url"],
            "completion_code": CROWD["completion_code"],
            "screened_out_url": CROWD["screened_out_url"],
            "screened_out_code": CROWD["screened_out_code"],
            "break_every": "25",
            "end_comment": "on",
            "rater_page": "1",  # the form's rater-page part: unticked boxes are off
            "mark_defaulted_axes": "on",
        },
        follow=True,
    )
    assert "Settings saved; the study is open to participants." in page.content.decode()
    assert crowd_of(study) == {**CROWD, "accepting_participants": True}
    page = client.post(url, {"break_every": "10001"}, follow=True).content.decode()
    assert "Breaks every N trials is a whole number from 0 to 10,000" in page
    assert crowd_of(study)["break_every"] == 25
    # Text that is not a number gets the validator's own message, as in the API and the bundle.
    page = client.post(url, {"break_every": "ten"}, follow=True).content.decode()
    assert "Breaks every N trials is a whole number from 0 to 10,000, got &quot;ten&quot;" in page
    assert crowd_of(study)["break_every"] == 25
