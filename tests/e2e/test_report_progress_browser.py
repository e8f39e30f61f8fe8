"""Issue 40 item 5 in a real browser (Chromium through Playwright): a computation started from a page
shows its progress at once and then its result, with no reload.

- The judge ablation: "Compute" answers with "Computing the ablation…", and htmx swaps the result in
  from its own request.
- A plan without a broker (the embedded default): "Plan" leads at once to the plan's page with its
  progress bar, the run computes in a thread of the server, and the page's poll shows the result.
  The thread needs a server database (the in-memory SQLite of the tests is one shared connection),
  so that walk runs on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.calibration.cal_factories import make_calibration_study
from tests.e2e.test_rater_browser import app_url, browser  # noqa: F401
from tests.e2e.test_researcher_pages_browser import logged_in_page
from tests.ranking.rank_factories import add_votes, make_ranked_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_judge_ablation_shows_its_progress_then_its_result(
    browser: Any,  # noqa: F811
    app_url: str,  # noqa: F811
    researcher: Any,
) -> None:
    cal = make_calibration_study("browser-ablation", researchers=[researcher])
    page = logged_in_page(browser, app_url, researcher.username)
    page.goto(f"{app_url}/studies/{cal.study.slug}/judge-ablation/")
    page.get_by_label("Bootstrap resamples").fill("40")
    with page.expect_response(lambda r: "part=result" in r.url, timeout=120_000) as result:
        page.get_by_role("button", name="Compute").click()
        # The form's answer: the indicator, before the result's own request has answered.
        page.wait_for_selector("#ablation-result[aria-busy=true] progress", state="attached")
    assert result.value.status == 200
    page.get_by_role("heading", name="By number of judges").wait_for()
    assert page.locator("#ablation-result progress").count() == 0
    assert page.locator("#ablation-result[aria-busy]").count() == 0


@pytest.mark.postgres
def test_a_plan_shows_its_progress_at_once_and_its_result_by_the_poll(
    browser: Any,  # noqa: F811
    app_url: str,  # noqa: F811
    researcher: Any,
    settings: Any,
) -> None:
    settings.ARBITER_TASKS_IN_BACKGROUND = True
    ranked = make_ranked_study("browser-pilot", n_pages=8, n_human_pages=8, researchers=[researcher])
    add_votes(ranked, rng=np.random.default_rng(4), n_raters=3)
    page = logged_in_page(browser, app_url, researcher.username)
    page.goto(f"{app_url}/studies/browser-pilot/plan/")
    page.locator("#studies").fill("60")  # "Simulated studies"; the check on fresh studies is its own field
    page.locator("#verify").fill("0")
    page.get_by_role("button", name="Plan").click()
    page.wait_for_url("**/plan/*/")
    # The plan's page came back before the plan: its progress bar and the poll, then the result.
    seen_progress = page.locator("#plan-run progress").count() == 1
    page.locator("#votes-needed").wait_for(timeout=120_000)
    assert page.locator("#plan-run progress").count() == 0 and page.locator("#plan-run[hx-get]").count() == 0
    assert seen_progress, "the plan was done before its page answered: it ran inside the request"
