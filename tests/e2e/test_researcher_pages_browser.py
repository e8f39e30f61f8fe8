"""Issue 40 items 4 and 5 in a real browser (Chromium through Playwright): the upload form suggests
the slug from the title as it is typed, and the agreement page shows its numbers with a
placeholder per figure, then every figure drawn (each an SVG on a request of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.annotation.factories import make_rated_study
from tests.e2e.test_rater_browser import app_url, browser  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def logged_in_page(browser: Any, app_url: str, username: str) -> Any:  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(120_000)  # a shared machine's first request imports every view
    page.goto(f"{app_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-arbiter-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    return page


def test_the_upload_form_suggests_the_slug_from_the_title(browser: Any, app_url: str, researcher: Any) -> None:  # noqa: F811
    page = logged_in_page(browser, app_url, researcher.username)
    page.goto(f"{app_url}/studies/new/")
    page.get_by_label("Title", exact=True).press_sequentially("Table fidelity, März run")
    slug = page.get_by_label("Slug", exact=False)
    assert slug.input_value() == "table-fidelity-marz-run"
    slug.fill("mine")  # a slug typed by the researcher is kept
    page.get_by_label("Title", exact=True).press_sequentially(" 2")
    assert slug.input_value() == "mine"


def test_the_agreement_page_shows_its_numbers_then_its_figures(
    browser: Any, app_url: str, researcher: Any, tmp_path: Path  # noqa: F811
) -> None:
    make_rated_study("browser-rated", researchers=[researcher], tmp_dir=tmp_path)
    page = logged_in_page(browser, app_url, researcher.username)
    page.goto(f"{app_url}/studies/browser-rated/agreement/", wait_until="domcontentloaded")
    # The page answers with its progress indicator; its own htmx request brings the numbers.
    assert page.get_by_text("Computing the agreement").count() + page.get_by_text("Fleiss κ").count() >= 1
    page.get_by_text("Fleiss κ").first.wait_for(state="visible", timeout=60_000)
    assert page.get_by_text("Computing the agreement").count() == 0
    figures = page.locator("figure.plot img")
    assert figures.count() == 4
    page.wait_for_function(
        "() => [...document.querySelectorAll('figure.plot img')].every(i => i.complete && i.naturalWidth > 0)",
        timeout=120_000,
    )
    for i in range(4):
        box = figures.nth(i).bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 50
