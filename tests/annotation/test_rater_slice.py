"""One vote traced as it runs (issue 41): the view calls the project four times at most (parse,
one flow call, render, the image pass), and the study's kind is looked up once per request."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from django.test import Client

from annotation import kinds
from annotation.models import Vote
from tests.annotation.test_rater_flow import answer, join, scheduled

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def _project_file(filename: str) -> bool:
    return filename.startswith(str(ROOT)) and "site-packages" not in filename and "/tests/" not in filename


def _module_of(filename: str) -> str:
    return ".".join(Path(filename).resolve().relative_to(ROOT.resolve()).with_suffix("").parts)


def trace_request(view: Callable[..., Any], send: Callable[[], Any]) -> tuple[list[str], int, Any]:
    """Run ``send()`` (one request) under a profiler: the project functions ``view`` calls
    directly, in order, and how many times the kind registry's ``design_of`` ran."""
    view_code = inspect.unwrap(view).__code__
    lookup_code = kinds.design_of.__code__
    calls: list[str] = []
    lookups = 0

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal lookups
        if event != "call":
            return
        code = frame.f_code
        if code is lookup_code:
            lookups += 1
        caller = frame.f_back
        if caller is not None and caller.f_code is view_code and _project_file(code.co_filename):
            calls.append(f"{_module_of(code.co_filename)}.{code.co_name}")

    sys.setprofile(profile)
    try:
        response = send()
    finally:
        sys.setprofile(None)
    return calls, lookups, response


def test_a_vote_is_parse_one_flow_call_render_and_the_image_pass() -> None:
    from annotation.rater import views

    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    for _ in range(2):  # the participant's third vote is the one traced
        html = answer(client, html).content.decode()
    calls, lookups, response = trace_request(views.trial_vote, lambda: answer(client, html))
    assert response.status_code == 200
    assert "4 of 10" in response.content.decode()  # the next trial's state came back
    assert Vote.objects.filter(trial__assignment__rater__external_id="P1").count() == 3
    assert calls == [
        "annotation.rater.forms.answer_posted",
        "annotation.rater.flow.answer_trial",
        "annotation.rater.screens.screen_response",
        "annotation.rater.images.image_pass_grant",
    ]
    assert lookups == 1


@pytest.mark.parametrize("refused", ["verdict", "key"])
def test_a_refused_vote_looks_the_kind_up_once_too(refused: str) -> None:
    from annotation.rater import views

    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    extra = {"verdict": ""} if refused == "verdict" else {"idempotency_key": "short"}
    _calls, lookups, response = trace_request(views.trial_vote, lambda: answer(client, html, **extra))
    assert response.status_code == 400 and lookups == 1


def test_the_study_link_and_the_api_vote_look_the_kind_up_once() -> None:
    from annotation.rater import api, views

    rs = scheduled()
    client = Client()
    join(client, rs.study)
    calls, lookups, page = trace_request(views.study_link, lambda: client.get(f"/s/{rs.study.link_token}/"))
    assert page.status_code == 200 and lookups == 1 and len(calls) <= 4
    trial = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    body = {"verdict": "A", "confidence": 4, "axes": {a["id"]: 1 for a in trial["axes"]},
            "idempotency_key": trial["idempotency_key"]}
    _calls, lookups, voted = trace_request(
        api.VoteSubmitApi.post, lambda: client.post(trial["vote_url"], body, content_type="application/json")
    )
    assert voted.status_code == 200 and voted.json()["recorded"] is True and lookups == 1
