"""A study link can never take over another kind of rater (review finding), and JSON clients can vote."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.errors import ValidationFailed
from annotation.models import Assignment, Rater
from annotation.services.participants import account_rater_get_or_create, participant_rater_get_or_create
from tests.annotation.test_rater_flow import scheduled

pytestmark = pytest.mark.django_db


def test_a_link_cannot_take_over_an_account_or_imported_rater(rater_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    account = account_rater_get_or_create(study=rs.study, user=rater_user)
    imported = Rater.objects.create(study=rs.study, external_id="PID123", source=Rater.Source.IMPORT)
    with pytest.raises(ValidationFailed, match="participant id is"):  # "/" is never a link id
        participant_rater_get_or_create(study=rs.study, external_id=account.external_id)
    with pytest.raises(ValidationFailed, match="not available"):
        participant_rater_get_or_create(study=rs.study, external_id=imported.external_id)
    # Through the browser: refused, and no assignment is handed out.
    client = Client()
    response = client.get(f"/s/{rs.study.link_token}/", {"participant": "PID123"}, follow=True)
    assert response.status_code in (200, 400)
    assert b"not available" in response.content
    assert not Assignment.objects.filter(rater=imported).exists()


def test_account_ids_cannot_be_produced_by_a_link(rater_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    squatter = participant_rater_get_or_create(study=rs.study, external_id=f"user:{rater_user.username}")
    account = account_rater_get_or_create(study=rs.study, user=rater_user)
    assert account.pk != squatter.pk and account.user == rater_user and "/" in account.external_id
    assert account_rater_get_or_create(study=rs.study, user=rater_user).pk == account.pk


def test_the_trial_api_sets_the_csrf_cookie_for_json_clients() -> None:
    rs = scheduled()
    client = Client(enforce_csrf_checks=True)
    client.get(f"/s/{rs.study.link_token}/", {"participant": "json-client"})
    response = client.get(f"/api/rater/{rs.study.link_token}/trial/")
    assert response.status_code == 200
    assert "csrftoken" in response.cookies
