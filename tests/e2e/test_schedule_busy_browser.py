"""Issue 45 point 7: "Create the schedule" (seconds on a large study) shows at once that it is
working, in a real browser: its status line and an indeterminate bar appear on submit and the button
is disabled against a second submission."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from tests.e2e.test_rater_browser import app_url, browser  # noqa: F401
from tests.e2e.test_researcher_pages_browser import logged_in_page
from tests.ranking.rank_factories import make_ranked_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_create_the_schedule_shows_that_it_is_working(browser: Any, app_url: str, admin_user: Any) -> None:  # noqa: F811
    make_ranked_study("busy-schedule", n_pages=6)
    page = logged_in_page(browser, app_url, admin_user.username)
    page.goto(app_url + reverse("research:study", args=["busy-schedule"]))
    assert not page.locator("#schedule-busy").is_visible()
    # The submission itself is stopped after the page's own handler has run (a listener added
    # later runs later), so the check reads the page as the researcher sees it while waiting,
    # without racing the server's answer.
    page.evaluate("() => document.addEventListener('submit', e => e.preventDefault())")
    page.get_by_role("button", name="Create the schedule").click()
    page.wait_for_function(
        "() => !document.querySelector('#schedule-busy').hidden"
        " && document.querySelector('#schedule-busy').offsetHeight > 0"
        " && document.querySelector('form[data-busy] button[type=submit]').disabled",
        timeout=2_000,  # the page shows it on submit; the bound only allows for a loaded machine
    )
    assert "Creating the schedule" in page.locator("#schedule-busy").inner_text()
    assert page.locator("form[data-busy]").get_attribute("aria-busy") == "true"
