"""A real browser (Chromium through Playwright) through the rater pages of the other study kinds
(docs/study-kinds.md "The rater pages").

For each kind a scripted rater opens the study link, fails and then passes the comprehension
check, and answers every trial — the attention check as instructed — finding every control by its
accessible name only (radios "A"/"B"/"Tie"/"Cannot judge", "Yes"/"No"/"Unclear", the textbox
"Evidence", one radio group per rated dimension). Every other trial is answered with the keyboard
shortcuts instead of the mouse. The votes are read back from the database, the console must stay
free of errors and CSP violations, and nothing the browser received (bodies, URLs, headers) may
name a system, an id of the bundle or an image file.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import expect

from annotation.models import Assignment, AssignmentState, Trial, Vote
from annotation.services.comprehension import comprehension_question
from tests.annotation.test_kind_rater_pages import KINDS, expected_vote, kind_study, leaks, study_secrets
from tests.e2e.test_rater_browser import Recorder as ResponseRecorder
from tests.e2e.test_rater_browser import app_url, browser, progress, settle, wait_for_next  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Playwright's sync API runs an event loop in this thread; the ORM calls below are plain sync code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

VALUES = {
    "A": "A",
    "B": "B",
    "Tie": "TIE",
    "Cannot judge": "CANNOT_JUDGE",
    "Yes": "YES",
    "No": "NO",
    "Unclear": "UNCLEAR",
}
KEYS = {"A": "a", "B": "b", "Tie": "t", "Cannot judge": "x", "Yes": "y", "No": "n", "Unclear": "u"}


class Recorder(ResponseRecorder):
    """Every response the browser receives, every console message (with its type), page errors."""

    def __init__(self) -> None:
        super().__init__()
        self.console_typed: list[tuple[str, str]] = []
        self.errors: list[str] = []

    def attach(self, page: Any) -> None:
        page.on("response", self._on_response)
        page.on("console", lambda msg: self.console_typed.append((msg.type, msg.text)))
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))


def attention_answer(page: Any) -> str:
    """The answer an attention check's instruction line asks for ("" on a data trial)."""
    note = page.get_by_role("note")
    if not note.count():
        return ""
    text = note.inner_text()
    found = re.search(r"please answer “([^”]+)”", text) or re.search(
        r"please choose (\d+) on every dimension", text
    )
    assert found, text
    return found.group(1)


def answer_pairwise(page: Any, i: int, told: str, keyboard: bool) -> dict[str, str]:
    verdict = told or ["A", "B", "Tie", "Cannot judge"][i % 4]
    confidence = str(1 + i % 5)
    verdicts = page.get_by_role("radiogroup", name="Verdict", exact=True)
    for name in ("A", "B", "Tie", "Cannot judge"):
        assert verdicts.get_by_role("radio", name=name, exact=True).count() == 1
    confidences = page.get_by_role("radiogroup", name="Confidence", exact=True)
    assert confidences.get_by_role("radio").count() == 5
    expect(page.get_by_role("heading", name="Brief", exact=True)).to_be_visible()
    expect(page.get_by_role("img", name="Image A", exact=True)).to_be_visible()
    expect(page.get_by_role("img", name="Image B", exact=True)).to_be_visible()
    rationale = ""
    if keyboard:
        page.keyboard.press(KEYS[verdict])
        page.keyboard.press(confidence)
    else:
        verdicts.get_by_role("radio", name=verdict, exact=True).check()
        confidences.get_by_role("radio", name=confidence, exact=True).check()
        rationale = f"browser rationale {i}"
        page.get_by_role("textbox", name="Rationale", exact=True).fill(rationale)
    assert verdicts.get_by_role("radio", name=verdict, exact=True).is_checked()
    assert confidences.get_by_role("radio", name=confidence, exact=True).is_checked()
    if keyboard:
        page.keyboard.press("Enter")
    else:
        page.get_by_role("button", name="Submit", exact=True).click()
    return {"verdict": VALUES[verdict], "confidence": confidence, "rationale": rationale}


def answer_checklist(page: Any, i: int, told: str, keyboard: bool) -> dict[str, str]:
    verdict = told or ["Yes", "No", "Unclear"][i % 3]
    evidence = f"browser evidence {i}"
    question = page.locator("#question-legend").inner_text()
    choices = page.get_by_role("radiogroup", name=question, exact=True)
    for name in ("Yes", "No", "Unclear"):
        assert choices.get_by_role("radio", name=name, exact=True).count() == 1
    box = page.get_by_role("textbox", name="Evidence", exact=True)
    if keyboard:
        page.keyboard.press(KEYS[verdict])
        if i == 1:
            # The evidence is required: Enter alone does not submit, the browser points at the box.
            before = progress(page)
            page.keyboard.press("Enter")
            page.wait_for_timeout(300)
            assert progress(page) == before and Vote.objects.count() == i
        else:
            page.keyboard.press("e")
        assert box.evaluate("e => e === document.activeElement")
        page.keyboard.type(evidence)
        assert box.input_value() == evidence  # "e" moved the focus; it was not typed
    else:
        choices.get_by_role("radio", name=verdict, exact=True).check()
        box.fill(evidence)
    assert choices.get_by_role("radio", name=verdict, exact=True).is_checked()
    if keyboard:
        page.keyboard.press("Control+Enter")  # Enter inside the box is a new line
    else:
        page.get_by_role("button", name="Submit", exact=True).click()
    return {"verdict": VALUES[verdict], "evidence": evidence}


def answer_rating(page: Any, i: int, told: str, keyboard: bool, dimensions: list[str]) -> dict[str, str]:
    values = {d: told or str(1 + (i + 2 * j) % 5) for j, d in enumerate(dimensions)}
    groups = {d: page.get_by_role("radiogroup", name=d, exact=True) for d in dimensions}
    for group in groups.values():
        assert [group.get_by_role("radio", name=str(n), exact=True).count() for n in range(1, 6)] == [1] * 5
    for d in dimensions:
        if keyboard:
            page.keyboard.press(values[d])  # answers the highlighted dimension, then moves on
        else:
            groups[d].get_by_role("radio", name=values[d], exact=True).check()
    for d in dimensions:
        assert groups[d].get_by_role("radio", name=values[d], exact=True).is_checked(), d
    if keyboard:
        page.keyboard.press("Enter")
    else:
        page.get_by_role("button", name="Submit", exact=True).click()
    return {f"rating:{d}": v for d, v in values.items()}


def pass_comprehension(page: Any, study: Any) -> None:
    """A wrong answer first (one attempt left), then the right one."""
    question = comprehension_question(study)
    labels = dict(question.choices)
    wrong = next(value for value, _label in question.choices if value != question.answer)
    expect(page.get_by_role("heading", name="Before you start")).to_be_visible()
    for value in (wrong, question.answer):
        group = page.get_by_role("radiogroup", name=question.question, exact=True)
        assert group.get_by_role("radio").count() == len(question.choices)
        group.get_by_role("radio", name=labels[value], exact=True).check()
        page.get_by_role("button", name="Continue", exact=True).click()
        page.wait_for_load_state()
        if value == wrong:
            assert "not the right answer" in page.get_by_role("alert").inner_text()
            assert "1 attempt left" in page.content()


@pytest.mark.parametrize("kind", KINDS)
def test_a_browser_rater_answers_every_trial_by_accessible_names(kind, app_url, browser, researcher) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    study = kind_study(kind, researcher)
    secrets = study_secrets(study, kind)
    dimensions = list((study.options or {}).get("dimensions", []))
    rec = Recorder()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    rec.attach(page)
    page.goto(f"{app_url}/s/{study.link_token}/?participant=browser-{kind}")
    assert page.url == f"{app_url}/s/{study.link_token}/"
    pass_comprehension(page, study)

    assignment = Assignment.objects.get(rater__external_id=f"browser-{kind}")
    total = Trial.objects.filter(assignment=assignment).count()
    assert progress(page) == f"1 of {total}"
    given: dict[str, dict[str, str]] = {}
    told_seen = 0
    for i in range(total):
        before = progress(page)
        assert before == f"{i + 1} of {total}"
        token = page.locator("form[data-answer-form]").get_attribute("action").split("/")[2]
        told = attention_answer(page)
        told_seen += bool(told)
        keyboard = i % 2 == 1
        if kind == "pairwise":
            given[token] = answer_pairwise(page, i, told, keyboard)
        elif kind == "checklist":
            given[token] = answer_checklist(page, i, told, keyboard)
        else:
            given[token] = answer_rating(page, i, told, keyboard, dimensions)
        wait_for_next(page, before)
    code = page.locator("#completion-code").inner_text()
    settle(page)

    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.FINISHED and assignment.completion_code == code
    assert told_seen == 1
    assert len(given) == total == Vote.objects.filter(trial__assignment=assignment).count()
    for token, answer in given.items():
        trial = Trial.objects.get(token=token)
        vote = Vote.objects.get(trial=trial)
        assert {
            "label": vote.label,
            "confidence": vote.confidence,
            "rationale": vote.rationale,
            "answers": vote.answers,
        } == expected_vote(kind, answer, trial, dimensions), token
    rec.close(context)

    # --- the console and the blinding rule on everything the browser saw -------------------------
    assert not rec.unreadable, f"headers of {rec.unreadable} could not be read (only a closing page may cut them off)"
    assert not rec.errors, rec.errors
    assert not [t for kind_, t in rec.console_typed if "Content Security Policy" in t], rec.console_typed
    # The only console error is the browser's note on the 400 answer to the wrong comprehension attempt.
    assert [t for kind_, t in rec.console_typed if kind_ == "error"] == [
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ], rec.console_typed
    images = [url for url, _, _ in rec.responses if re.search(r"/t/[^/]+/(item|left|right)\.png$", url)]
    assert len(images) >= total
    for url, headers, body in rec.responses:
        shipped = "/static/" in url  # shipped code may use short words and "repeat" in other senses
        binary = url.endswith(".png") or url.endswith(".ico")
        words = [s for s in secrets if not (shipped and (len(s) < 6 or s == "repeat"))]
        found = leaks(url, words) + leaks(" ".join(f"{k}: {v}" for k, v in headers.items()), words)
        text = body.decode("latin-1")
        # Image bytes contain two-letter "words" by chance; only long secrets are looked for there.
        found += (
            [s for s in words if len(s) >= 6 and s.lower() in text.lower()] if binary else leaks(text, words)
        )
        assert not found, f"{found} leaked by {url}"
    # The ORM calls above ran beside Playwright's event loop, in a context with its own
    # connection; close it so the test database can be dropped.
    connections.close_all()
