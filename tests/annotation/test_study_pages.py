"""Issue 17: running a study from its pages, without the Django admin (accounts, settings, voids)."""

from __future__ import annotations

import io
import re
import shlex
from html import unescape

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from annotation.errors import ValidationFailed
from annotation.models import GOLD_EXPECTED, Assignment, AssignmentState, AuditEvent, Block, Trial
from annotation.services.scheduling import blocks_schedule
from annotation.views.research import schedule_error_words, schedule_proposal
from tests.annotation.rater_factories import make_rater_study
from tests.annotation.test_rater_flow import answer, join, scheduled

pytestmark = pytest.mark.django_db


def logged_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_admin_creates_a_rater_account_who_sets_a_password_and_rates(admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    admin = logged_in(admin_user)
    page = admin.get(f"/research/studies/{rs.study.slug}/raters/").content.decode()
    assert "Create a rater account" in page
    r = admin.post(f"/research/studies/{rs.study.slug}/raters/new/", {"username": "rae-new", "block": "1"}, follow=True)
    html = r.content.decode()
    link = re.search(r"http://testserver(/accounts/set-password/[^/]+/[^/\s<]+/)", html)
    assert link and "Rater account rae-new created and given slot" in html
    user = get_user_model().objects.get(username="rae-new")
    assert not user.has_usable_password() and user.groups.filter(name="rater").exists()
    assert Assignment.objects.get(rater__user=user).block.position == 1
    assert AuditEvent.objects.filter(action="rater_account_create", target="rae-new").exists()
    # The rater follows the link, chooses a password and logs in.
    rater = Client()
    form = rater.get(link.group(1), follow=True)
    assert b"Choose a password" in form.content
    done = rater.post(form.redirect_chain[-1][0], {"new_password1": "a-long-Pass-phrase-9", "new_password2": "a-long-Pass-phrase-9"}, follow=True)
    assert b"Password set" in done.content
    assert rater.login(username="rae-new", password="a-long-Pass-phrase-9")
    home = rater.get("/").content.decode()
    assert rs.study.title in home and "0 of 10 answered" in home
    trial = rater.get(f"/s/{rs.study.link_token}/").content.decode()
    assert "1 of 10" in trial
    # The link works once.
    assert b"already been used" in Client().get(link.group(1), follow=True).content


def test_rater_accounts_only_by_admins_and_with_good_usernames(researcher, admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    rs.study.researchers.add(researcher)
    assert logged_in(researcher).post(f"/research/studies/{rs.study.slug}/raters/new/", {"username": "x"}).status_code == 403
    admin = logged_in(admin_user)
    r = admin.post(f"/research/studies/{rs.study.slug}/raters/new/", {"username": "has space"}, follow=True)
    assert "A username is 1–150 letters" in r.content.decode()
    admin.post(f"/research/studies/{rs.study.slug}/raters/new/", {"username": "twice"})
    r = admin.post(f"/research/studies/{rs.study.slug}/raters/new/", {"username": "TWICE"}, follow=True)
    assert "The username TWICE is taken" in r.content.decode()


def test_researcher_opens_closes_and_edits_the_crowd_settings(researcher) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    rs.study.researchers.add(researcher)
    client = logged_in(researcher)
    url = f"/research/studies/{rs.study.slug}/settings/"
    r = client.post(url, {"completion_url": "https://app.prolific.com/submissions/complete?cc=ABC",
                          "screened_out_code": "OUT1", "break_every": "20", "end_comment": "on"}, follow=True)
    assert "Settings saved; the study is closed to new participants." in r.content.decode()
    rs.study.refresh_from_db()
    assert (rs.study.accepting_participants, rs.study.break_every, rs.study.end_comment) == (False, 20, True)
    assert rs.study.completion_url.endswith("cc=ABC") and rs.study.screened_out_code == "OUT1"
    assert b"not accepting participants" in join(Client(), rs.study).content
    r = client.post(url, {"accepting_participants": "on", "completion_url": "ftp://x", "break_every": "20"}, follow=True)
    assert "The completion URL must start with https://" in r.content.decode()
    client.post(url, {"accepting_participants": "on", "break_every": "40"})
    rs.study.refresh_from_db()
    assert rs.study.accepting_participants and rs.study.completion_url == ""
    events = AuditEvent.objects.filter(action="study.update", study=rs.study)
    assert events.count() == 2 and "accepting_participants" in events.first().details["fields"]  # type: ignore[union-attr]


def test_void_asks_for_confirmation_and_a_reason(admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study, "v1").content.decode()
    answer(client, html)
    assignment = Assignment.objects.get(rater__external_id="v1")
    admin = logged_in(admin_user)
    block = admin.get(f"/research/studies/{rs.study.slug}/blocks/1/").content.decode()
    assert f'href="/research/assignments/{assignment.pk}/void/"' in block
    confirm = admin.get(f"/research/assignments/{assignment.pk}/void/").content.decode()
    assert "Void slot" in confirm and "1 answer" in confirm and 'name="reason"' in confirm and "required" in confirm
    r = admin.post(f"/research/assignments/{assignment.pk}/void/", {"reason": "  "})
    assert r.status_code == 400 and "Give a reason" in r.content.decode()
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.ACTIVE
    admin.post(f"/research/assignments/{assignment.pk}/void/", {"reason": "failed attention checks"})
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.VOIDED and assignment.void_reason == "failed attention checks"


def test_study_list_has_a_progress_column(admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    answer(client, html)
    make_rater_study(slug="unscheduled")
    page = logged_in(admin_user).get("/").content.decode()
    assert "<th>Progress</th>" in page and "1 of 30 trials" in page and "0 of 3 assignments finished" in page
    assert "not scheduled" in page


def test_schedule_form_proposes_sizes_that_fit_and_speaks_the_forms_words(admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = make_rater_study()
    page = logged_in(admin_user).get(f"/research/studies/{rs.study.slug}/raters/").content.decode()
    assert 'name="block_size" type="number" min="1" max="16" value="16"' in page
    assert 'name="raters" value="5" required' in page
    r = logged_in(admin_user).post(f"/research/studies/{rs.study.slug}/schedule/",
                                   {"blocks": 2, "block_size": 9, "repeats": 1, "min_gap": 2, "raters": "1,1", "seed": 1},
                                   follow=True)
    message = re.search(r'<li class="error">([^<]+)</li>', r.content.decode())
    assert message and "--block-size" not in message.group(1) and "“Block size”" in message.group(1)
    r = logged_in(admin_user).post(f"/research/studies/{rs.study.slug}/schedule/",
                                   {"blocks": 2, "block_size": 8, "repeats": 1, "min_gap": 2, "raters": "1,1", "seed": 1},
                                   follow=True)
    assert "Schedule created: 2 blocks" in r.content.decode()


def test_schedule_proposal_and_error_words() -> None:
    rs = make_rater_study()
    assert schedule_proposal(rs.study, 1872) == {"blocks": 8, "block_size": 234, "repeats": 6, "min_gap": 20,
                                                 "raters": "5,5,5,5,5,4,2,2"}
    small = schedule_proposal(rs.study, 50)
    assert small["blocks"] * small["block_size"] <= 50 and small["repeats"] <= small["block_size"] - small["min_gap"] + 1
    assert schedule_error_words(ValidationFailed("must be at least 1", field="block_size")) == "Block size: must be at least 1"
    assert "“Hidden repeats per assignment” or “Minimum gap”" in schedule_error_words(
        ValidationFailed("at most 3 fit (lower --repeats or --min-gap)"))


def test_import_says_it_worked(researcher, examples_dir) -> None:  # type: ignore[no-untyped-def]
    import io
    import zipfile

    buffer = io.BytesIO()
    bundle = examples_dir / "bundle"
    with zipfile.ZipFile(buffer, "w") as z:
        for path in bundle.rglob("*"):
            if path.is_file():
                z.write(path, path.relative_to(bundle))
    buffer.seek(0)
    buffer.name = "bundle.zip"
    r = logged_in(researcher).post("/studies/import/", {"bundle": buffer}, follow=True)
    assert r.status_code == 200 and "Imported" in r.content.decode() and "schedule blocks" in r.content.decode()


def test_participants_csv_download(researcher) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    rs.study.researchers.add(researcher)
    join(Client(), rs.study, "PX", param="PROLIFIC_PID", STUDY_ID="S1", SESSION_ID="E1")
    r = logged_in(researcher).get(f"/research/studies/{rs.study.slug}/participants.csv")
    assert r.status_code == 200 and "PX,link,PX,S1,E1,block-" in r.content.decode()


def test_blocks_schedule_unaffected() -> None:
    rs = make_rater_study(slug="plain")
    made = blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=1, min_gap=2, raters=[1, 1], seed=1)
    assert len(made) == 2


@pytest.mark.parametrize("pages", [2, 6])
def test_the_suggested_schedule_command_runs_for_this_study(admin_user, researcher, pages) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: the raters page suggested ``--blocks 8 --block-size 234`` whatever the study's size."""
    rs = make_rater_study(pages=pages)
    rs.study.researchers.add(researcher)
    shown = []
    for user in (admin_user, researcher):
        page = logged_in(user).get(f"/research/studies/{rs.study.slug}/raters/").content.decode()
        shown.append(unescape(re.search(r'<code id="schedule-command">([^<]+)</code>', page).group(1)))
    assert shown[0] == shown[1] and "--block-size 234" not in shown[0]
    words = shlex.split(shown[0])
    assert words[:3] == ["manage.py", "schedule_blocks", rs.study.slug]
    out = io.StringIO()
    call_command(*words[1:], stdout=out)
    assert Block.objects.filter(study=rs.study).exists() and "left unscheduled" in out.getvalue()


def test_the_schedule_form_takes_gold_trials_and_adaptive_allocation(admin_user) -> None:  # type: ignore[no-untyped-def]
    """Issue 40: gold trials and adaptive allocation were only on the command line."""
    rs = make_rater_study(pages=6)
    client = logged_in(admin_user)
    page = client.get(f"/research/studies/{rs.study.slug}/raters/").content.decode()
    assert 'name="gold"' in page and 'name="allocation"' in page and 'value="adaptive"' in page
    r = client.post(f"/research/studies/{rs.study.slug}/schedule/",
                    {"blocks": 2, "block_size": 8, "repeats": 1, "min_gap": 2, "raters": "1,1", "seed": 1,
                     "gold": 2, "allocation": "adaptive", "target_k": 2}, follow=True)
    assert "Schedule created: 2 blocks" in r.content.decode()
    rs.study.refresh_from_db()
    assert rs.study.options["gold_trials"] == 2
    assert rs.study.options["allocation"] == "adaptive" and rs.study.options["allocation_target"]["k"] == 2
    assert Trial.objects.filter(assignment__block__study=rs.study, attention_expected=GOLD_EXPECTED).count() == 2 * 2


def test_a_refused_allocation_schedules_nothing(admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = make_rater_study(pages=6)
    r = logged_in(admin_user).post(f"/research/studies/{rs.study.slug}/schedule/",
                                   {"blocks": 2, "block_size": 8, "repeats": 1, "min_gap": 2, "raters": "1,1",
                                    "seed": 1, "allocation": "sometimes"}, follow=True)
    message = re.search(r'<li class="error">([^<]+)</li>', r.content.decode())
    assert message and "Allocation: must be one of uniform, adaptive" in unescape(message.group(1))
    assert not Block.objects.filter(study=rs.study).exists()
