"""The rater pages of the other study kinds (docs/study-kinds.md "The rater pages") (pairwise, checklist,
rating) and the comprehension check.

Each example bundle is imported and scheduled with one hidden repeat and one attention check; a
participant passes the comprehension check on the second attempt and answers every trial through
the HTML form (htmx and plain posts in turn). The stored votes are compared with what the rater
chose, read back through the trial's own row (a swapped pairwise display exchanges A and B), and
every response the rater received is searched for systems, item, brief, predicate and comparison
ids, image file names and the word "repeat".
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from PIL import Image

from annotation.models import (
    Assignment,
    AssignmentState,
    Candidate,
    Comparison,
    Label,
    Page,
    Predicate,
    Rater,
    StoredImage,
    Study,
    System,
    Trial,
    Vote,
)
from annotation.services.answers import attention_instruction
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.comprehension import comprehension_question
from annotation.services.scheduling import blocks_schedule, schedule_units

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
KINDS = ("pairwise", "checklist", "rating")
REQUIRED_MESSAGE = "Answer the comprehension question before the first trial."


def kind_study(kind: str, user: Any) -> Study:
    """The example bundle of a kind, scheduled as one block of all its units for one rater."""
    study = study_import_bundle(path=FIXTURES / kind, user=user)
    blocks_schedule(
        study=study,
        blocks=1,
        block_size=len(schedule_units(study)),
        repeats=1,
        min_gap=2,
        raters=[1],
        seed=5,
        checks=1,
    )
    study.refresh_from_db()
    return study


def study_secrets(study: Study, kind: str) -> list[str]:
    """Everything a rater must never see: systems, every id of the bundle, file names, repeats."""
    out: set[str] = {"repeat"}
    for system in System.objects.filter(study=study):
        out.update({system.external_id, system.name})
    out.update(Page.objects.filter(study=study).values_list("external_id", flat=True))
    out.update(Candidate.objects.filter(page__study=study).values_list("external_id", flat=True))
    out.update(Predicate.objects.filter(study=study).values_list("external_id", flat=True))
    out.update(Comparison.objects.filter(study=study).values_list("external_id", flat=True))
    for image in StoredImage.objects.all():
        name = str(image.file.name)
        out.update({image.sha256, image.sha256[:16], name, Path(name).name})
    doc = json.loads((FIXTURES / kind / "study.json").read_text())
    for item in doc["items"]:
        out.update({item["image"], Path(item["image"]).name})
    return sorted(s for s in out if s)


def leaks(text: str, secrets: list[str]) -> list[str]:
    """Secrets found in a text. Short ids ("b1", "p3") count only as whole words: random tokens
    (letters, digits, ``-``, ``_``) contain such pairs by chance."""
    low = text.lower()
    found = []
    for secret in secrets:
        s = secret.lower()
        if len(s) >= 6:
            hit = s in low
        else:
            hit = re.search(rf"(?<![a-z0-9_-]){re.escape(s)}(?![a-z0-9_-])", low) is not None
        if hit:
            found.append(secret)
    return found


class Rater_:
    """A participant's browser session, recording every URL and body it received."""

    def __init__(self, study: Study, participant: str, *, csrf: bool = False) -> None:
        self.study = study
        self.participant = participant
        self.client = Client(enforce_csrf_checks=csrf)
        self.seen: list[tuple[str, str]] = []
        self.binary: list[tuple[str, str]] = []

    def _record(self, url: str, response: Any) -> Any:
        headers = " ".join(f"{k}: {v}" for k, v in response.headers.items())
        if response.streaming:  # an image: its metadata, and its bytes for long secrets only
            response.body_bytes = b"".join(response.streaming_content)
            with Image.open(io.BytesIO(response.body_bytes)) as image:
                info = " ".join(f"{k}={v}" for k, v in image.info.items())
                assert not image.getexif()
            self.seen.append((url, f"{headers}\n{info}"))
            self.binary.append((url, response.body_bytes.decode("latin-1")))
        else:
            self.seen.append((url, f"{headers}\n{response.content.decode()}"))
        return response

    def get(self, url: str, **kw: Any) -> Any:
        return self._record(url, self.client.get(url, **kw))

    def post(self, url: str, data: dict[str, Any], **kw: Any) -> Any:
        return self._record(url, self.client.post(url, data, **kw))

    def join(self) -> Any:
        r = self.get(f"/s/{self.study.link_token}/?participant={self.participant}")
        assert r.status_code == 302 and r["Location"] == f"/s/{self.study.link_token}/"
        return self.get(r["Location"])

    def comprehension(self, answer: str) -> Any:
        return self.post(f"/s/{self.study.link_token}/comprehension/", {"answer": answer})


def wrong_answer(study: Study) -> str:
    question = comprehension_question(study)
    return next(value for value, _label in question.choices if value != question.answer)


def form_of(html: str) -> dict[str, Any]:
    token = re.search(r'action="/t/([^/"]+)/vote/"', html)
    key = re.search(r'name="idempotency_key" value="([^"]+)"', html)
    dimensions = list(dict.fromkeys(re.findall(r'name="rating:([^"]+)"', html)))
    return {
        "token": token.group(1) if token else None,
        "key": key.group(1) if key else None,
        "dimensions": dimensions,
    }


def checked(html: str, name: str) -> list[str]:
    """Values of the checked radios of a field."""
    return re.findall(
        rf'<input type="radio"[^>]*name="{re.escape(name)}" value="([^"]+)"[^>]*\schecked>', html
    )


def masked(html: str, token: str) -> str:
    """A trial (full page or htmx fragment) without what differs between any two trials: tokens,
    keys, progress, and what only the first trial lacks or has."""
    html = html[html.index('<div class="trial ') : html.index("</div>", html.index('class="shortcut-line'))]
    html = html.replace(token, "TOKEN")
    html = re.sub(r'name="(idempotency_key|csrfmiddlewaretoken)" value="[^"]+"', r'name="\1" value="K"', html)
    html = re.sub(r'"X-CSRFToken": "[^"]+"|nonce="[^"]+"', "", html)
    html = re.sub(r"\d+ of \d+", "N of M", html)
    html = re.sub(r'value="\d+"></progress>', 'value="N"></progress>', html)
    # The first trial has no "Undo last answer" (nothing to undo), like its open instructions.
    html = re.sub(r'\s*<button type="submit" form="undo-form".*?</button>', "", html)
    html = re.sub(r'\s*<form id="undo-form".*?</form>', "", html, flags=re.S)
    html = re.sub(r'\s*<span class="time-left[^<]*</span>', "", html)  # the pace estimate is progress too
    return html.replace("data-instructions open>", "data-instructions>")


def data_answer(kind: str, i: int, trial: Trial, dimensions: list[str]) -> dict[str, Any]:
    """The i-th trial's answer as the rater gives it (display orientation)."""
    if kind == "pairwise":
        verdict = (
            trial.attention_expected or [Label.A, Label.B, Label.TIE, Label.CANNOT_JUDGE, Label.A][i % 5]
        )
        return {"verdict": verdict, "confidence": str(1 + i % 5), "rationale": f"rationale {i}"}
    if kind == "checklist":
        verdict = trial.attention_expected or [Label.YES, Label.NO, Label.UNCLEAR][i % 3]
        return {"verdict": verdict, "evidence": f"evidence {i}: the headline"}
    return {
        f"rating:{d}": trial.attention_expected or str(1 + (i + 2 * j) % 5) for j, d in enumerate(dimensions)
    }


def expected_vote(kind: str, answer: dict[str, Any], trial: Trial, dimensions: list[str]) -> dict[str, Any]:
    """The canonical vote an answer must be stored as (docs/study-kinds.md "Stored answers")."""
    if kind == "pairwise":
        label = answer["verdict"]
        if trial.swapped:
            label = {Label.A: Label.B, Label.B: Label.A}.get(label, label)
        return {
            "label": label,
            "confidence": int(answer["confidence"]),
            "rationale": answer["rationale"],
            "answers": {},
        }
    if kind == "checklist":
        return {
            "label": answer["verdict"],
            "confidence": None,
            "rationale": answer["evidence"],
            "answers": {},
        }
    return {
        "label": "",
        "confidence": None,
        "rationale": "",
        "answers": {"ratings": {d: int(answer[f"rating:{d}"]) for d in dimensions}},
    }


def incomplete_answer(kind: str, dimensions: list[str]) -> tuple[dict[str, str], str]:
    """An answer missing one required field, and the plain words the error must say about it."""
    if kind == "pairwise":
        return {"verdict": "B", "rationale": "keep this rationale"}, "Choose a confidence from 1 to 5."
    if kind == "checklist":
        return {"verdict": "NO", "evidence": "   "}, "Write the evidence: what you see in the image"
    return {f"rating:{dimensions[0]}": "2"}, f"Rate “{dimensions[1]}” from 1 to 5."


@pytest.mark.parametrize("kind", KINDS)
def test_a_participant_answers_every_trial_of_a_kind(kind: str, researcher: Any) -> None:
    study = kind_study(kind, researcher)
    secrets = study_secrets(study, kind)
    assert {"Alpha Design Agent", "alpha", "b1", "repeat"} <= set(secrets) and len(secrets) > 15

    # --- a participant who fails the comprehension check twice is screened out -------------------
    dropped = Rater_(study, "drop-out")
    page = dropped.join()
    assert page.status_code == 200 and 'action="/s/' in page.content.decode()
    first = dropped.comprehension(wrong_answer(study))
    assert first.status_code == 400 and "1 attempt left" in first.content.decode()
    assert 'role="alert"' in first.content.decode()
    second = dropped.comprehension(wrong_answer(study))
    assert second.status_code == 302
    notice = dropped.get(second["Location"])
    assert notice.status_code == 403 and "Thank you for your time" in notice.content.decode()
    assert "<form" not in notice.content.decode()
    rater = Rater.objects.get(study=study, external_id="drop-out")
    assert (rater.comprehension_attempts, rater.comprehension_passed) == (2, False)
    assert not Assignment.objects.filter(rater=rater).exists()
    # A third try is not counted; the link keeps saying the same.
    assert dropped.comprehension(comprehension_question(study).answer).status_code == 302
    assert dropped.get(f"/s/{study.link_token}/").status_code == 403
    rater.refresh_from_db()
    assert (rater.comprehension_attempts, rater.comprehension_passed) == (2, False)

    # --- the participant: wrong, then right; the only place is still free --------------------------
    p = Rater_(study, "rater-one")
    page = p.join()
    html = page.content.decode()
    question = comprehension_question(study)
    assert page.status_code == 200 and question.question in html and "2 attempts left" in html
    for value, label in question.choices:
        assert f'value="{value}"' in html and f">{label}</label>" in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert "checked" not in html  # the right answer is never marked
    assert not Assignment.objects.filter(rater__external_id="rater-one").exists()
    retry = p.comprehension(wrong_answer(study))
    assert retry.status_code == 400 and "1 attempt left" in retry.content.decode()
    passed = p.comprehension(question.answer)
    assert passed.status_code == 302 and passed["Location"] == f"/s/{study.link_token}/"
    page = p.get(passed["Location"])
    html = page.content.decode()
    assignment = Assignment.objects.get(rater__external_id="rater-one")
    assert assignment.state == AssignmentState.ACTIVE
    total = Trial.objects.filter(assignment=assignment).count()
    assert total == len(schedule_units(study)) + 2  # one hidden repeat, one attention check
    assert f"1 of {total}" in html and '<div id="trial-root">' in html

    # --- validation errors re-render with 400 and keep what was given ------------------------------
    f = form_of(html)
    partial, field = incomplete_answer(kind, f["dimensions"])
    bad = p.post(f"/t/{f['token']}/vote/", {**partial, "idempotency_key": f["key"]}, HTTP_HX_REQUEST="true")
    body = bad.content.decode()
    assert bad.status_code == 400 and "<html" not in body and "data-trial" in body
    assert re.search(rf'<p class="error" role="alert">[^<]*{re.escape(field)}', body), body
    if kind == "pairwise":
        assert checked(body, "verdict") == ["B"] and ">keep this rationale</textarea>" in body
    elif kind == "checklist":
        assert checked(body, "verdict") == ["NO"]
        again = p.post(f"/t/{f['token']}/vote/", {"evidence": "kept evidence", "idempotency_key": f["key"]})
        assert again.status_code == 400 and ">kept evidence</textarea>" in again.content.decode()
        alert = re.search(r'role="alert">([^<]*)', again.content.decode())
        assert alert and alert.group(1) == "Choose an answer: Yes, No or Unclear."
    else:
        assert checked(body, f"rating:{f['dimensions'][0]}") == ["2"]
        assert checked(body, f"rating:{f['dimensions'][1]}") == []
    assert not Vote.objects.exists()

    # --- every trial --------------------------------------------------------------------------------
    checks_seen = 0
    pages: dict[str, str] = {}
    for i in range(total):
        f = form_of(html)
        assert f["token"], html
        pages[f["token"]] = html
        trial = Trial.objects.select_related("predicate", "comparison__page", "candidate__page").get(
            token=f["token"]
        )
        instruction = attention_instruction(trial, study)
        if trial.attention_expected:
            checks_seen += 1
            assert instruction and f'<p class="attention" role="note">{instruction}</p>' in html
        else:
            assert 'class="attention"' not in html
        images = re.findall(r'<img[^>]*src="([^"]+)"', html)
        if kind == "pairwise":
            assert images == [f"/t/{trial.token}/left.png", f"/t/{trial.token}/right.png"]
            assert trial.comparison is not None
            brief = trial.comparison.page.text
            assert '<h2 id="brief-title">Brief</h2>' in html and brief in html
            for name in ("A", "B", "Tie", "Cannot judge"):
                assert f">{name} <kbd class=\"key\" aria-hidden=\"true\">" in html
        else:
            assert images == [f"/t/{trial.token}/item.png"]
        if kind == "checklist":
            predicate = trial.predicate
            assert predicate is not None and predicate.question in html
            boxes = re.findall(r'class="target-box element-box" data-bbox="([^"]+)"', html)
            assert boxes == [",".join(f"{v:g}" for v in box) for box in predicate.boxes]
            brief = predicate.candidate.page.text
            assert ('id="brief-title"' in html) == bool(brief)
            assert (
                '<label for="evidence">Evidence</label>' in html and 'id="evidence" name="evidence"' in html
            )
            for name in ("Yes", "No", "Unclear"):
                assert f">{name} <kbd class=\"key\" aria-hidden=\"true\">" in html
        if kind == "rating":
            assert f["dimensions"] == study.options["dimensions"]
            for d in f["dimensions"]:
                assert f">{d}</legend>" in html
                assert re.findall(rf'name="rating:{d}" value="(\d+)"', html) == ["1", "2", "3", "4", "5"]
        # Only the owner gets the image; a stranger and another slot get nothing.
        image = p.get(images[0])
        assert image.status_code == 200 and image["Content-Type"] == "image/png"
        assert image.body_bytes.startswith(b"\x89PNG")
        assert Client().get(images[0]).status_code == 404
        if kind != "pairwise":
            assert p.get(f"/t/{trial.token}/left.png").status_code == 404
        answer = data_answer(kind, i, trial, f["dimensions"])
        htmx = i % 2 == 0
        r = p.post(
            f"/t/{f['token']}/vote/",
            {**answer, "idempotency_key": f["key"]},
            **({"HTTP_HX_REQUEST": "true"} if htmx else {}),
        )
        if htmx:
            assert r.status_code == 200 and "<html" not in r.content.decode()
            html = r.content.decode()
        else:
            assert r.status_code == 302 and r["Location"] == f"/s/{study.link_token}/"
            html = p.get(r["Location"]).content.decode()
        vote = Vote.objects.get(trial=trial)
        assert {
            "label": vote.label,
            "confidence": vote.confidence,
            "rationale": vote.rationale,
            "answers": vote.answers,
        } == expected_vote(kind, answer, trial, f["dimensions"])
    assert checks_seen == 1
    assert 'id="completion-code"' in html
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.FINISHED and assignment.completion_code in html
    assert Vote.objects.filter(trial__assignment=assignment).count() == total
    if kind == "pairwise":
        swapped = Vote.objects.filter(trial__assignment=assignment, trial__swapped=True)
        assert swapped.exists() and swapped.filter(label__in=["A", "B"]).exists()
    p.get(f"/s/{study.link_token}/pause/")
    p.get(f"/s/{study.link_token}/instructions/")

    # A hidden repeat looks exactly like its original, apart from its own opaque tokens.
    repeat = Trial.objects.select_related("repeat_of").get(assignment=assignment, is_repeat=True)
    original = repeat.repeat_of
    assert original is not None
    assert masked(pages[repeat.token], repeat.token) == masked(pages[original.token], original.token)

    # --- blinding: nothing any of them received names a system, an id or a file ----------------------
    assert len(p.seen) > 3 * total
    assert set(leaks("the b1 brief of Alpha Design Agent, token Xb1-q_b1", secrets)) == {
        "Alpha Design Agent",
        "alpha",
        "b1",
    }
    for url, text in [*dropped.seen, *p.seen]:
        found = leaks(url, secrets) + leaks(text, secrets)
        assert not found, f"{found} leaked by {url}"
    # Image bytes contain two-letter "words" by chance; only long secrets are looked for there.
    assert len(p.binary) == total
    for url, text in p.binary:
        assert not [s for s in secrets if len(s) >= 6 and s.lower() in text.lower()], url


@pytest.mark.parametrize("kind", KINDS)
def test_the_rater_api_needs_the_comprehension_check_and_answers_it(kind: str, researcher: Any) -> None:
    study = kind_study(kind, researcher)
    trial_url = f"/api/rater/{study.link_token}/trial/"
    check_url = f"/api/rater/{study.link_token}/comprehension/"
    question = comprehension_question(study)

    p = Rater_(study, "api-one", csrf=True)
    p.join()  # the comprehension page sets the CSRF cookie
    r = p.get(trial_url)
    assert r.status_code == 403 and r.json() == {"detail": REQUIRED_MESSAGE}
    assert not Assignment.objects.filter(rater__external_id="api-one").exists()
    # CSRF is enforced like on the other rater endpoints.
    assert (
        p.client.post(check_url, {"answer": question.answer}, content_type="application/json").status_code
        == 403
    )
    csrf: dict[str, Any] = {"HTTP_X_CSRFTOKEN": p.client.cookies["csrftoken"].value}

    def attempt(answer: object) -> Any:
        return p.client.post(check_url, {"answer": answer}, content_type="application/json", **csrf)

    shown = p.get(check_url).json()
    assert shown == {"state": "open", "question": question.question, "attempts_left": 2,
                     "choices": [{"value": v, "label": label} for v, label in question.choices]}
    bad = attempt("NOT-A-CHOICE")
    assert bad.status_code == 400 and bad.json() == {"detail": "field 'answer': choose one of the answers"}
    assert attempt(wrong_answer(study)).json() == {"result": "retry", "attempts_left": 1}
    assert attempt(question.answer).json() == {"result": "passed", "attempts_left": 0}
    trial = p.get(trial_url)
    assert trial.status_code == 200 and trial.json()["kind"] == kind and trial.json()["number"] == 1
    assert p.get(check_url).json()["state"] == "passed"

    q = Rater_(study, "api-two", csrf=True)
    q.join()
    csrf = {"HTTP_X_CSRFTOKEN": q.client.cookies["csrftoken"].value}
    results = [
        q.client.post(
            check_url, {"answer": wrong_answer(study)}, content_type="application/json", **csrf
        ).json()
        for _ in range(3)
    ]
    assert results == [
        {"result": "retry", "attempts_left": 1},
        {"result": "failed", "attempts_left": 0},
        {"result": "failed", "attempts_left": 0},
    ]
    assert q.get(trial_url).status_code == 403
    assert q.get(check_url).json()["state"] == "failed"
    assert not Assignment.objects.filter(rater__external_id="api-two").exists()
    # Without a session there is nobody to check.
    stranger = Client()
    assert (
        stranger.post(check_url, {"answer": question.answer}, content_type="application/json").status_code
        == 403
    )
