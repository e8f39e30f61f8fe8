"""Nothing in a rater's responses tells a trial's role (issue 46 item 6; SECURITY.md;
docs/decisions/0067-no-diagnostics-in-rater-responses.md).

Raters go through whole blocks holding hidden repeats and gold trials, one in a scheduled block and
two in serve-time blocks (trials filled as they are reached), through the HTML pages, the htmx
answers, the images and the JSON API. Every response is kept with the role of the trial it shows
(data, gold, repeat). The test fails if any carries a diagnostic header (``Server-Timing``), if a
header is present for one role and not another, or if a header's value, or a page's size once its
per-trial tokens are masked, differs by role."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import GOLD_EXPECTED, Block, Trial
from annotation.services.adaptive_allocation import study_allocation_set
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study

pytestmark = pytest.mark.django_db

DIAGNOSTIC = re.compile(r"timing|quer|debug|profil|x-runtime|duration", re.IGNORECASE)
# Headers whose value is per response whatever the role: the image pass cookie (encrypted, fresh
# each trial), a body's length (compared below on masked bodies), the date.
PER_RESPONSE = {"set-cookie", "content-length", "date", "last-modified", "etag", "x-request-id"}
TOKEN = re.compile(r"[A-Za-z0-9_-]{20,}")


def _role(trial: Trial) -> str:
    if trial.attention_expected == GOLD_EXPECTED:
        return "gold"
    return "repeat" if trial.is_repeat else "data"


def _masked(body: str) -> str:
    """A body with its per-trial and per-request values masked: tokens, keys, nonces, progress."""
    body = TOKEN.sub("T", body)
    body = re.sub(r"\d+ of \d+", "N of M", body)
    body = re.sub(r'value="\d+"></progress>', 'value="N"></progress>', body)
    body = re.sub(r'"(number|answered|total)": ?\d+', r'"\1": N', body)
    body = re.sub(r'\s*<span class="time-left[^<]*</span>', "", body)
    return re.sub(r'<details class="instructions" data-instructions( open)?>', "", body)


class Recorder:
    def __init__(self) -> None:
        # kind → role → responses; kind → page of the trial shown → (role, masked body size)
        self.seen: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        self.sizes: dict[str, dict[int, set[tuple[str, int]]]] = defaultdict(lambda: defaultdict(set))
        # (kind, serve-time block) → role → database queries of the request
        self.queries: dict[tuple[str, bool], dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
        self.last = 0

    def call(self, request: Callable[[], Any]) -> Any:
        with CaptureQueriesContext(connection) as queries:
            response = request()
        self.last = len(queries)
        return response

    def add(self, kind: str, trial: Trial, response: Any, *, queries: bool = True) -> Any:
        self.seen[kind][_role(trial)].append(response)
        if queries:
            self.queries[kind, trial.assignment.block.serve_time][_role(trial)].add(self.last)
        if not response.streaming:
            # The last answer of an assignment ends it (a completion code): its own size.
            last = kind == "api-vote" and response.json()["next_trial"]["finished"]
            page = -1 if last else trial.comparison.page_id
            self.sizes[kind][page].add((_role(trial), len(_masked(response.content.decode()))))
        return response


def _trial(token: str) -> Trial:
    return Trial.objects.select_related("comparison", "assignment__block").get(token=token)


def _html_rater(client: Client, study_link: str, participant: str, seen: Recorder) -> int:
    r = client.get(f"/s/{study_link}/", {"participant": participant})
    html = client.get(r["Location"])
    shown = 0
    kind = "page"
    while m := re.search(r'action="/t/([^/"]+)/vote/"', html.content.decode()):
        token = m.group(1)
        trial = _trial(token)
        seen.add(kind, trial, html)
        shown += 1
        for slot in ("ref", "left", "right"):
            image = seen.add("image", trial, seen.call(lambda url=f"/t/{token}/{slot}.png": client.get(url)))
            assert image.status_code == 200
            b"".join(image.streaming_content)
        text = html.content.decode()
        axes = re.findall(r'name="axis:([A-Z_]+)" value="0"', text)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', text).group(1)  # type: ignore[union-attr]
        html = seen.call(lambda: client.post(
            f"/t/{token}/vote/", {"verdict": "A", "confidence": "3", "idempotency_key": key,  # noqa: B023
                                  **{f"axis:{a}": "0" for a in axes}}, HTTP_HX_REQUEST="true"))  # noqa: B023
        kind = "answer"
    assert "Thank you" in html.content.decode()
    return shown


def _api_rater(client: Client, study_link: str, participant: str, seen: Recorder) -> int:
    """A JSON client: the current trial once, then each vote's answer brings the next trial (kept
    with the role and page of the trial it shows; the last one, the end, with the answered one's)."""
    client.get(f"/s/{study_link}/", {"participant": participant}, follow=True)  # the session and its CSRF cookie
    csrf = client.cookies["csrftoken"].value
    shown = 0
    response = seen.call(lambda: client.get(f"/api/rater/{study_link}/trial/"))
    data = response.json()
    while not data["finished"]:
        trial = _trial(data["trial"])
        seen.add("api-vote" if shown else "api-first", trial, response)  # the first: already shown by the join
        shown += 1
        for url in data["images"].values():
            image = seen.add("image", trial, seen.call(lambda url=url: client.get(url)))
            assert image.status_code == 200
            b"".join(image.streaming_content)
        body = {"verdict": "B", "confidence": 3, "axes": {a["id"]: 0 for a in data["axes"]},
                "idempotency_key": data["idempotency_key"]}
        response = seen.call(lambda: client.post(data["vote_url"], body, content_type="application/json",  # noqa: B023
                                                 HTTP_X_CSRFTOKEN=csrf))
        assert response.status_code == 200 and response.json()["trial"] == trial.token
        data = response.json()["next_trial"]
    seen.add("api-vote", trial, response, queries=False)  # the end of the block (the answered trial's role)
    return shown


def test_no_rater_response_tells_a_trials_role() -> None:
    study = make_rater_study(slug="roles", pages=20).study
    blocks_schedule(study=study, blocks=1, block_size=10, repeats=2, min_gap=2, raters=[1], seed=3, gold=2)
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 1})
    seen = Recorder()
    assert _html_rater(Client(), study.link_token, "html-scheduled", seen) == 14
    assert _html_rater(Client(), study.link_token, "html-served", seen) == 14
    assert _api_rater(Client(), study.link_token, "api-served", seen) == 14
    assert Block.objects.filter(study=study, serve_time=True).count() == 2
    assert set(seen.seen) == {"page", "answer", "image", "api-first", "api-vote"}
    for kind in ("answer", "image", "api-vote"):
        assert set(seen.seen[kind]) == {"data", "gold", "repeat"}, kind
    for kind, by_role in seen.seen.items():
        names = {role: {frozenset(h.lower() for h in r.headers) for r in responses} for role, responses in by_role.items()}
        everything = [r for responses in by_role.values() for r in responses]
        for r in everything:
            diagnostic = [h for h in r.headers if DIAGNOSTIC.search(h)]
            assert not diagnostic, (kind, diagnostic)
        # The same headers for every role...
        assert len({n for ns in names.values() for n in ns}) == 1, (kind, names)
        # ...with the same values, apart from those that differ per response whatever the role.
        values: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for role, responses in by_role.items():
            for r in responses:
                for h, v in r.headers.items():
                    if h.lower() not in PER_RESPONSE:
                        values[h][role].add(v)
        for h, by in values.items():
            assert len({frozenset(v) for v in by.values()}) == 1, (kind, h, dict(by))
    # Queries (the time a request takes follows them): the same for every role in a scheduled block,
    # and in a serve-time block on PostgreSQL, where a data trial is filled and marked shown by one
    # statement and a hidden repeat by one UPDATE (on SQLite the steps of "Serve-time choice" run
    # one by one for a data trial, so its answer makes more queries than a repeat's there).
    for (kind, serve_time), by_role in seen.queries.items():
        if kind in ("page", "api-first") or (serve_time and connection.vendor != "postgresql" and kind in ("answer", "api-vote")):
            continue
        assert len({frozenset(q) for q in by_role.values()}) == 1, (kind, serve_time, dict(by_role))
    # Sizes: a body's masked length depends on the page shown (its conditional axes), never on the
    # role: every response showing one page has one length. (Image bytes: docs/protocol.md
    # "Planning the human study", gold sizes; tests/annotation/test_gold.py.)
    for kind, by_page in seen.sizes.items():
        shared = {role for entries in by_page.values() if len({r for r, _ in entries}) > 1 for role, _ in entries}
        if kind == "api-vote":
            # The API rater's trials are drawn when served, so whether a gold trial's page also comes
            # up as one of its data trials is chance: gold's length is compared whenever it does.
            assert "data" in shared and len(shared) >= 2, (kind, shared)
        elif kind not in ("page", "api-first"):  # a rater's first trial (always data); the next ones come in answers
            assert {"data", "repeat", "gold"} <= shared, (kind, shared)
        for page, entries in by_page.items():
            assert len({size for _, size in entries}) == 1, (kind, page, entries)
