"""The trial page's state (templates/annotation/rater/_state.html).

The page embeds the state an htmx request gets alone; what the state shows is autoescaped.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotation.models import Axis
from annotation.services.trial_screens import trial_screens_forget
from tests.annotation.test_rater_flow import form_of, join, scheduled

pytestmark = pytest.mark.django_db

CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')
KEY_RE = re.compile(r'name="idempotency_key" value="[^"]+"')  # a new key each time the trial is shown


def _trial_root(page: str) -> str:
    """What the page's ``#trial-root`` holds (the state ends with the trial's closing tag)."""
    start = page.index('<div id="trial-root">') + len('<div id="trial-root">')
    return page[start : page.rindex("</main>")].rsplit("</div>", 1)[0]


def _normalized(html: str) -> str:
    return re.sub(r"\s+", " ", KEY_RE.sub("", CSRF_RE.sub("", html))).strip()


def test_the_page_embeds_the_state_an_htmx_request_gets() -> None:
    rs = scheduled()
    client = Client()
    page = join(client, rs.study).content.decode()
    link = f"/s/{rs.study.link_token}/"
    alone = client.get(link, HTTP_HX_REQUEST="true")
    state = alone.content.decode()
    assert alone.status_code == 200 and "HX-Request" in alone["Vary"]
    assert "<html" not in state and "<html" in page
    assert form_of(state)["token"] == form_of(page)["token"]
    assert _normalized(_trial_root(page)) == _normalized(state)
    assert CSRF_RE.search(state)  # the answer form posts with the request's token


def test_what_the_state_shows_is_escaped() -> None:
    rs = scheduled()
    Axis.objects.filter(study=rs.study).update(description='<script>alert("x")</script> & more')
    trial_screens_forget(rs.study.pk)  # the trials' stored screens are made again with the new text
    client = Client()
    html = join(client, rs.study).content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in html


def test_the_axis_questions_come_alike_from_the_fragment_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The axis questions of a study whose trials all show them alike are rendered once per
    process ({% cache %}); the state is the same with and without the cache."""
    from django.core.cache import caches
    from django.core.cache.utils import make_template_fragment_key

    from annotation.rater import flow

    rs = scheduled()
    client = Client()
    join(client, rs.study)
    link = f"/s/{rs.study.link_token}/"
    caches["template_fragments"].clear()
    first = client.get(link, HTTP_HX_REQUEST="true")
    key = first.context["axes_fragment"]
    assert key and caches["template_fragments"].get(make_template_fragment_key("rater-axes", [key])) is not None
    again = client.get(link, HTTP_HX_REQUEST="true")
    monkeypatch.setattr(flow, "_axes_fragment", lambda axes, rater_page: "")
    uncached = client.get(link, HTTP_HX_REQUEST="true")
    assert uncached.context["axes_fragment"] == ""
    assert 'name="axis:' in first.content.decode()
    assert _normalized(first.content.decode()) == _normalized(again.content.decode()) == _normalized(uncached.content.decode())


def test_axis_questions_with_targets_or_answers_are_never_cached() -> None:
    """A trial's own targets, or an answer filled in (a refused vote, a revision), are rendered each
    time: no trial may answer faster because an earlier one (a hidden repeat's original) filled the cache."""
    from annotation.rater.flow import _axes_fragment

    fixed = {"id": "LAYOUT", "title": "Layout", "description": "", "targets": [], "index": 0, "value": "", "bboxes": []}
    options = {"digit_keys": True}
    assert _axes_fragment([fixed], options)
    assert _axes_fragment([fixed], options) != _axes_fragment([{**fixed, "title": "Other"}], options)
    assert _axes_fragment([fixed], options) != _axes_fragment([fixed], {"digit_keys": False})
    assert _axes_fragment([fixed, {**fixed, "targets": [{"bbox_1000": [1, 2, 3, 4]}]}], options) == ""
    assert _axes_fragment([{**fixed, "value": 0}], options) == ""
