"""The trial page's view of tall pages in a real browser (issue 40, "Legible by default").

At 1440x900 and 1280x800, with pages of the issue's shape (420 x 1111): the default view shows
every page at one true scale of at least 60 % and the readout says that scale; the overview strip
marks the panes' view after a scroll and moves them on a click (the others to the same share of
their own pages: these pages have no blocks, so they scroll proportionally, issue 45); the loupe (hold l) shows the same
part of the three pages at 100 %. The scale's direction is read from the buttons, the demo's
instructions and the stored vote; trial 1's instructions show that they scroll, and a cut axis
description is whole one hover, focus or tap away.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from annotation.models import Study, Vote
from tests.e2e.test_rater_browser import app_url, browser, progress, settle, wait_for_next  # noqa: F401
from tests.e2e.test_rater_effort_browser import demo_study, keys_for_agreeing_trial  # noqa: F401
from tests.e2e.test_trial_page_browser import (
    LONG,
    axis_groups,
    five_axis_study,
    inside,
    open_trial,
    ready,
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SIZES = [(1440, 900), (1280, 800)]
SIZE_IDS = ["1440x900", "1280x800"]

# Each visible pane: its page's true scale (rendered / natural width), scroll and sizes.
PANES = """() => [...document.querySelectorAll('[data-scroller]')].filter(s => s.offsetParent).map(s => {
    const c = s.querySelector('[data-canvas]'), i = c.querySelector('.page-img');
    return {id: s.closest('.pane').id, scale: i.getBoundingClientRect().width / i.naturalWidth, src: i.getAttribute('src'),
            top: s.scrollTop, left: s.scrollLeft, paneH: s.clientHeight, paneW: s.clientWidth,
            canvasH: c.offsetHeight, canvasW: c.offsetWidth, canvasLeft: c.offsetLeft};
})"""

# Each overview thumbnail: its pane, image URL, and where its frame and view mark are on screen.
MINIMAP = """() => [...document.querySelectorAll('[data-minimap-page]')].map(m => {
    const f = m.querySelector('.minimap-frame').getBoundingClientRect();
    const v = m.querySelector('[data-minimap-view]').getBoundingClientRect();
    return {pane: m.getAttribute('data-minimap-page'), src: m.querySelector('img').getAttribute('src'),
            frame: [f.left, f.top, f.width, f.height], mark: [v.left, v.top, v.width, v.height]};
})"""

# Each visible loupe: the page region it shows, in the page's natural pixels, and its image's scale.
LOUPES = """() => [...document.querySelectorAll('[data-loupe]')].filter(b => !b.hidden).map(b => {
    const r = b.getBoundingClientRect(), i = b.querySelector('img').getBoundingClientRect();
    const img = b.querySelector('img');
    const x0 = r.left + b.clientLeft - i.left, y0 = r.top + b.clientTop - i.top;
    return {pane: b.closest('.pane').id, scale: i.width / img.naturalWidth, naturalH: img.naturalHeight,
            region: [x0, y0, x0 + b.clientWidth, y0 + b.clientHeight], box: [r.left, r.top, r.width, r.height]};
})"""


@pytest.fixture
def tall_pages():  # type: ignore[no-untyped-def]
    """Pages of the issue's shape, 420 x 1111 (candidates 20-60 px taller), five active axes."""
    return five_axis_study(slug="tall-420", image_size=(420, 1111))


def loaded(page: Any) -> None:
    """Every image is in, and the overview strip has taken its size (one animation frame)."""
    page.wait_for_function("() => [...document.querySelectorAll('[data-trial] img')].every(i => i.complete && i.naturalWidth)")
    page.wait_for_function("() => document.querySelector('[data-minimap][data-thumb-width]')")
    page.wait_for_timeout(150)


def readout(page: Any) -> str:
    return page.get_by_role("status", name="Zoom level").inner_text()


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_tall_pages_are_legible_by_default_with_the_overview_and_the_loupe(size, app_url, browser, tall_pages) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    width, height = size
    context, page = open_trial(browser, app_url, tall_pages.study, f"view-{width}", {"width": width, "height": height})
    loaded(page)
    shot(page, f"tall-first-trial-{width}")
    panes = page.evaluate(PANES)
    assert [p["id"] for p in panes] == ["pane-ref", "pane-a", "pane-b"]
    # One true scale for the three pages, at least 60 % of their pixels, and the readout says it.
    scales = [p["scale"] for p in panes]
    print(f"default scale at {width}x{height}: {scales[0]:.3f}, panes {panes[0]['paneW']}x{panes[0]['paneH']}")
    assert min(scales) >= 0.6 and max(scales) - min(scales) < 0.01, scales
    assert readout(page) == f"{round(scales[0] * 100)}%"
    assert inside(page, page.get_by_role("button", name="Submit", exact=True))
    assert inside(page, axis_groups(page).last)

    # The overview strip: the three pages through the panes' own (blinded) image URLs.
    strip = page.get_by_role("group", name="Overview of the pages")
    assert strip.is_visible()
    thumbs = page.evaluate(MINIMAP)
    assert [t["pane"] for t in thumbs] == ["pane-ref", "pane-a", "pane-b"]
    assert [t["src"] for t in thumbs] == [p["src"] for p in panes]
    # Scroll the reference 40 % down: every pane follows, 40 % down its own page (pages without blocks
    # scroll proportionally, issue 45), and every mark shows that part of its page.
    page.locator("#pane-ref [data-scroller]").evaluate(
        "s => { s.scrollTop = 0.4 * (s.scrollHeight - s.clientHeight); s.dispatchEvent(new Event('scroll')); }")
    page.wait_for_timeout(150)
    panes = page.evaluate(PANES)
    assert panes[0]["top"] > 0 and all(abs(p["top"] / (p["canvasH"] - p["paneH"]) - 0.4) < 0.005 for p in panes), panes
    for pane, thumb in zip(panes, page.evaluate(MINIMAP), strict=True):
        fx, fy, fw, fh = thumb["frame"]
        mx, my, mw, mh = thumb["mark"]
        assert abs(my - (fy + fh * pane["top"] / pane["canvasH"])) <= 2, (pane, thumb)
        assert abs(mh - fh * min(pane["paneH"], pane["canvasH"] - pane["top"]) / pane["canvasH"]) <= 2, (pane, thumb)
        assert mx >= fx - 1 and mx + mw <= fx + fw + 1
    # A click low on B's thumbnail brings that part of the pages into the middle of every pane.
    fx, fy, fw, fh = page.evaluate(MINIMAP)[2]["frame"]
    page.mouse.click(fx + fw / 2, fy + fh * 0.85)
    page.wait_for_timeout(150)
    panes = page.evaluate(PANES)
    b = panes[2]
    expected = min(0.85 * b["canvasH"] - b["paneH"] / 2, b["canvasH"] - b["paneH"])
    assert abs(b["top"] - expected) <= 3, (b, expected)
    # The others follow, to the same share of their own pages.
    share = b["top"] / (b["canvasH"] - b["paneH"])
    assert all(abs(p["top"] - share * (p["canvasH"] - p["paneH"])) <= 1 for p in panes), panes

    # The loupe: hold l over A and the same part of the three pages is shown at 100 %.
    scroller = page.locator("#pane-a [data-scroller]").bounding_box()
    px, py = scroller["x"] + scroller["width"] * 0.5, scroller["y"] + scroller["height"] * 0.4
    page.mouse.move(px, py)
    canvas = page.locator("#pane-a [data-canvas]").bounding_box()
    natural_x = (px - canvas["x"]) / canvas["width"] * 420
    natural_y = (py - canvas["y"]) / canvas["width"] * 420
    page.keyboard.down("l")
    page.wait_for_timeout(100)
    loupes = page.evaluate(LOUPES)
    shot(page, f"tall-loupe-{width}")
    assert [lp["pane"] for lp in loupes] == ["pane-ref", "pane-a", "pane-b"]
    assert all(abs(lp["scale"] - 1) < 0.005 for lp in loupes), loupes
    # The same part of each page: across, the same pixels; down, the same share of each page's height
    # (these pages have no blocks, so they are aligned proportionally, as the panes scroll).
    a = loupes[1]
    x0, y0, x1, y1 = a["region"]
    assert x0 <= natural_x <= x1 and y0 <= natural_y <= y1, (a, natural_x, natural_y)
    share, below = natural_y / a["naturalH"], natural_y - y0  # the point, down A's page and in its box
    for lp in loupes:
        assert all(abs(u - v) <= 1 for u, v in zip(lp["region"][0::2], a["region"][0::2], strict=True)), loupes
        assert abs(lp["region"][1] + below - share * lp["naturalH"]) <= 2, (loupes, share)
    assert x1 - x0 > 100 and y1 - y0 > 100  # a region, not a sliver
    assert page.get_by_role("button", name="Loupe").get_attribute("aria-pressed") == "true"
    page.keyboard.up("l")
    assert page.evaluate(LOUPES) == []

    # The whole page is one key away, and the same key brings the default back.
    default = readout(page)
    page.keyboard.press("0")
    assert page.get_by_role("button", name="Fit page").get_attribute("aria-pressed") == "true"
    panes = page.evaluate(PANES)
    assert all(p["canvasH"] <= p["paneH"] + 1 for p in panes), panes
    assert readout(page) == f"{round(panes[0]['scale'] * 100)}%"
    page.keyboard.press("0")
    assert readout(page) == default
    assert page.get_by_role("button", name="Fit page").get_attribute("aria-pressed") == "false"
    # Zoom keeps the three panes at one scale, read out truly.
    page.keyboard.press("+")
    panes = page.evaluate(PANES)
    assert readout(page) == f"{round(panes[0]['scale'] * 100)}%" != default
    assert max(p["scale"] for p in panes) - min(p["scale"] for p in panes) < 0.01

    # Four keys when the axes agree with the verdict, and the next trial opens at the default again
    # unless zoomed (here: zoomed, so the chosen scale stays).
    zoomed = readout(page)
    assert keys_for_agreeing_trial(page, follow=True) == 4
    loaded(page)
    assert readout(page) == zoomed
    page.keyboard.press("0")
    page.keyboard.press("0")  # back to the default
    assert readout(page) == default
    context.close()
    connections.close_all()


def test_the_scale_runs_one_way_on_buttons_instructions_and_votes(app_url, browser, demo_study, tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from annotation.services.votes_csv import votes_export_csv

    context, page = open_trial(browser, app_url, demo_study, "direction", {"width": 1440, "height": 900})
    # The buttons: "A much better" first, on A's side, with key 1.
    group = axis_groups(page).first
    labels = group.locator("label")
    texts = [t.rsplit(None, 1) for t in labels.all_inner_texts()]
    assert texts == [["A much better", "1"], ["A better", "2"], ["Equal", "3"], ["B better", "4"], ["B much better", "5"]]
    xs = [labels.nth(i).bounding_box()["x"] for i in range(5)]
    assert xs == sorted(xs)
    assert page.locator("#pane-a").bounding_box()["x"] < page.locator("#pane-b").bounding_box()["x"]
    # The demo's instructions say it the same way.
    instructions = page.locator("details[data-instructions] .markdown").inner_text()
    assert "A much better (the button nearest A, key 1)" in instructions
    assert instructions.index("A much better") < instructions.index("B much better (key 5)")
    assert "−2" not in instructions and "+2" not in instructions
    # The stored vote: key 1 on every axis is +2 for the candidate shown as A.
    before = progress(page)
    for key in ["a", "4", *["1"] * axis_groups(page).count(), "Enter"]:
        page.keyboard.press(key)
    wait_for_next(page, before)
    ready(page)
    vote = Vote.objects.get(trial__assignment__rater__external_id="direction")
    shown_a = -1 if vote.trial.swapped else 1  # canonical A is the shown A unless swapped
    assert vote.axis_scores and set(vote.axis_scores.values()) == {2 * shown_a}, vote.axis_scores
    assert vote.label == ("A" if shown_a == 1 else "B")
    # ... and the votes CSV: positive when system_a is better, agreeing with the label.
    path = Path(tmp_path) / "votes.csv"
    votes_export_csv(study=Study.objects.get(pk=demo_study.pk), path=path)
    rows = [r for r in csv.DictReader(path.open()) if r["rater"] == "direction"]
    assert len(rows) == 1
    axes = {k: v for k, v in rows[0].items() if k.startswith("axis:") and v != ""}
    assert axes and set(axes.values()) == {"2" if rows[0]["label"] == "A" else "-2"}, rows[0]
    context.close()
    connections.close_all()


def test_trial_one_instructions_show_that_they_scroll(app_url, browser, demo_study) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, demo_study, "reader", {"width": 1280, "height": 800})
    details = page.locator("details[data-instructions]")
    box = details.locator(".markdown")
    assert details.evaluate("d => d.open")
    cut = box.evaluate("b => b.scrollHeight > b.clientHeight + 2")
    more = page.locator("[data-more]")
    if not cut:  # whole: nothing to show
        assert more.is_hidden()
    else:
        assert more.is_visible() and "More instructions below" in more.inner_text()
        assert box.evaluate("b => getComputedStyle(b).overflowY") == "scroll"  # its scroll bar shows
        assert box.get_attribute("tabindex") == "0"  # and it scrolls from the keyboard
        last = box.locator("li").last
        for _ in range(10):
            if "Back to the top" in more.inner_text():
                break
            more.click()
            page.wait_for_timeout(100)
        assert "Back to the top" in more.inner_text()
        b, li = box.bounding_box(), last.bounding_box()
        assert li["y"] >= b["y"] - 1 and li["y"] + li["height"] <= b["y"] + b["height"] + 1  # the last line, in view
    context.close()
    connections.close_all()


def test_a_cut_axis_description_is_one_hover_focus_or_tap_away(app_url, browser, tall_pages) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context, page = open_trial(browser, app_url, tall_pages.study, "describer", {"width": 1280, "height": 800})
    group = axis_groups(page).filter(has=page.locator("legend", has_text="Figures"))
    desc = group.locator(".axis-desc")
    full = group.locator(".axis-desc-full")
    assert desc.evaluate("d => d.scrollHeight > d.clientHeight + 1 || d.scrollWidth > d.clientWidth + 1")  # cut
    assert full.is_hidden()
    desc.hover()
    assert full.is_visible() and full.inner_text() == LONG
    assert inside(page, full)
    page.mouse.move(5, 5)
    assert full.is_hidden()
    group.get_by_role("radio", name="Equal").focus()  # the keyboard
    assert full.is_visible()
    page.locator("[data-trial]").focus()
    assert full.is_hidden()
    desc.click()  # a tap
    page.mouse.move(5, 5)
    assert full.is_visible()
    page.locator(".trial-progress").click()
    assert full.is_hidden()
    context.close()
    connections.close_all()
