"""The trial page sends a lost answer again (static/annotation/trial.js; docs/deploy.md, "Losing a node").

In a real browser: an answer whose response never arrives (the server stored it, then the
connection dropped, as when the node serving it is killed) and an answer the load balancer turned
away with a 502 are both sent again with the same idempotency key; the page goes on to the next
trial and the database holds exactly one vote for the trial. A 400 is not sent again.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from annotation.models import Vote
from tests.e2e.test_rater_browser import app_url, browser, progress, settle, study, wait_for_next  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def answer(page: Any) -> None:
    page.keyboard.press("a")
    page.keyboard.press("4")
    for _ in range(page.locator("fieldset[data-axis-fieldset]").count()):
        page.keyboard.press("2")
    page.keyboard.press("Enter")


@pytest.mark.parametrize("fault", ["stored-then-dropped", "502-from-the-load-balancer"])
def test_a_lost_answer_is_sent_again_and_stored_once(browser, app_url: str, study, fault: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    posts: list[str] = []

    def route(r: Any) -> None:
        posts.append(r.request.post_data or "")
        if len(posts) > 1:
            r.continue_()
        elif fault == "stored-then-dropped":
            r.fetch()  # the server stores the answer...
            r.abort("connectionreset")  # ...and its response is lost on the way back
        else:
            r.fulfill(status=502, body="bad gateway")

    page.route("**/vote/", route)
    page.goto(f"{app_url}/s/{study.study.link_token}/?participant=resend-{fault}")
    settle(page)
    before = progress(page)
    answer(page)
    wait_for_next(page, before)
    settle(page)
    assert len(posts) == 2 and posts[0] == posts[1]  # the same form, the same idempotency key
    assert Vote.objects.count() == 1
    context.close()
