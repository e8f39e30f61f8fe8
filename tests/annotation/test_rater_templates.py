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
