"""Issue 30, server side: researchers see an account's username (quality page, block page, problem
reports, participants CSV), not its ``account/<pk>`` id."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from annotation.models import Rater, TrialProblem
from annotation.selectors.participants import participants_csv_text
from annotation.selectors.problems import study_problem_reports
from annotation.services.participants import account_rater_get_or_create, rater_assign
from tests.annotation.test_rater_flow import scheduled

pytestmark = pytest.mark.django_db


def test_an_account_shows_its_username_to_researchers(make_user, researcher) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    rs.study.researchers.add(researcher)
    rita = make_user("rosa-rater", role="rater")
    block = rs.study.blocks.order_by("position").first()
    assignment = rater_assign(block=block, user=rita, actor=researcher)
    rater = account_rater_get_or_create(study=rs.study, user=rita)
    assert rater.external_id == f"account/{rita.pk}" and rater.display_name == "rosa-rater"
    assert Rater(external_id="p-1", source=Rater.Source.LINK).display_name == "p-1"
    TrialProblem.objects.create(trial=assignment.trials.order_by("position").first(), kind="other", text="cut off")

    client = Client()
    client.force_login(researcher)
    for url in (f"/research/studies/{rs.study.slug}/raters/quality/",
                f"/research/studies/{rs.study.slug}/blocks/{block.position}/"):
        body = client.get(url).content.decode()
        assert "rosa-rater" in body and f"account/{rita.pk}" not in body, url
    _total, problems = study_problem_reports(study=rs.study)
    assert [p.rater for p in problems] == ["rosa-rater"]
    rows = list(csv.DictReader(io.StringIO(participants_csv_text(study=rs.study))))
    mine = [r for r in rows if r["rater"] == "rosa-rater"]
    assert len(mine) == 1 and mine[0]["source"] == "account" and mine[0]["rater_id"] == f"account/{rita.pk}"
