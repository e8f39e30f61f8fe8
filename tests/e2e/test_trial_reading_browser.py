"""The trial page read without panning by hand (issue 45 item 4), in a real browser.

Pages 1,280 CSS px wide (a render's viewport), the reference with six sections, one candidate
near it, one with the sections at other places and one three times as tall, each with its blocks
(a title and a text block per section, as the renderer's DOM export gives them). At 1440x900 and
1280x800: the title bars (15 CSS px tall) are at least 10 px on screen in all three panes at the
default view; the keys pan the three panes together with the trial focused (nothing tabbed into),
and after PageDown, End or Space the same section of each page is at the panes' focus point (and
under the loupe);
``r`` opens "Report a problem" and Esc closes it; the key strip lists those keys.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import pytest
from django.db import connections, transaction
from PIL import Image, ImageDraw

from annotation.images import clean_image, staged_images
from annotation.models import Candidate, Page
from annotation.services.trial_screens import trial_screens_forget
from tests.annotation.rater_factories import make_rater_study, stored_image_get_or_create
from tests.e2e.test_rater_browser import app_url, browser, scheduled_with_secrets  # noqa: F401
from tests.e2e.test_trial_page_browser import open_trial, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

WIDTH = 1280
TITLE = 15  # the title bar's height in CSS px: body text of 15 px
# (height, section tops): the reference, then the three systems' candidates.
REFERENCE = (2400, (100, 450, 800, 1150, 1500, 1850))
CANDIDATES = (
    (2500, (120, 480, 840, 1200, 1560, 1920)),
    (2400, (100, 300, 1000, 1200, 1700, 2100)),
    (7200, (300, 1350, 2400, 3450, 4500, 5550)),
)


def sectioned_page(height: int, tops: tuple[int, ...]) -> tuple[bytes, list[dict[str, Any]]]:
    """A page of sections (a 15 px title bar, then lines of text) and its blocks."""
    image = Image.new("RGB", (WIDTH, height), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    blocks: list[dict[str, Any]] = []
    ends = (*tops[1:], height)
    for k, (top, end) in enumerate(zip(tops, ends, strict=True)):
        draw.rectangle((40, top, 700, top + TITLE - 1), fill=(30 + 30 * k, 40, 120))
        for y in range(top + 40, end - 20, 14):
            draw.rectangle((40, y, 40 + (y * 37) % 1100 + 100, y + 6), fill=(70, 70, 70))
        blocks.append({"type": "title", "bbox_1000": [31.25, 1000 * top / height, 546.88, 1000 * (top + TITLE) / height]})
        blocks.append({"type": "text", "bbox_1000": [31.25, 1000 * (top + 40) / height, 968.75, 1000 * (end - 20) / height]})
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue(), blocks


def sectioned_study(*, slug: str, reference_blocks: bool = True):  # type: ignore[no-untyped-def]
    """``make_rater_study``'s study (no media neutralized), its pages and candidates replaced by
    sectioned pages with their blocks."""
    rs = make_rater_study(slug=slug, pages=4, failed_render=False, neutralize=False, targets_every=0)
    with staged_images() as staging, transaction.atomic():
        for page in Page.objects.filter(study=rs.study):
            png, blocks = sectioned_page(*REFERENCE)
            page.image = stored_image_get_or_create(staging=staging, image=clean_image(png, where="ref.png"))
            page.blocks = blocks if reference_blocks else []
            page.save(update_fields=["image", "blocks"])
            for candidate in Candidate.objects.filter(page=page).select_related("system"):
                png, blocks = sectioned_page(*CANDIDATES[candidate.system.position])
                candidate.image = stored_image_get_or_create(staging=staging, image=clean_image(png, where="c.png"))
                candidate.blocks = blocks
                candidate.save(update_fields=["image", "blocks"])
        staging.publish()
    return scheduled_with_secrets(rs)


# Each pane: its page's scale, its scroll, its sizes, its image's natural size and its blocks.
PANES = """() => [...document.querySelectorAll('[data-scroller]')].filter(s => s.offsetParent).map(s => {
    const c = s.querySelector('[data-canvas]'), i = c.querySelector('.page-img:not(.flicker-ref)');
    const r = i.getBoundingClientRect();
    return {id: s.closest('.pane').id, scale: r.width / i.naturalWidth, shownH: r.height, naturalH: i.naturalHeight,
            top: s.scrollTop, left: s.scrollLeft, range: s.scrollHeight - s.clientHeight, paneW: s.clientWidth,
            paneH: s.clientHeight, canvasW: c.offsetWidth, blocks: JSON.parse(i.getAttribute('data-blocks') || '[]')};
})"""


def loaded(page: Any) -> None:
    page.wait_for_function("() => [...document.querySelectorAll('[data-trial] img')].every(i => i.complete && i.naturalWidth)")
    page.wait_for_function("() => document.querySelector('[data-minimap][data-thumb-width]')")
    page.wait_for_timeout(150)


def section_at(pane: dict[str, Any], u: float | None = None) -> float:
    """Where the pane's focus point (or the point ``u``, thousandths of its page's height) is, in
    sections: k + the share of section k above it. The focus point is the view's top edge at the
    top, its bottom edge at the end (static/annotation/trial.js)."""
    if u is None:
        u = 1000 * (pane["top"] / pane["range"] if pane["range"] > 0 else 0)
    tops = [b[1] for b in pane["blocks"] if b[0] == "title"]
    edges = [0.0, *tops, 1000.0]
    for k in range(len(edges) - 1):
        if u <= edges[k + 1]:
            return k + (u - edges[k]) / (edges[k + 1] - edges[k])
    return float(len(edges) - 1)


def assert_aligned(panes: list[dict[str, Any]]) -> None:
    places = [section_at(p) for p in panes]
    assert max(places) - min(places) < 0.08, places


@pytest.mark.parametrize("size", [(1440, 900), (1280, 800)], ids=["1440x900", "1280x800"])
def test_fifteen_px_text_is_ten_px_and_the_keys_pan_three_aligned_panes(size, app_url, browser) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    width, height = size
    rs = sectioned_study(slug=f"reading-{width}")
    context, page = open_trial(browser, app_url, rs.study, f"reader-{width}", {"width": width, "height": height})
    loaded(page)
    shot(page, f"reading-{width}")
    panes = page.evaluate(PANES)
    assert [p["id"] for p in panes] == ["pane-ref", "pane-a", "pane-b"]
    for p in panes:
        # The known element: a section's title bar, 15 CSS px tall, as tall on screen as that.
        on_screen = TITLE * p["shownH"] / p["naturalH"]
        hidden = 1 - p["paneW"] / p["canvasW"]
        print(f"{width}x{height} {p['id']}: scale {p['scale']:.4f}, 15 px -> {on_screen:.2f} px, {hidden:.0%} of the width hidden")
        assert p["scale"] >= 2 / 3 and on_screen >= 10, p
        assert p["blocks"] and all(len(b) == 3 for b in p["blocks"])  # geometry only: type, y0, y1
    assert {p["naturalH"] for p in panes} != {panes[0]["naturalH"]}  # pages of different heights

    # The keys act on the trial itself: nothing was tabbed into.
    assert page.evaluate("() => document.activeElement.matches('[data-trial]')")
    page.keyboard.press("PageDown")
    page.keyboard.press("PageDown")
    panes = page.evaluate(PANES)
    assert all(p["top"] > 0 for p in panes), panes
    assert_aligned(panes)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Space")
    after = page.evaluate(PANES)
    assert all(a["top"] > p["top"] for a, p in zip(after, panes, strict=True)), (panes, after)
    assert_aligned(after)
    page.keyboard.press("Shift+Space")
    assert all(b["top"] < a["top"] for a, b in zip(after, page.evaluate(PANES), strict=True))
    page.keyboard.press("PageUp")
    assert_aligned(page.evaluate(PANES))
    page.keyboard.press("End")
    panes = page.evaluate(PANES)
    assert all(abs(p["top"] - p["range"]) <= 1 for p in panes), panes
    shot(page, f"reading-end-{width}")
    page.keyboard.press("Home")
    assert all(p["top"] == 0 for p in page.evaluate(PANES))
    page.keyboard.press("ArrowRight")
    panes = page.evaluate(PANES)
    assert all(p["left"] > 0 for p in panes) and len({p["left"] for p in panes}) == 1, panes
    page.keyboard.press("ArrowLeft")
    assert all(p["left"] == 0 for p in page.evaluate(PANES))
    # A scroll by hand (the wheel over B) moves the others to the same section too.
    page.locator("#pane-b [data-scroller]").hover()
    page.mouse.wheel(0, 900)
    page.wait_for_timeout(300)
    panes = page.evaluate(PANES)
    assert all(p["top"] > 0 for p in panes), panes
    assert_aligned(panes)
    # The overview marks each pane's own part of its page.
    marks = page.evaluate("""() => [...document.querySelectorAll('[data-minimap-page]')].map(m => {
        const f = m.querySelector('.minimap-frame').getBoundingClientRect(), v = m.querySelector('[data-minimap-view]').getBoundingClientRect();
        return (v.top - f.top) / f.height; })""")
    for mark, p in zip(marks, panes, strict=True):
        assert abs(mark - p["top"] / (p["range"] + p["paneH"])) < 0.01, (marks, panes)

    # The loupe (hold l over the reference) shows the same part of each page: the same section.
    box = page.locator("#pane-ref [data-scroller]").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.3)
    canvas = page.locator("#pane-ref [data-canvas]").bounding_box()
    below_top = (box["y"] + box["height"] * 0.3 - canvas["y"]) / canvas["width"] * WIDTH  # natural px
    page.keyboard.down("l")
    page.wait_for_timeout(100)
    loupes = page.evaluate("""() => [...document.querySelectorAll('[data-loupe]')].filter(b => !b.hidden).map(b => {
        const r = b.getBoundingClientRect(), i = b.querySelector('img').getBoundingClientRect();
        return {pane: b.closest('.pane').id, y0: r.top + b.clientTop - i.top}; })""")
    page.keyboard.up("l")
    assert [lp["pane"] for lp in loupes] == ["pane-ref", "pane-a", "pane-b"]
    offset = below_top - loupes[0]["y0"]  # where the point is in every loupe box
    places = [section_at(p, 1000 * (lp["y0"] + offset) / p["naturalH"]) for p, lp in zip(panes, loupes, strict=True)]
    assert max(places) - min(places) < 0.08, places

    # The key strip says so, and r opens the problem report (Esc closes it, the trial keeps the keys).
    strip = page.get_by_role("note", name="Keyboard shortcuts")
    assert "scroll the three pages together" in strip.inner_text() and "report a problem" in strip.inner_text()
    page.locator("[data-trial]").focus()
    page.keyboard.press("r")
    toggle = page.get_by_role("button", name="Report a problem")
    assert toggle.get_attribute("aria-expanded") == "true" and toggle.get_attribute("aria-keyshortcuts") == "r"
    assert page.evaluate("() => document.activeElement.closest('[data-problem]') !== null")
    page.keyboard.press("a")  # inside the report: not a verdict
    assert page.locator("input[name=verdict]:checked").count() == 0
    page.keyboard.press("Escape")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert page.evaluate("() => document.activeElement.matches('[data-trial]')")
    page.keyboard.press("End")
    assert all(abs(p["top"] - p["range"]) <= 1 for p in page.evaluate(PANES))
    context.close()
    connections.close_all()


def test_a_reference_without_blocks_scrolls_proportionally_and_the_candidates_by_blocks(app_url, browser) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    rs = sectioned_study(slug="reading-png-ref", reference_blocks=False)
    context, page = open_trial(browser, app_url, rs.study, "reader-png", {"width": 1440, "height": 900})
    loaded(page)
    html = page.content()
    ref = page.locator("#pane-ref .page-img")
    assert ref.get_attribute("data-blocks") is None
    for secret in rs.secrets:  # the blocks carry no system's name or id
        assert secret not in html, secret
    for _ in range(3):
        page.keyboard.press("PageDown")
    panes = page.evaluate(PANES)
    shares = [p["top"] / p["range"] for p in panes]
    # A and B by their blocks; the reference proportionally to A (the hub).
    assert_aligned(panes[1:])
    assert abs(shares[0] - shares[1]) < 0.01, shares
    blocks = json.loads(page.locator("#pane-a .cand-img").get_attribute("data-blocks"))
    assert {b[0] for b in blocks} == {"title", "text"}
    context.close()
    connections.close_all()


def test_a_pairwise_trial_scrolls_its_two_images_together_by_their_blocks(app_url, browser, researcher) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """The other kind with two images (docs/study-kinds.md "The rater pages"): the same keys, the
    same alignment, and r for the problem report."""
    from tests.annotation.test_kind_rater_pages import kind_study
    from tests.e2e.test_kind_rater_browser import pass_comprehension

    study = kind_study("pairwise", researcher)
    with staged_images() as staging, transaction.atomic():
        for candidate in Candidate.objects.filter(page__study=study).select_related("system"):
            png, blocks = sectioned_page(*CANDIDATES[candidate.system.position % len(CANDIDATES)])
            candidate.image = stored_image_get_or_create(staging=staging, image=clean_image(png, where="c.png"))
            candidate.blocks = blocks
            candidate.save(update_fields=["image", "blocks"])
        staging.publish()
    # The images changed after scheduling: the trials' stored screens are made again when shown,
    # as the display pass and a bundle update do (decision 0079).
    trial_screens_forget(study.pk)
    context, page = open_trial(browser, app_url, study, "reader-pairwise", {"width": 1280, "height": 800})
    pass_comprehension(page, study)
    page.wait_for_selector("[data-trial][data-ready]")
    loaded(page)
    panes = page.evaluate(PANES)
    assert len(panes) == 2 and all(p["scale"] >= 2 / 3 and p["blocks"] for p in panes), panes
    page.locator("[data-trial]").focus()
    for _ in range(3):
        page.keyboard.press("PageDown")
    panes = page.evaluate(PANES)
    assert all(p["top"] > 0 for p in panes), panes
    assert_aligned(panes)
    page.keyboard.press("End")
    assert all(abs(p["top"] - p["range"]) <= 1 for p in page.evaluate(PANES))
    page.keyboard.press("r")
    assert page.get_by_role("button", name="Report a problem").get_attribute("aria-expanded") == "true"
    context.close()
    connections.close_all()
