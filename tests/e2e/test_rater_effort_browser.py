"""Issue 30 in a real browser (Chromium through Playwright), by accessible names: the small fixes
(pan without selecting text, outline only for keyboard focus, Enter on a phone's tab submits),
keys that cannot land on the wrong question, one key for the axes that follow the verdict (keys per
trial counted), and the whole page in view. Screenshots go to ``ARBITER_SHOTS`` when set.
"""

from __future__ import annotations

import os

import pytest
from django.db import connections

from annotation.models import Axis, AxisScope, Comparison, Page, StoredImage, Vote
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study
from tests.e2e.test_rater_browser import app_url, browser, progress, settle, wait_for_next  # noqa: F401
from tests.e2e.test_trial_page_browser import LONG, axis_groups, open_trial, ready

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture
def tall_study():  # type: ignore[no-untyped-def]
    """Pages twice as tall as wide, with five active axes on pages with a target."""
    rs = make_rater_study(slug="tall-pages", pages=4, failed_render=False, targets_every=2, image_size=(500, 1000))
    for i, (axis_id, title) in enumerate((("FIGURE_PLACEMENT", "Figures"), ("COLOUR_AND_CONTRAST", ""))):
        Axis.objects.create(study=rs.study, axis_id=axis_id, title=title, scope=AxisScope.FIXED,
                            description=LONG, position=10 + i)
    blocks_schedule(study=rs.study, blocks=2, block_size=5, repeats=1, min_gap=2, raters=[3, 1], seed=9)
    secrets = set(rs.secrets)
    for c in Comparison.objects.filter(study=rs.study):
        secrets.update({c.external_id, c.candidate_a.external_id, c.candidate_b.external_id})
    secrets.update(Page.objects.filter(study=rs.study).values_list("external_id", flat=True))
    for image in StoredImage.objects.all():
        secrets.update({image.sha256, image.file.name})
    rs.secrets = [*sorted(s for s in secrets if s), "repeat"]
    return rs


def test_pan_selects_nothing_and_the_trial_has_no_outline(app_url, browser, tall_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, tall_study.study, "panner", {"width": 1440, "height": 900})
    page.get_by_role("button", name="Zoom in").click()
    page.get_by_role("button", name="Zoom in").click()
    scroller = page.locator("#pane-a [data-scroller]")
    box = scroller.bounding_box()
    # A drag that starts on the image and leaves the pane over text pans and selects nothing.
    page.mouse.move(box["x"] + 100, box["y"] + box["height"] - 20)
    page.mouse.down()
    page.mouse.move(box["x"] + 60, box["y"] + box["height"] + 150, steps=8)
    page.mouse.move(box["x"] - 300, box["y"] - 30, steps=8)
    page.mouse.up()
    assert page.evaluate("() => window.getSelection().toString()") == ""
    assert scroller.evaluate("e => e.scrollTop") > 0
    # After a keyboard submit the trial has the focus (its keys answer) but draws no outline.
    page.keyboard.press("a")
    page.keyboard.press("4")
    for _ in range(axis_groups(page).count()):
        page.keyboard.press("2")
    before = progress(page)
    page.keyboard.press("Enter")
    wait_for_next(page, before)
    ready(page)
    page.wait_for_timeout(100)
    style = page.evaluate("""() => { const e = document.activeElement; const s = getComputedStyle(e);
        return [e.hasAttribute('data-trial'), s.outlineStyle, s.outlineWidth]; }""")
    assert style[0] and (style[1] == "none" or style[2] == "0px"), style
    # A control reached by Tab shows its outline (:focus-visible).
    page.keyboard.press("Tab")
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    context.close()
    connections.close_all()


def test_enter_after_tapping_a_tab_submits_on_a_phone(app_url, browser, tall_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, tall_study.study, "phone-keys", {"width": 390, "height": 844},
                               has_touch=True, is_mobile=True, device_scale_factor=2)
    ready(page)
    page.keyboard.press("a")  # a phone with a keyboard
    page.keyboard.press("4")
    for _ in range(axis_groups(page).count()):
        page.keyboard.press("3")
    page.get_by_role("tab", name="B").tap()
    assert page.get_by_role("tab", name="B").get_attribute("aria-selected") == "true"
    before = progress(page)
    assert page.locator("[data-answer-form]").evaluate("f => f.checkValidity()")
    page.keyboard.press("Enter")
    wait_for_next(page, before)
    assert Vote.objects.filter(trial__assignment__rater__external_id="phone-keys").count() == 1
    context.close()
    connections.close_all()
