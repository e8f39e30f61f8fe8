"""Issue 17 in a real browser (Chromium through Playwright), by accessible names: the break
screen, the completion redirect and Copy code, screened-out codes, a rater account created in the
app, participant links from the serving origin, and the public leaderboard on a phone."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from annotation.models import Assignment, AssignmentState
from annotation.services.participants import participant_claim, participant_rater_get_or_create
from annotation.services.scheduling import blocks_schedule
from annotation.services.studies import study_settings_update
from tests.annotation.rater_factories import make_rater_study
from tests.e2e.test_rater_browser import TRIALS, answer_by_keyboard, open_link

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def flow_study():  # type: ignore[no-untyped-def]
    rs = make_rater_study(slug="flow-study", pages=4, failed_render=False, targets_every=2)
    blocks_schedule(study=rs.study, blocks=2, block_size=5, repeats=1, min_gap=2, raters=[2, 1], seed=9)
    return rs.study


@pytest.fixture
def no_public_url(settings, monkeypatch):  # type: ignore[no-untyped-def]
    settings.ARBITER_PUBLIC_URL = ""
    monkeypatch.delenv("ARBITER_PUBLIC_URL", raising=False)
    monkeypatch.delenv("ARBITER_SERVE_ORIGIN", raising=False)


def test_break_screen_then_continue(app_url, browser, flow_study) -> None:  # type: ignore[no-untyped-def]
    study_settings_update(study=flow_study, break_every=3)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = open_link(context, app_url, flow_study, "break-rater")
    for i in range(2):
        answer_by_keyboard(page, i)
    # The progress bar carries the pace estimate once there are three answers to go by.
    _answer_then_break(page, 2)
    expect(page.get_by_role("heading", name="Take a break")).to_be_visible()
    expect(page.get_by_text(f"You have answered 3 of {TRIALS} trials")).to_be_visible()
    expect(page.get_by_text(re.compile(r"about \d+ minutes? left"))).to_be_visible()
    page.get_by_role("button", name="Continue").click()
    expect(page.locator("#progress-text")).to_have_text(f"4 of {TRIALS}")
    expect(page.locator("#time-left")).to_have_text(re.compile(r"about \d+ minutes? left"))
    page.reload()  # continuing is remembered: no second break screen for the same point
    expect(page.locator("#progress-text")).to_have_text(f"4 of {TRIALS}")
    context.close()


def _answer_then_break(page, i: int) -> None:  # type: ignore[no-untyped-def]
    page.keyboard.press(["a", "b", "t"][i % 3])
    page.keyboard.press("4")
    for _ in set(page.eval_on_selector_all("input[name^='axis:']", "els => els.map(e => e.name)")):
        page.keyboard.press(str(1 + i % 5))
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/s/[^/]+/$"))


def test_end_page_copy_code_and_completion_redirect(app_url, browser, flow_study) -> None:  # type: ignore[no-untyped-def]
    study_settings_update(study=flow_study, break_every=0, completion_code="C0FFEE12",
                          completion_url=f"{app_url}/back-to-platform/?cc={{code}}")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_url)
    page = open_link(context, app_url, flow_study, "done-rater")
    for i in range(TRIALS):
        answer_by_keyboard(page, i)
    expect(page.get_by_role("heading", name="Thank you!")).to_be_visible()
    expect(page.locator("#completion-code")).to_have_text("C0FFEE12")
    page.get_by_role("button", name="Copy code").click()
    expect(page.get_by_role("status").filter(has_text="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "C0FFEE12"
    expect(page.get_by_role("link", name="Return to the platform now")).to_have_attribute(
        "href", f"{app_url}/back-to-platform/?cc=C0FFEE12")
    page.wait_for_url(f"{app_url}/back-to-platform/?cc=C0FFEE12", timeout=15_000)
    context.close()


def test_screened_out_participant_gets_the_code_and_the_url(app_url, browser, flow_study) -> None:  # type: ignore[no-untyped-def]
    study_settings_update(study=flow_study, screened_out_code="NOPLACE9",
                          screened_out_url="https://app.prolific.com/submissions/complete?cc=NOPLACE9")
    for i in range(3):  # every place taken
        participant_claim(study=flow_study, rater=participant_rater_get_or_create(study=flow_study, external_id=f"p{i}"))
    assert not Assignment.objects.filter(block__study=flow_study, state=AssignmentState.OPEN).exists()
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = open_link(context, app_url, flow_study, "late-one")
    expect(page.get_by_role("heading", name="This study is full")).to_be_visible()
    expect(page.locator("#screened-out-code")).to_have_text("NOPLACE9")
    expect(page.get_by_role("button", name="Copy code")).to_be_visible()
    expect(page.get_by_role("link", name="Return to the platform")).to_have_attribute(
        "href", "https://app.prolific.com/submissions/complete?cc=NOPLACE9")
    context.close()


def log_in(page, app_url: str, username: str, password: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{app_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def admin_session(browser, app_url: str, make_user, *, width: int):  # type: ignore[no-untyped-def]
    make_user("ada-admin", role="admin", is_staff=True, password="pw-arbiter-123")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    log_in(page, app_url, "ada-admin", "pw-arbiter-123")
    return context, page


def test_admin_creates_a_rater_account_in_the_app(app_url, browser, flow_study, make_user) -> None:  # type: ignore[no-untyped-def]
    context, page = admin_session(browser, app_url, make_user, width=1440)
    page.goto(f"{app_url}/research/studies/{flow_study.slug}/raters/")
    page.get_by_label("Username").fill("new-rater")
    page.get_by_label("Give them a place in").select_option(label="block-1")
    page.get_by_role("button", name="Create account").click()
    message = page.locator(".messages li.success").inner_text()
    link = re.search(r"(http://\S+/accounts/set-password/\S+/)", message)
    assert link and "new-rater created and given slot" in message
    assert link.group(1).startswith(app_url)  # the serving origin
    user = get_user_model().objects.get(username="new-rater")
    assert Assignment.objects.get(rater__user=user).block.name == "block-1"

    rater = browser.new_context(viewport={"width": 1280, "height": 800})
    page = rater.new_page()
    page.goto(link.group(1))
    expect(page.get_by_role("heading", name="Choose a password")).to_be_visible()
    page.get_by_label("New password", exact=True).fill("a-long-Pass-phrase-9")
    page.get_by_label("New password again").fill("a-long-Pass-phrase-9")
    page.get_by_role("button", name="Set password").click()
    expect(page.get_by_role("heading", name="Password set")).to_be_visible()
    page.get_by_role("link", name="Log in").click()
    log_in(page, app_url, "new-rater", "a-long-Pass-phrase-9")
    page.get_by_role("link", name=flow_study.title).click()
    expect(page.locator("#progress-text")).to_have_text(f"1 of {TRIALS}")
    rater.close()
    context.close()


def test_participant_links_use_the_serving_origin(app_url, browser, flow_study, make_user, no_public_url) -> None:  # type: ignore[no-untyped-def]
    context, page = admin_session(browser, app_url, make_user, width=1280)
    page.goto(f"{app_url}/research/studies/{flow_study.slug}/raters/")
    link = page.locator("section", has=page.get_by_role("heading", name="Participant link")).locator("code").first
    expect(link).to_have_text(f"{app_url}/s/{flow_study.link_token}/")
    participant = browser.new_context()
    page = open_link(participant, app_url, flow_study, "origin-rater")
    page.get_by_role("link", name="Pause").click()
    expect(page.locator(".resume-url")).to_have_text(f"{app_url}/s/{flow_study.link_token}/?participant=origin-rater")
    participant.close()
    context.close()


def test_public_leaderboard_fits_a_phone(app_url, browser, make_user) -> None:  # type: ignore[no-untyped-def]
    from tests.ranking.rank_factories import make_ranked_study
    from tests.ranking.test_leaderboard_web import done_leaderboard

    ranked = make_ranked_study("lb-phone", n_pages=10, researchers=[make_user("rita", role="researcher")])
    leaderboard = done_leaderboard(ranked, published=True)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(f"{app_url}/leaderboard/{leaderboard.public_token}/")
    expect(page.get_by_role("heading", name=re.compile("Leaderboard"))).to_be_visible()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px phone"
    expect(page.get_by_role("region", name="Leaderboard table")).to_be_visible()
    expect(page.get_by_role("link", name="HTML report")).to_be_visible()
    context.close()
