"""The reference trial page in a real browser (issue 17, "The trial page"), by accessible names.

At 1440x900 and 1280x800 everything needed to answer is on one screen; at 390x844 the panes
become one viewer with Reference / A / B tabs. The keyboard stays on the trial after a submit,
flicker starts off on every trial, zoom carries over and follows Ctrl+wheel, Undo reopens the
previous trial with its answer, single-key shortcuts can be switched off (and stay off), and a
problem report is stored without answering the trial. Screenshots go to ``ARBITER_SHOTS`` when set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from annotation.models import Axis, AxisScope, Trial, TrialProblem, Vote
from tests.annotation.rater_factories import make_rater_study
from tests.e2e.test_rater_browser import (  # noqa: F401
    Recorder,
    app_url,
    browser,
    progress,
    scheduled_with_secrets,
    settle,
    wait_for_next,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SHOTS = os.environ.get("ARBITER_SHOTS", "")
LONG = ("How closely the candidate keeps this aspect of the reference page: look at every region, its "
        "position, size and spacing, and compare them with the same region of the reference.")


def five_axis_study(*, slug: str, image_size: tuple[int, int]):  # type: ignore[no-untyped-def]
    """Five active axes on pages with a target (four fixed, two of them titled, plus TABLE)."""
    rs = make_rater_study(slug=slug, pages=4, failed_render=False, targets_every=2, image_size=image_size)
    for i, (axis_id, title) in enumerate((("FIGURE_PLACEMENT", "Figures"), ("COLOUR_AND_CONTRAST", ""))):
        Axis.objects.create(study=rs.study, axis_id=axis_id, title=title, scope=AxisScope.FIXED,
                            description=LONG, position=10 + i)
    return scheduled_with_secrets(rs)


@pytest.fixture
def wide_study():  # type: ignore[no-untyped-def]
    return five_axis_study(slug="trial-page", image_size=(500, 700))


def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), caret="initial")  # no injected style (CSP)


def open_trial(browser: Any, app_url: str, study: Any, participant: str, viewport: dict[str, int], **kw: Any) -> Any:  # noqa: F811
    context = browser.new_context(viewport=viewport, **kw)
    page = context.new_page()
    page.goto(f"{app_url}/s/{study.link_token}/?participant={participant}")
    settle(page)
    return context, page


def axis_groups(page: Any) -> Any:
    return page.locator("fieldset[data-axis-fieldset]")


def answer_keys(page: Any, verdict: str = "a") -> None:
    before = progress(page)
    page.keyboard.press(verdict)
    page.keyboard.press("4")
    for _ in range(axis_groups(page).count()):
        page.keyboard.press("2")  # "A better" on every axis
    page.keyboard.press("Enter")
    wait_for_next(page, before)
    ready(page)


def ready(page: Any) -> None:
    """The new trial is swapped in and its script has run (zoom, flicker, boxes, focus)."""
    page.wait_for_selector("[data-trial][data-ready]")
    settle(page)


def inside(page: Any, locator: Any) -> bool:
    box = locator.bounding_box()
    vp = page.viewport_size
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= vp["height"] \
        and box["x"] >= 0 and box["x"] + box["width"] <= vp["width"]


def level_shown(page: Any) -> int:
    """The zoom readout, in per cent."""
    return int(page.get_by_role("status", name="Zoom level").inner_text().rstrip("%"))


def true_scale(page: Any) -> int:
    """The first visible pane's page as shown: rendered over natural width, in per cent."""
    return round(100 * page.evaluate("""() => { const i = [...document.querySelectorAll('[data-scroller]')]
        .find(s => s.offsetParent).querySelector('.page-img'); return i.getBoundingClientRect().width / i.naturalWidth; }"""))


def focused_is_trial(page: Any) -> bool:
    page.wait_for_timeout(100)  # htmx settles the swap (and moves the focus) 20 ms after it
    active = page.evaluate("() => document.activeElement ? document.activeElement.outerHTML.slice(0, 80) : ''")
    assert active.startswith('<div class="trial'), active
    return True


@pytest.mark.parametrize("size", [(1440, 900), (1280, 800)], ids=["1440x900", "1280x800"])
def test_everything_needed_to_answer_is_on_one_screen(size, app_url, browser, wide_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    width, height = size
    context, page = open_trial(browser, app_url, wide_study.study, f"screen-{width}", {"width": width, "height": height})
    instructions = page.locator("details[data-instructions]")
    assert instructions.evaluate("d => d.open")  # open on the first trial
    page.keyboard.press("i")
    assert not instructions.evaluate("d => d.open")
    page.keyboard.press("i")
    assert instructions.evaluate("d => d.open")
    shot(page, f"first-trial-{width}")
    seen_five = False
    for _ in range(4):
        answer_keys(page)
        assert not instructions.evaluate("d => d.open")  # collapsed from the second trial on
        groups = axis_groups(page)
        seen_five |= groups.count() == 5
        if groups.count() == 5:
            shot(page, f"trial-five-axes-{width}")
        submit = page.get_by_role("button", name="Submit", exact=True)
        for needed in (page.get_by_role("radio", name="Cannot judge", exact=True).locator("xpath=.."),
                       page.get_by_role("group", name="Confidence"), groups.last, submit,
                       page.get_by_role("button", name="Undo last answer")):
            assert inside(page, needed), needed
        assert page.evaluate("() => document.documentElement.scrollHeight <= window.innerHeight + 1")
        # The panes take the height that is left: they end where the answer form begins.
        pane = page.locator("#pane-a").bounding_box()
        form = page.locator("form[data-answer-form]").bounding_box()
        assert pane["height"] > 0.3 * height and form["y"] - (pane["y"] + pane["height"]) < 20
        # Readable axis names: the title, else the id humanized; the scale in words, A's side first.
        names = groups.locator("legend").all_inner_texts()
        assert "Figures" in names and "Colour and contrast" in names and "Global layout fidelity" in names
        labels = [re.sub(r"\s*\d$", "", t) for t in groups.first.locator("label").all_inner_texts()]  # keys shown
        assert labels == ["A much better", "A better", "Equal", "B better", "B much better"]
        a, b = groups.first.locator("label").first.bounding_box(), groups.first.locator("label").last.bounding_box()
        pane_a, pane_b = page.locator("#pane-a").bounding_box(), page.locator("#pane-b").bounding_box()
        assert a["x"] < b["x"] and pane_a["x"] < pane_b["x"]  # "A much better" is on A's side
    assert seen_five
    context.close()
    connections.close_all()


def test_keyboard_focus_flicker_zoom_and_the_shortcut_switch(app_url, browser, wide_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, wide_study.study, "keys", {"width": 1440, "height": 900})
    # Shortcut letters are on the buttons but not in their accessible names.
    assert page.get_by_role("radio", name="A", exact=True).count() == 1
    assert page.locator("label[for=verdict-A] kbd").inner_text() == "a"
    # Flicker on, then the next trial starts with it off.
    page.keyboard.press("f")
    assert page.locator(".viewer.flicker").count() == 1
    # Zoom with the keys, shown as the true scale (issue 40), and kept for the next trial.
    default = level_shown(page)
    page.keyboard.press("+")
    zoomed = level_shown(page)
    assert zoomed > default and zoomed == true_scale(page)
    answer_keys(page)
    assert page.locator(".viewer.flicker").count() == 0
    assert page.get_by_role("button", name="Flicker").get_attribute("aria-pressed") == "false"
    assert level_shown(page) == zoomed == true_scale(page)
    # Ctrl+wheel zooms around the pointer; every pane follows.
    scroller = page.locator("#pane-a [data-scroller]")
    box = scroller.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.75, box["y"] + box["height"] * 0.6)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    page.wait_for_timeout(200)
    level = level_shown(page)
    assert level > zoomed and level == true_scale(page)
    lefts = page.locator("[data-scroller]").evaluate_all("els => els.map(e => e.scrollLeft)")
    assert lefts[1] > 0 and len(set(lefts)) == 1, lefts
    # Drag to pan.
    top = scroller.evaluate("e => e.scrollTop")
    page.mouse.move(box["x"] + 100, box["y"] + 200)
    page.mouse.down()
    page.mouse.move(box["x"] + 100, box["y"] + 80, steps=4)
    page.mouse.up()
    assert scroller.evaluate("e => e.scrollTop") > top
    page.keyboard.press("0")  # the whole page
    assert page.get_by_role("button", name="Fit page").get_attribute("aria-pressed") == "true"
    assert level_shown(page) == true_scale(page)

    # After Ctrl+Enter in the rationale the focus is on the trial: the next "b" answers.
    page.keyboard.press("t")
    page.keyboard.press("3")
    for _ in range(axis_groups(page).count()):
        page.keyboard.press("3")
    page.get_by_role("textbox", name="Rationale").click()
    page.keyboard.type("looks the same")
    before = progress(page)
    page.keyboard.press("Control+Enter")
    wait_for_next(page, before)
    ready(page)
    assert focused_is_trial(page)
    page.keyboard.press("b")
    assert page.get_by_role("radio", name="B", exact=True).is_checked()
    assert page.get_by_role("textbox", name="Rationale").input_value() == ""
    # ... and after the Submit button.
    page.keyboard.press("4")
    for _ in range(axis_groups(page).count()):
        page.keyboard.press("1")
    before = progress(page)
    page.get_by_role("button", name="Submit", exact=True).click()
    wait_for_next(page, before)
    ready(page)
    assert focused_is_trial(page)
    assert Vote.objects.filter(trial__assignment__rater__external_id="keys").count() == 3

    # The switch turns single-key shortcuts off (WCAG 2.1.4), and this browser remembers it.
    switch = page.get_by_role("switch", name="Single-key shortcuts")
    assert switch.is_checked()
    switch.uncheck()
    page.locator("[data-trial]").focus()
    page.keyboard.press("a")
    assert not page.get_by_role("radio", name="A", exact=True).is_checked()
    assert page.locator("label[for=verdict-A] kbd").is_hidden()
    page.reload()
    settle(page)
    assert not page.get_by_role("switch", name="Single-key shortcuts").is_checked()
    page.keyboard.press("a")
    assert not page.get_by_role("radio", name="A", exact=True).is_checked()
    page.get_by_role("switch", name="Single-key shortcuts").check()
    page.locator("[data-trial]").focus()
    page.keyboard.press("a")
    assert page.get_by_role("radio", name="A", exact=True).is_checked()
    context.close()
    connections.close_all()


def test_undo_reopens_the_previous_trial_with_its_answer(app_url, browser, wide_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    rec = Recorder()
    context, page = open_trial(browser, app_url, wide_study.study, "undoer", {"width": 1280, "height": 800})
    rec.attach(page)
    page.reload()
    settle(page)
    assert page.get_by_role("button", name="Undo last answer").count() == 0  # nothing to undo yet
    answer_keys(page, "a")
    first = Trial.objects.filter(assignment__rater__external_id="undoer").order_by("position").first()
    vote = Vote.objects.get(trial=first)
    assert vote.label == ("B" if first.swapped else "A") and vote.history == []
    assert progress(page).startswith("2 of ")
    page.get_by_role("button", name="Undo last answer").click()
    expect(page.locator("#progress-text")).to_have_text(f"1 of {progress(page).split(' of ')[1]}")
    settle(page)
    shot(page, "undo-1280")
    # The stored answer, as the rater gave it (display orientation), is filled in.
    assert page.get_by_role("radio", name="A", exact=True).is_checked()
    assert page.get_by_role("group", name="Confidence").get_by_role("radio", name="4").is_checked()
    for i in range(axis_groups(page).count()):
        assert axis_groups(page).nth(i).get_by_role("radio", name="A better", exact=True).is_checked()
    assert page.get_by_role("button", name="Undo last answer").count() == 0
    page.keyboard.press("b")
    before = progress(page)
    page.get_by_role("button", name="Submit the new answer").click()
    wait_for_next(page, before)
    ready(page)
    assert progress(page).startswith("2 of ")
    assert focused_is_trial(page)
    vote.refresh_from_db()
    assert vote.label == ("A" if first.swapped else "B")
    assert [h["label"] for h in vote.history] == ["B" if first.swapped else "A"]
    assert Vote.objects.filter(trial__assignment__rater__external_id="undoer").count() == 1
    # The "z" key does the same.
    page.keyboard.press("z")
    expect(page.locator("#progress-text")).to_have_text(f"1 of {progress(page).split(' of ')[1]}")
    assert page.get_by_role("radio", name="B", exact=True).is_checked()
    page.get_by_role("link", name="keep your answer").click()
    expect(page.locator("#progress-text")).to_contain_text("2 of ")
    settle(page)
    for url, headers, body in rec.responses:
        texts = [url.lower(), " ".join(f"{k}: {v}" for k, v in headers.items()).lower(), body.decode("latin-1").lower()]
        for secret in wide_study.secrets:
            if "/static/" in url and secret == "repeat":
                continue
            assert not any(secret.lower() in t for t in texts), f"{secret!r} leaked by {url}"
    assert not [m for m in rec.console if "Content Security Policy" in m or "Error" in m], [(m, [u for u, _, _ in rec.responses][-8:]) for m in rec.console]
    context.close()
    connections.close_all()


def test_report_a_problem_is_stored_and_not_a_vote(app_url, browser, wide_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, wide_study.study, "reporter", {"width": 1440, "height": 900})
    toggle = page.get_by_role("button", name="Report a problem")
    assert toggle.get_attribute("aria-expanded") == "false" and page.get_by_role("button", name="Send report").is_hidden()
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    page.get_by_role("radio", name="Something else").check()
    page.get_by_role("button", name="Send report").click()
    expect(page.get_by_role("alert")).to_contain_text("Say in a few words what went wrong")
    page.get_by_role("radio", name="Something else").check()
    page.get_by_role("textbox", name="Details").fill("the right image is cut off")
    page.get_by_role("button", name="Send report").click()
    expect(page.get_by_role("status").filter(has_text="problem is reported")).to_be_visible()
    shot(page, "problem-reported-1440")
    problem = TrialProblem.objects.get()
    assert problem.kind == "other" and problem.text == "the right image is cut off"
    assert problem.trial.assignment.rater.external_id == "reporter"
    assert not Vote.objects.exists() and progress(page).startswith("1 of ")
    answer_keys(page)  # the trial still takes its answer
    assert Vote.objects.count() == 1
    context.close()
    connections.close_all()


def test_phone_has_one_tabbed_viewer_and_large_targets(app_url, browser, wide_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, wide_study.study, "phone", {"width": 390, "height": 844},
                               has_touch=True, is_mobile=True, device_scale_factor=2)
    answer_keys(page)  # the second trial: instructions collapsed, Undo shown
    tabs = page.get_by_role("tab")
    assert tabs.all_inner_texts() == ["Reference", "A", "B"]
    assert page.get_by_role("tab", name="Reference").get_attribute("aria-selected") == "true"
    assert page.locator("#pane-ref").is_visible() and page.locator("#pane-a").is_hidden()
    shot(page, "phone-reference")
    page.get_by_role("tab", name="A").click()
    assert page.locator("#pane-a").is_visible() and page.locator("#pane-ref").is_hidden()
    page.keyboard.press("ArrowRight")  # in the tab list: the next tab
    assert page.get_by_role("tab", name="B").get_attribute("aria-selected") == "true"
    assert page.locator("#pane-b").is_visible()
    page.locator("[data-trial]").focus()
    page.keyboard.press("ArrowLeft")  # elsewhere on the trial too
    assert page.locator("#pane-a").is_visible()
    # A swipe to the left shows the next image.
    page.locator("[data-viewer]").evaluate("""v => {
        const t = (x) => new Touch({identifier: 1, target: v, clientX: x, clientY: 300});
        v.dispatchEvent(new TouchEvent('touchstart', {touches: [t(300)], changedTouches: [t(300)], bubbles: true}));
        v.dispatchEvent(new TouchEvent('touchend', {touches: [], changedTouches: [t(120)], bubbles: true}));
    }""")
    assert page.locator("#pane-b").is_visible()
    # Two fingers spread to twice their distance zoom to twice the scale, around their midpoint.
    before = level_shown(page)
    page.locator("#pane-b [data-scroller]").evaluate("""s => {
        const t = (id, x) => new Touch({identifier: id, target: s, clientX: x, clientY: 400});
        const fire = (type, a, b) => s.dispatchEvent(new TouchEvent(type, {touches: type === 'touchend' ? [] : [a, b],
            changedTouches: [a, b], bubbles: true, cancelable: true}));
        fire('touchstart', t(1, 150), t(2, 250));
        fire('touchmove', t(1, 100), t(2, 300));
        fire('touchend', t(1, 100), t(2, 300));
    }""")
    assert abs(level_shown(page) - 2 * before) <= 1 and level_shown(page) == true_scale(page)
    assert page.locator("#pane-b [data-scroller]").evaluate("e => e.scrollLeft") > 0
    page.get_by_role("button", name="Fit width").click()
    # Tap targets of at least 44 px.
    small = page.evaluate("""() => Array.from(document.querySelectorAll(
        '[data-trial] button, [data-trial] label.choice-button, [data-trial] [role=tab], [data-trial] summary, '
        + '[data-trial] .trial-links a, [data-trial] label.switch')).filter(e => e.offsetParent !== null)
        .map(e => [e.textContent.trim().slice(0, 20), e.getBoundingClientRect()])
        .filter(([_, r]) => r.height < 44 || r.width < 44).map(([t, r]) => `${t} ${r.width}x${r.height}`)""")
    assert small == []
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    # Reading order and Tab order follow the screen: verdict, confidence, every axis, then Submit.
    order = ["verdict", "confidence", *[f"axis{i}" for i in range(axis_groups(page).count())], "rationale", "submit"]
    tops = page.evaluate("""() => {
        const f = document.querySelector('[data-answer-form]');
        const els = [f.querySelector('.verdict'), f.querySelector('[data-field=confidence]'),
            ...f.querySelectorAll('[data-axis-fieldset]'), f.querySelector('#rationale'), f.querySelector('button[type=submit]')];
        return els.map(e => e.getBoundingClientRect().top);
    }""")
    assert tops == sorted(tops) and len(tops) == len(order)
    page.get_by_role("radio", name="A", exact=True).focus()
    reached: list[str] = []
    for _ in range(40):
        page.keyboard.press("Tab")
        name = page.evaluate("""() => { const e = document.activeElement;
            if (e.name && e.name.startsWith('axis:')) return e.name;
            if (e.name === 'confidence') return 'confidence';
            if (e.id === 'rationale') return 'rationale';
            return (e.textContent || '').trim().startsWith('Submit') ? 'submit' : e.tagName; }""")
        if not reached or reached[-1] != name:
            reached.append(name)
        if name == "submit":
            break
    wanted = ["confidence", *[n for n in reached if n.startswith("axis:")], "rationale", "submit"]
    assert [n for n in reached if n in wanted] == wanted and len(wanted) == axis_groups(page).count() + 3
    page.get_by_role("tab", name="Reference").click()
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    shot(page, "phone-form")
    context.close()
    connections.close_all()
