"""Issue 17 session flow: breaks with a pace estimate, the crowd-platform round trip, link origins."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotation.errors import ValidationFailed
from annotation.models import Assignment, AssignmentState, Rater, Trial, Vote
from annotation.selectors.pace import break_due, minutes_left
from annotation.selectors.participants import participants_csv_text
from annotation.services.participants import assignment_void, study_link_url
from annotation.services.studies import study_settings_update
from tests.annotation.test_rater_flow import answer, join, scheduled

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def test_break_due_every_n_answered_trials_never_at_the_ends() -> None:
    assert [n for n in range(0, 11) if break_due(every=4, answered=n, total=10)] == [4, 8]
    assert not break_due(every=0, answered=4, total=10)
    assert not break_due(every=5, answered=10, total=10)


def test_minutes_left_is_the_median_pace_times_the_trials_left() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    assignment = Assignment.objects.get(rater__external_id="P1")
    assert minutes_left(assignment=assignment, answered=0, total=10) is None
    for _ in range(4):
        html = answer(client, html).content.decode()
    # 30 s, 30 s, 30 s and one 20-minute pause: the median ignores the pause.
    for ms, vote in zip((30_000, 30_000, 30_000, 1_200_000), Vote.objects.filter(trial__assignment=assignment), strict=True):
        Vote.objects.filter(pk=vote.pk).update(response_ms=ms)
    assert minutes_left(assignment=assignment, answered=4, total=10) == 3  # 6 × 30 s
    assert minutes_left(assignment=assignment, answered=10, total=10) == 0
    page = client.get(f"/s/{rs.study.link_token}/").content.decode()
    assert "about 3 minutes left" in page


def test_break_screen_after_every_n_trials_then_continue() -> None:
    rs = scheduled()
    study_settings_update(study=rs.study, break_every=3)
    client = Client()
    html = join(client, rs.study).content.decode()
    for _ in range(2):
        html = answer(client, html).content.decode()
    r = answer(client, html)
    # htmx: a whole-page load of the link, which shows the break screen (and survives a reload).
    assert r.status_code == 200 and r["HX-Redirect"] == f"/s/{rs.study.link_token}/"
    page = client.get(f"/s/{rs.study.link_token}/").content.decode()
    assert "<h1>Take a break</h1>" in page and "3 of 10" in page and 'name="verdict"' not in page
    assert "about 1 minute left" in page  # three quick answers: the estimate is shown
    assert "Take a break" in client.get(f"/s/{rs.study.link_token}/").content.decode()
    r = client.post(f"/s/{rs.study.link_token}/break/")
    assert r.status_code == 302
    page = client.get(f"/s/{rs.study.link_token}/").content.decode()
    assert "Take a break" not in page and "4 of 10" in page
    # The next break comes three trials later.
    for _ in range(2):
        page = answer(client, page).content.decode()
    assert answer(client, page)["HX-Redirect"]


def test_no_break_when_the_study_sets_none() -> None:
    rs = scheduled()
    study_settings_update(study=rs.study, break_every=0)
    client = Client()
    html = join(client, rs.study).content.decode()
    for _ in range(9):
        r = answer(client, html)
        assert "HX-Redirect" not in r
        html = r.content.decode()


def finish(client: Client, study, participant: str = "P1", **extra: str) -> str:  # type: ignore[no-untyped-def]
    html = join(client, study, participant, **extra).content.decode()
    while 'name="verdict"' in html:
        html = answer(client, html).content.decode()
    return html


def test_end_page_copy_code_and_redirect_to_the_completion_url() -> None:
    rs = scheduled(completion_code="C0FFEE12")
    study_settings_update(study=rs.study, completion_url="https://app.prolific.com/submissions/complete?cc={code}")
    html = finish(Client(), rs.study)
    assert "C0FFEE12" in html and ">Copy code</button>" in html
    assert 'data-redirect="https://app.prolific.com/submissions/complete?cc=C0FFEE12"' in html
    assert 'href="https://app.prolific.com/submissions/complete?cc=C0FFEE12"' in html


def test_end_comment_is_stored_and_exported_then_the_participant_is_sent_back() -> None:
    rs = scheduled(completion_code="C0FFEE12")
    study_settings_update(study=rs.study, end_comment=True,
                          completion_url="https://app.prolific.com/submissions/complete?cc=C0FFEE12")
    client = Client()
    html = finish(client, rs.study, "PID7", param="PROLIFIC_PID", STUDY_ID="ST1", SESSION_ID="SE1")
    assert "Any comments about this study?" in html and "data-redirect=" not in html  # no redirect while typing
    r = client.post(f"/s/{rs.study.link_token}/comment/", {"comment": "=The B images loaded slowly"})
    assert r.status_code == 302 and r["Location"] == "https://app.prolific.com/submissions/complete?cc=C0FFEE12"
    assignment = Assignment.objects.get(rater__external_id="PID7")
    assert assignment.end_comment == "=The B images loaded slowly"
    rater = Rater.objects.get(external_id="PID7")
    assert rater.platform == {"PROLIFIC_PID": "PID7", "STUDY_ID": "ST1", "SESSION_ID": "SE1"}
    csv_text = participants_csv_text(study=rs.study)
    header, row = csv_text.splitlines()[0], next(r for r in csv_text.splitlines() if r.startswith("PID7"))
    assert header.startswith("rater,source,PROLIFIC_PID,STUDY_ID,SESSION_ID,block")
    assert row.startswith("PID7,link,PID7,ST1,SE1,") and "C0FFEE12" in row and "'=The B images" in row
    page = client.get(f"/s/{rs.study.link_token}/").content.decode()
    assert "Thank you for your comment" in page and "data-redirect=" in page


def test_comment_before_the_end_is_refused() -> None:
    rs = scheduled()
    study_settings_update(study=rs.study, end_comment=True)
    client = Client()
    join(client, rs.study)
    r = client.post(f"/s/{rs.study.link_token}/comment/", {"comment": "hi"})
    assert r.status_code == 409
    assert Assignment.objects.get(rater__external_id="P1").end_comment == ""


def test_screened_out_participants_get_the_screened_out_code_and_url() -> None:
    rs = scheduled(raters=(1, 1))
    study_settings_update(study=rs.study, screened_out_code="NOPLACE9",
                          screened_out_url="https://app.prolific.com/submissions/complete?cc={code}")
    finish(Client(), rs.study, "a")
    finish(Client(), rs.study, "b")
    full = join(Client(), rs.study, "late").content.decode()
    assert "This study is full" in full and "NOPLACE9" in full and ">Copy code</button>" in full
    assert 'href="https://app.prolific.com/submissions/complete?cc=NOPLACE9"' in full
    assignment_void(assignment=Assignment.objects.get(rater__external_id="a"), actor=None, reason="too fast")
    ended = Client().get(f"/s/{rs.study.link_token}/", {"participant": "a"}, follow=True).content.decode()
    assert "Participation ended" in ended and "NOPLACE9" in ended


def test_a_study_without_screened_out_settings_shows_no_code() -> None:
    rs = scheduled(raters=(1,))
    finish(Client(), rs.study, "a")
    full = join(Client(), rs.study, "late").content.decode()
    assert "This study is full" in full and "Copy code" not in full


def test_crowd_settings_are_checked() -> None:
    rs = scheduled()
    with pytest.raises(ValidationFailed, match="must start with https://"):
        study_settings_update(study=rs.study, completion_url="javascript:alert(1)")
    with pytest.raises(ValidationFailed, match="whole number"):
        study_settings_update(study=rs.study, break_every=-1)
    study_settings_update(study=rs.study, completion_url="  https://example.org/done  ", break_every=0)
    rs.study.refresh_from_db()
    assert rs.study.completion_url == "https://example.org/done" and rs.study.break_every == 0


def test_links_use_the_serving_origin_when_no_public_url_is_set(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_PUBLIC_URL = ""
    monkeypatch.delenv("ARBITER_PUBLIC_URL", raising=False)
    monkeypatch.delenv("ARBITER_SERVE_ORIGIN", raising=False)
    rs = scheduled()
    token = rs.study.link_token
    assert study_link_url(study=rs.study) == f"http://127.0.0.1:8000/s/{token}/"
    monkeypatch.setenv("ARBITER_SERVE_ORIGIN", "http://127.0.0.1:8101")
    assert study_link_url(study=rs.study) == f"http://127.0.0.1:8101/s/{token}/"
    assert study_link_url(study=rs.study, origin="http://localhost:9191") == f"http://localhost:9191/s/{token}/"
    settings.ARBITER_PUBLIC_URL = "https://study.example.org"
    assert study_link_url(study=rs.study, origin="http://localhost:9191") == f"https://study.example.org/s/{token}/"


def test_pause_page_links_from_the_serving_origin(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_PUBLIC_URL = ""
    monkeypatch.delenv("ARBITER_SERVE_ORIGIN", raising=False)
    settings.ALLOWED_HOSTS = ["*"]
    rs = scheduled()
    client = Client(HTTP_HOST="127.0.0.1:8101")
    join(client, rs.study, "P9")
    html = client.get(f"/s/{rs.study.link_token}/pause/").content.decode()
    assert f"http://127.0.0.1:8101/s/{rs.study.link_token}/?participant=P9" in html
    assert "8000" not in html


def test_response_time_is_unaffected_by_the_break_screen() -> None:
    # The next trial's clock starts when it is shown, i.e. after Continue, not during the break.
    rs = scheduled()
    study_settings_update(study=rs.study, break_every=1)
    client = Client()
    html = join(client, rs.study).content.decode()
    answer(client, html)
    client.get(f"/s/{rs.study.link_token}/")  # the break screen
    assignment = Assignment.objects.get(rater__external_id="P1")
    nxt = Trial.objects.filter(assignment=assignment, vote__isnull=True).order_by("position").first()
    assert nxt is not None and nxt.shown_at is None
    client.post(f"/s/{rs.study.link_token}/break/")
    client.get(f"/s/{rs.study.link_token}/")
    nxt.refresh_from_db()
    assert nxt.shown_at is not None and timezone.now() - nxt.shown_at < timedelta(seconds=30)
    assert assignment.state == AssignmentState.ACTIVE


def test_rater_api_gives_the_completion_url_at_the_end() -> None:
    rs = scheduled(completion_code="C0FFEE12")
    study_settings_update(study=rs.study, completion_url="https://example.org/done?cc={code}")
    client = Client()
    finish(client, rs.study)
    api = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    assert api["finished"] and api["completion_url"] == "https://example.org/done?cc=C0FFEE12"
