"""Researchers edit a study's instructions and judge prompt (docs/protocol.md "Judges and calibration": the
prompt is study data)."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import AuditEvent, Study
from annotation.services.bundles.importing import study_import_bundle

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(examples_dir, researcher) -> Study:  # type: ignore[no-untyped-def]
    return study_import_bundle(path=examples_dir / "bundle", user=researcher)


def test_api_patch_changes_the_prompt_and_is_audited(study: Study, researcher) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(researcher)
    response = client.patch(
        f"/api/studies/{study.slug}/", {"judge_prompt": "Compare. {{ACTIVE_AXES}}"}, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["judge_prompt"] == "Compare. {{ACTIVE_AXES}}"
    study.refresh_from_db()
    assert study.judge_prompt == "Compare. {{ACTIVE_AXES}}"
    event = AuditEvent.objects.get(action="study.update")
    assert event.actor == researcher and event.details["fields"] == ["judge_prompt"]


def test_bad_updates_are_refused_and_change_nothing(study: Study, researcher, other_researcher, rater_user) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(researcher)
    assert client.patch(f"/api/studies/{study.slug}/", {"title": ""}, content_type="application/json").status_code == 400
    for persona, status in ((other_researcher, 404), (rater_user, 403)):
        other = Client()
        other.force_login(persona)
        answer = other.patch(f"/api/studies/{study.slug}/", {"judge_prompt": "x"}, content_type="application/json")
        assert answer.status_code == status
    study.refresh_from_db()
    assert study.judge_prompt == "" and study.title == "Example fidelity study"
    assert not AuditEvent.objects.filter(action="study.update").exists()


def test_the_study_page_form_saves_both_texts(study: Study, researcher) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/studies/{study.slug}/")
    assert b'name="judge_prompt"' in page.content
    response = client.post(
        f"/studies/{study.slug}/texts/", {"instructions_md": "Be careful.", "judge_prompt": "P {{ACTIVE_AXES}}"}
    )
    assert response.status_code == 302
    study.refresh_from_db()
    assert (study.instructions_md, study.judge_prompt) == ("Be careful.", "P {{ACTIVE_AXES}}")
