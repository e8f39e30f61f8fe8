"""A real browser (Chromium through Playwright) against the live server: whole blocks by keyboard
and by mouse, resuming after the browser is closed, no CSP violations, and the blinding rule
checked on every response the browser saw (bodies, URLs, headers).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from annotation.models import Assignment, AssignmentState, Comparison, Page, StoredImage, Vote, axis_title
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Playwright's sync API runs an event loop in this thread; the ORM calls below are plain sync code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TRIALS = 6  # block of 5 comparisons + 1 hidden repeat


@pytest.fixture
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def app_url(transactional_db: None) -> Iterator[str]:
    """The app on a live server that serves one request at a time, in its own thread.

    The in-memory SQLite test database has one connection that all threads share (a browser
    fetching three images at once would misuse it), and on PostgreSQL a threaded server leaves
    keep-alive handler threads holding connections that block dropping the test database.
    """
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.servers.basehttp import WSGIServer
    from django.db import connections
    from django.test.testcases import LiveServerThread

    class SerialWSGIServer(WSGIServer):
        def __init__(self, *args: object, connections_override: object = None, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    class SerialLiveServerThread(LiveServerThread):
        server_class = SerialWSGIServer

    override = {c.alias: c for c in connections.all() if c.vendor == "sqlite" and c.is_in_memory_db()}
    for conn in override.values():
        conn.inc_thread_sharing()
    thread = SerialLiveServerThread("localhost", StaticFilesHandler, connections_override=override, port=0)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    try:
        yield f"http://localhost:{thread.port}"
    finally:
        thread.terminate()
        for conn in override.values():
            conn.dec_thread_sharing()


def settle(page) -> None:  # type: ignore[no-untyped-def]
    """Let the page finish loading (images) before the test reads the database."""
    page.wait_for_load_state("networkidle")


def scheduled_with_secrets(rs):  # type: ignore[no-untyped-def]
    """Schedule ``rs``'s study (2 blocks of 5, one repeat) and list all a rater must never see."""
    blocks_schedule(study=rs.study, blocks=2, block_size=5, repeats=1, min_gap=2, raters=[3, 1], seed=9)
    secrets = set(rs.secrets)
    for c in Comparison.objects.filter(study=rs.study):
        secrets.update({c.external_id, c.candidate_a.external_id, c.candidate_b.external_id})
    secrets.update(Page.objects.filter(study=rs.study).values_list("external_id", flat=True))
    for image in StoredImage.objects.all():
        secrets.update({image.sha256, image.file.name})
    rs.secrets = [*sorted(s for s in secrets if s), "repeat"]
    return rs


@pytest.fixture
def study():  # type: ignore[no-untyped-def]
    return scheduled_with_secrets(make_rater_study(slug="browser-study", pages=4, failed_render=False, targets_every=2))


class Recorder:
    """Every response the browser receives, and every console message."""

    def __init__(self) -> None:
        self.responses: list[tuple[str, dict[str, str], bytes]] = []
        self.unreadable: list[str] = []  # responses whose headers could not be read (not while closing)
        self.closing = False
        self.console: list[str] = []

    def attach(self, page) -> None:  # type: ignore[no-untyped-def]
        page.on("response", self._on_response)
        page.on("console", lambda msg: self.console.append(msg.text))

    def _on_response(self, response) -> None:  # type: ignore[no-untyped-def]
        try:
            body = response.body()
        except Exception:  # a redirect has no body to read
            body = b""
        try:
            headers = dict(response.all_headers())
        except Exception:  # the page closed while this response was read
            headers = dict(response.headers)  # without the security headers: scanned, but noted
            # A static file (the favicon) asked for by a document that a click is replacing can
            # lose its extra headers the same way; static files hold nothing of a study.
            if not self.closing and "/static/" not in response.url:
                self.unreadable.append(response.url)
        self.responses.append((response.url, headers, body))

    def close(self, context: Any) -> None:
        """Close a browser context; only responses cut off by this may have unreadable headers."""
        self.closing = True
        try:
            context.close()
        finally:
            self.closing = False


def progress(page) -> str:  # type: ignore[no-untyped-def]
    return page.locator("#progress-text").inner_text()


def wait_for_next(page, before: str) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function(
        "b => { const p = document.querySelector('#progress-text'); return !p || p.textContent !== b; }",
        arg=before, timeout=10_000,
    )


def active_axes(page) -> list[str]:  # type: ignore[no-untyped-def]
    names = page.eval_on_selector_all("input[name^='axis:']", "els => els.map(e => e.name.slice(5))")
    return list(dict.fromkeys(names))


def answer_by_keyboard(page, i: int) -> None:  # type: ignore[no-untyped-def]
    before = progress(page)
    page.keyboard.press(["a", "b", "t"][i % 3])
    page.keyboard.press("4")  # confidence (the highlighted question)
    for _ in active_axes(page):
        page.keyboard.press(str(1 + i % 5))  # each axis in turn
    page.keyboard.press("Enter")
    wait_for_next(page, before)


def open_link(context, app_url, study, participant: str):  # type: ignore[no-untyped-def]
    page = context.new_page()
    page.goto(f"{app_url}/s/{study.link_token}/?participant={participant}")
    # The id is exchanged for a session and dropped from the URL.
    assert page.url == f"{app_url}/s/{study.link_token}/" and "participant=" not in page.url
    return page


def test_rater_browser_flow(app_url, browser, study) -> None:  # type: ignore[no-untyped-def]
    rec = Recorder()

    # --- 1. a whole block by keyboard --------------------------------------------------------
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = open_link(context, app_url, study.study, "kb-rater")
    rec.attach(page)
    page.reload()
    assert progress(page) == f"1 of {TRIALS}"
    # Incomplete forms are not submitted.
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    settle(page)
    assert progress(page) == f"1 of {TRIALS}" and not Vote.objects.exists()
    # Shortcuts: flicker and zoom act on the panes; target boxes are placed from data-* attributes.
    page.keyboard.press("f")
    assert page.get_by_role("button", name="Flicker").get_attribute("aria-pressed") == "true"
    assert page.locator(".viewer.flicker").count() == 1
    page.keyboard.press("f")
    width = page.locator("[data-canvas]").first.evaluate("e => e.getBoundingClientRect().width")
    level = page.get_by_role("status", name="Zoom level")
    natural = page.locator("[data-canvas] .page-img").first.evaluate("i => i.naturalWidth")
    assert level.inner_text() == f"{round(100 * width / natural)}%"  # the true scale (issue 40)
    page.keyboard.press("+")
    grown = page.locator("[data-canvas]").first.evaluate("e => e.getBoundingClientRect().width")
    assert grown > width and level.inner_text() == f"{round(100 * grown / natural)}%", (width, grown)
    page.keyboard.press("0")
    seen_box = False
    for i in range(TRIALS):
        if page.locator(".target-box").count():
            assert page.locator(".target-box").first.evaluate("e => e.style.left") == "6.6%"
            seen_box = True
        answer_by_keyboard(page, i)
    assert seen_box
    code = page.locator("#completion-code").inner_text()
    settle(page)
    kb = Assignment.objects.get(rater__external_id="kb-rater")
    assert kb.state == AssignmentState.FINISHED and kb.completion_code == code
    assert Vote.objects.filter(trial__assignment=kb).count() == TRIALS
    rec.close(context)

    # --- 2. a whole block by mouse, through accessible names ----------------------------------
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    rec.attach(page)
    page.goto(f"{app_url}/s/{study.study.link_token}/?participant=mouse-rater")
    for i in range(TRIALS):
        before = progress(page)
        for name in ("A", "B", "Tie", "Cannot judge"):
            assert page.get_by_role("radio", name=name, exact=True).count() == 1
        assert page.get_by_role("group", name="Confidence").count() == 1
        verdict = ["B", "A", "Cannot judge"][i % 3]
        page.locator(f"label[for='{page.get_by_role('radio', name=verdict, exact=True).get_attribute('id')}']").click()
        page.get_by_role("group", name="Confidence").locator("label", has_text="3").click()
        if verdict != "Cannot judge":
            for axis in active_axes(page):
                group = page.get_by_role("group", name=axis_title(axis), exact=True)
                assert group.get_by_role("radio").count() == 5
                group.locator("label", has_text="A better").first.click()
        page.get_by_role("textbox", name="Rationale").fill(f"mouse {i}")
        page.get_by_role("button", name="Submit").click()
        wait_for_next(page, before)
    expect(page.locator("#completion-code")).to_be_visible()
    settle(page)
    votes = Vote.objects.filter(trial__assignment__rater__external_id="mouse-rater")
    assert votes.count() == TRIALS and votes.filter(label="CANNOT_JUDGE").count() == 2
    assert all(v.rationale.startswith("mouse ") for v in votes)
    rec.close(context)

    # --- 3. pause, close the browser, resume from the same link --------------------------------
    context = browser.new_context()
    page = context.new_page()
    rec.attach(page)
    page.goto(f"{app_url}/s/{study.study.link_token}/?participant=resume-rater")
    answer_by_keyboard(page, 0)
    answer_by_keyboard(page, 1)
    page.get_by_role("link", name="Pause").click()
    assert "Paused" in page.content()
    rec.close(context)
    context = browser.new_context()
    page = context.new_page()
    rec.attach(page)
    page.goto(f"{app_url}/s/{study.study.link_token}/?participant=resume-rater")
    assert progress(page) == f"3 of {TRIALS}"
    for i in range(2, TRIALS):
        answer_by_keyboard(page, i)
    expect(page.locator("#completion-code")).to_be_visible()
    rec.close(context)

    # --- the blinding rule on everything the browser saw ---------------------------------------
    assert not rec.unreadable, f"headers of {rec.unreadable} could not be read (only a closing page may cut them off)"
    assert len(rec.responses) > 40
    assert any(re.search(r"/t/[^/]+/left\.png$", url) for url, _, _ in rec.responses)
    for url, headers, body in rec.responses:
        texts = [url.lower(), " ".join(f"{k}: {v}" for k, v in headers.items()).lower(), body.decode("latin-1").lower()]
        is_static = "/static/" in url  # shipped code (htmx, CSS) may say "repeat" in other senses
        for secret in study.secrets:
            if is_static and secret == "repeat":
                continue
            for text in texts:
                assert secret.lower() not in text, f"{secret!r} leaked by {url}"
        if url.endswith(".png"):
            assert "content-disposition" not in headers, url
            assert headers.get("cache-control", "").startswith("private"), (url, headers)
    assert not [m for m in rec.console if "Content Security Policy" in m], rec.console
    # The ORM calls above ran beside Playwright's event loop, in a context with its own
    # connection; close it so the test database can be dropped.
    connections.close_all()
