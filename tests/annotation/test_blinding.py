"""Blinding: nothing served to a rater names a system, a candidate, a source file or a repeat.

A whole assignment is walked through the HTML flow and the JSON API; every response a rater can
receive (pages, htmx fragments, API bodies, image bytes and their metadata, headers, redirect URLs)
is searched for the study's secrets, and a hidden repeat's page must equal its original's once the
per-trial tokens are masked.
"""

from __future__ import annotations

import io
import re

import pytest
from django.test import Client
from PIL import Image

from annotation.models import Comparison, Page, StoredImage, Trial
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study

pytestmark = pytest.mark.django_db


def _secrets(rs) -> list[str]:  # type: ignore[no-untyped-def]
    out = set(rs.secrets)
    for c in Comparison.objects.filter(study=rs.study):
        out.update({c.external_id, c.candidate_a.external_id, c.candidate_b.external_id})
    out.update(Page.objects.filter(study=rs.study).values_list("external_id", flat=True))
    for image in StoredImage.objects.all():
        out.update({image.sha256, image.sha256[:16], image.file.name})
    out.add("repeat")
    return sorted(s for s in out if s)


def _texts(response) -> list[str]:  # type: ignore[no-untyped-def]
    texts = [f"{k}: {v}" for k, v in response.headers.items()]
    if response.streaming:
        body = b"".join(response.streaming_content)
        with Image.open(io.BytesIO(body)) as image:
            texts.extend(f"{k}={v}" for k, v in image.info.items())
            assert not image.getexif()
        texts.append(body.decode("latin-1"))
    else:
        texts.append(response.content.decode())
    return texts


def _assert_blind(responses, secrets) -> None:  # type: ignore[no-untyped-def]
    for url, response in responses:
        for text in [url, *_texts(response)]:
            low = text.lower()
            for secret in secrets:
                assert secret.lower() not in low, f"{secret!r} leaked in {url}"


def test_nothing_served_to_a_rater_reveals_systems_candidates_files_or_repeats() -> None:
    rs = make_rater_study(pages=6)
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=3, min_gap=2, raters=[1, 1], seed=5)
    secrets = _secrets(rs)
    assert "Alphaparser Zeta v2" in secrets and "sysbeta" in secrets and "cand-sysgamma-001" in secrets
    client = Client()
    seen = []

    def get(url: str, **kw):  # type: ignore[no-untyped-def]
        r = client.get(url, **kw)
        seen.append((url, r))
        return r

    r = get(f"/s/{rs.study.link_token}/?participant=blind-1")
    seen.append((r["Location"], r))
    html = get(r["Location"]).content.decode()
    get(f"/s/{rs.study.link_token}/instructions/")
    get(f"/s/{rs.study.link_token}/pause/")
    pages_by_trial: dict[str, str] = {}
    while True:
        m = re.search(r'action="/t/([^/"]+)/vote/"', html)
        if not m:
            break
        token = m.group(1)
        pages_by_trial[token] = html
        api = get(f"/api/rater/{rs.study.link_token}/trial/").json()
        assert api["trial"] == token
        for slot in ("ref", "left", "right"):
            assert get(f"/t/{token}/{slot}.png").status_code == 200
        axes = re.findall(r'name="axis:([A-Z_]+)" value="0"', html)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', html).group(1)
        r = client.post(f"/t/{token}/vote/", {"verdict": "B", "confidence": "2", "idempotency_key": key,
                                              **{f"axis:{a}": "-1" for a in axes}}, HTTP_HX_REQUEST="true")
        seen.append((f"/t/{token}/vote/", r))
        html = r.content.decode()
    assert "Thank you" in html and len(pages_by_trial) == 11
    _assert_blind(seen, secrets)

    # A hidden repeat looks exactly like its original, apart from its own opaque tokens.
    repeats = Trial.objects.filter(assignment__rater__external_id="blind-1", is_repeat=True).select_related("repeat_of")
    assert repeats.count() == 3
    for repeat in repeats:
        assert repeat.token != repeat.repeat_of.token

        def masked(t: Trial) -> str:
            text = pages_by_trial[t.token]
            text = text.replace(t.token, "TOKEN")
            text = re.sub(r'value="[^"]+"( type="hidden"| name="idempotency_key")', r'value="K"\1', text)
            text = re.sub(r'name="idempotency_key" value="[^"]+"', 'name="idempotency_key" value="K"', text)
            text = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", text)
            text = re.sub(r'"X-CSRFToken": "[^"]+"', "", text)
            text = re.sub(r'nonce="[^"]+"', "", text)
            text = re.sub(r"\d+ of \d+", "N of M", text)
            text = re.sub(r'value="\d+"></progress>', 'value="N"></progress>', text)
            text = re.sub(r'\s*<span class="time-left[^<]*</span>', "", text)  # the pace estimate is progress
            text = re.sub(r'<details class="instructions" data-instructions( open)?>', "", text)
            return text

        assert masked(repeat) == masked(repeat.repeat_of)


def test_api_fields_are_blind() -> None:
    rs = make_rater_study(pages=6)
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=1, min_gap=2, raters=[1, 1], seed=5)
    client = Client()
    client.get(f"/s/{rs.study.link_token}/?participant=api-1")
    data = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    assert set(data) == {"finished", "number", "total", "answered", "trial", "images", "axes", "idempotency_key",
                         "vote_url"}
    for axis in data["axes"]:
        assert set(axis) == {"id", "title", "scope", "description", "targets"}
    assert all(re.fullmatch(r"/t/[A-Za-z0-9_-]+/(ref|left|right)\.png", u) for u in data["images"].values())
