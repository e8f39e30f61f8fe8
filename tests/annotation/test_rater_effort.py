"""Issue 30, server side: researchers see an account's username (quality page, block page, problem
reports, participants CSV), not its ``account/<pk>`` id."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from annotation.models import Rater, TrialProblem, Vote
from annotation.selectors.participants import participants_csv_text
from annotation.selectors.problems import study_problem_reports
from annotation.services.participants import account_rater_get_or_create, rater_assign
from annotation.services.studies import study_settings_update
from annotation.services.votes_csv import votes_export_csv
from tests.annotation.test_rater_flow import answer, form_of, join, scheduled

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


def test_axes_set_by_the_verdict_key_are_marked_in_the_votes_csv(tmp_path, researcher) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    axes = form_of(html)["axes"]
    assert axes and 'data-action="axes-follow"' in html and 'data-digit-keys="on"' in html
    # Not marked by default: the field is ignored and the export has no axes_defaulted column.
    html = answer(client, html, axes_defaulted=",".join(axes)).content.decode()
    assert "axes_defaulted" not in Vote.objects.get().answers
    study_settings_update(study=rs.study, user=researcher, mark_defaulted_axes=True, digit_keys=False)
    assert rs.study.options["rater_page"] == {"digit_keys": False, "axes_from_verdict": True, "mark_defaulted_axes": True}
    html = client.get(f"/s/{rs.study.link_token}/").content.decode()
    assert 'data-digit-keys="off"' in html and "digit keys are off" in html
    axes = form_of(html)["axes"]
    answer(client, html, axes_defaulted=",".join([axes[0], "NOT_AN_AXIS"]))
    latest = Vote.objects.order_by("-id").first()
    assert latest.answers["axes_defaulted"] == [axes[0]]
    out = tmp_path / "votes.csv"
    votes_export_csv(study=rs.study, path=out)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0])[-1] == "axes_defaulted"
    assert sorted(r["axes_defaulted"] for r in rows) == ["", axes[0]]
    # Import accepts the column (and ignores it).
    from annotation.kinds import design_of

    design_of(rs.study).votes_csv(rs.study).check_header(list(rows[0]), "votes.csv", lambda c: None)
