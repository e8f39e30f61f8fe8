"""Leaderboard pages and REST endpoints (docs/protocol.md "Deployment leaderboard"): researcher scoping, the
published page (no login, no inline script or style), publish/unpublish auditing, htmx progress polling."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import AuditEvent
from ranking.leaderboard import leaderboard_compute
from ranking.models import Leaderboard
from tests.ranking.rank_factories import make_ranked_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def ranked(researcher):  # type: ignore[no-untyped-def]
    return make_ranked_study("lb-web", n_pages=10, researchers=[researcher])


def login(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def done_leaderboard(ranked, *, published: bool = False) -> Leaderboard:  # type: ignore[no-untyped-def]
    result = leaderboard_compute(study=ranked.study, coefficient_set="frozen", resamples=40, seed=1)
    return Leaderboard.objects.create(
        study=ranked.study,
        coefficient_set=ranked.coefficient_set,
        resamples=40,
        seed=1,
        status=Leaderboard.Status.DONE,
        progress=1.0,
        result=result,
        published=published,
    )


def test_researcher_starts_a_computation_from_the_page(
    ranked, researcher, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    url = reverse("ranking:leaderboards", args=[ranked.study.slug])
    page = client.get(url)
    assert page.status_code == 200 and b"frozen" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"coefficients": "frozen", "bootstrap": "30", "seed": "5"})
    assert response.status_code == 302
    leaderboard = Leaderboard.objects.get(study=ranked.study)
    assert (
        leaderboard.status == Leaderboard.Status.DONE
        and leaderboard.resamples == 30
        and leaderboard.seed == 5
    )
    assert leaderboard.created_by == researcher
    assert AuditEvent.objects.filter(action="leaderboard.compute", study=ranked.study).exists()
    listing = client.get(url).content.decode()
    assert "hx-get" not in listing  # a finished row no longer polls
    assert reverse("ranking:download", args=[ranked.study.slug, leaderboard.pk, "json"]) in listing


def test_bad_form_input_is_a_400_with_one_line(ranked, researcher) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    url = reverse("ranking:leaderboards", args=[ranked.study.slug])
    response = client.post(url, {"coefficients": "nope", "bootstrap": "30", "seed": "5"})
    assert response.status_code == 400 and b"no coefficient set" in response.content
    response = client.post(url, {"coefficients": "frozen", "bootstrap": "many", "seed": "5"})
    assert response.status_code == 400 and b"bootstrap" in response.content
    bad = b"system,score\nalpha,1\nbeta,x\n"
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(
        url,
        {
            "coefficients": "frozen",
            "bootstrap": "30",
            "seed": "5",
            "objective": SimpleUploadedFile("obj.csv", bad),
        },
    )
    assert response.status_code == 400 and b"obj.csv:3" in response.content
    assert not Leaderboard.objects.exists()


def test_running_row_polls_with_htmx_and_no_inline_script(ranked, researcher) -> None:  # type: ignore[no-untyped-def]
    leaderboard = Leaderboard.objects.create(
        study=ranked.study,
        coefficient_set=ranked.coefficient_set,
        status=Leaderboard.Status.RUNNING,
        progress=0.42,
    )
    client = login(researcher)
    row_url = reverse("ranking:row", args=[ranked.study.slug, leaderboard.pk])
    response = client.get(row_url, headers={"HX-Request": "true"})
    body = response.content.decode()
    assert response.status_code == 200
    assert (
        body.strip().startswith("<tr") and f'hx-get="{row_url}"' in body and 'hx-trigger="every 2s"' in body
    )
    assert 'value="42"' in body
    page = client.get(reverse("ranking:leaderboards", args=[ranked.study.slug])).content.decode()
    assert f'hx-get="{row_url}"' in page
    assert not re.search(r"<script(?![^>]*\bsrc=)", page) and " style=" not in page


def test_publish_unpublish_is_audited_and_controls_the_public_page(ranked, researcher) -> None:  # type: ignore[no-untyped-def]
    leaderboard = done_leaderboard(ranked)
    public = reverse("ranking:public", args=[leaderboard.public_token])
    anonymous = Client()
    assert anonymous.get(public).status_code == 404
    assert anonymous.get(reverse("ranking:api-public", args=[leaderboard.public_token])).status_code == 404
    client = login(researcher)
    publish = reverse("ranking:publish", args=[ranked.study.slug, leaderboard.pk])
    assert client.post(publish, {"published": "1"}).status_code == 302
    leaderboard.refresh_from_db()
    assert leaderboard.published and leaderboard.published_at is not None
    page = anonymous.get(public)
    body = page.content.decode()
    assert page.status_code == 200
    for row in leaderboard.result["systems"]:
        assert row["system"] in body and row["name"] in body
    assert "<svg" in body and "page-block bootstrap" in body and "40 resamples, seed 1" in body
    assert not re.search(r"<script(?![^>]*\bsrc=)", body) and " style=" not in body
    csp = page["Content-Security-Policy"]
    assert "'unsafe-inline'" not in csp
    data = anonymous.get(reverse("ranking:public-json", args=[leaderboard.public_token]))
    assert json.loads(data.content) == leaderboard.result
    csv_response = anonymous.get(reverse("ranking:public-csv", args=[leaderboard.public_token]))
    assert csv_response["Content-Type"].startswith("text/csv")
    assert (
        csv_response.content.decode().splitlines()[1].split(",")[1]
        == leaderboard.result["systems"][0]["system"]
    )
    api = anonymous.get(reverse("ranking:api-public", args=[leaderboard.public_token]))
    assert api.status_code == 200 and api.json() == leaderboard.result
    assert client.post(publish, {"published": "0"}).status_code == 302
    assert anonymous.get(public).status_code == 404
    actions = list(AuditEvent.objects.filter(study=ranked.study).values_list("action", flat=True))
    assert "leaderboard.publish" in actions and "leaderboard.unpublish" in actions


def test_an_unfinished_leaderboard_cannot_be_published(ranked, researcher) -> None:  # type: ignore[no-untyped-def]
    leaderboard = Leaderboard.objects.create(study=ranked.study, coefficient_set=ranked.coefficient_set)
    client = login(researcher)
    client.post(reverse("ranking:publish", args=[ranked.study.slug, leaderboard.pk]), {"published": "1"})
    leaderboard.refresh_from_db()
    assert not leaderboard.published


def test_access_personas(ranked, researcher, other_researcher, rater_user) -> None:  # type: ignore[no-untyped-def]
    leaderboard = done_leaderboard(ranked)
    slug = ranked.study.slug
    urls = [
        reverse("ranking:leaderboards", args=[slug]),
        reverse("ranking:detail", args=[slug, leaderboard.pk]),
        reverse("ranking:row", args=[slug, leaderboard.pk]),
        reverse("ranking:download", args=[slug, leaderboard.pk, "json"]),
        reverse("ranking:schedule", args=[slug]),
    ]
    other = login(other_researcher)
    for url in urls:
        assert other.get(url).status_code == 404, url
    assert (
        other.post(reverse("ranking:publish", args=[slug, leaderboard.pk]), {"published": "1"}).status_code
        == 404
    )
    rater = login(rater_user)
    for url in urls:
        assert rater.get(url).status_code == 403, url
    anonymous = Client()
    for url in urls:
        assert anonymous.get(url).status_code == 302, url
    mine = login(researcher)
    for url in urls:
        assert mine.get(url).status_code == 200, url
    assert other.get(reverse("ranking:api-list", args=[slug])).status_code == 404
    assert other.get(reverse("ranking:api-detail", args=[slug, leaderboard.pk])).status_code == 404
    assert rater.get(reverse("ranking:api-list", args=[slug])).status_code == 403
    leaderboard.refresh_from_db()
    assert not leaderboard.published


def test_rest_list_start_and_detail(ranked, researcher, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    client = login(researcher)
    url = reverse("ranking:api-list", args=[ranked.study.slug])
    assert client.get(url).json() == []
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            url,
            {"coefficients": "frozen", "bootstrap": 25, "seed": 3, "objective": {"alpha": 2, "delta": 1}},
            content_type="application/json",
        )
    assert response.status_code == 202, response.content
    started = response.json()
    assert started["status"] == "queued" and started["resamples"] == 25
    listing = client.get(url).json()
    assert [row["id"] for row in listing] == [started["id"]] and listing[0]["status"] == "done"
    detail = client.get(reverse("ranking:api-detail", args=[ranked.study.slug, started["id"]])).json()
    assert detail["result"]["objective_vs_subjective"]["n_systems"] == 2
    assert detail["result"] == leaderboard_compute(
        study=ranked.study, coefficient_set="frozen", resamples=25, seed=3, objective={"alpha": 2, "delta": 1}
    )
    bad = client.post(
        url, {"coefficients": "frozen", "objective": {"omega": 1}}, content_type="application/json"
    )
    assert bad.status_code == 400 and "omega" in bad.json()["detail"]
    missing = client.post(url, {"coefficients": "missing"}, content_type="application/json")
    assert missing.status_code == 404 and "missing" in missing.json()["detail"]


def test_leaderboard_html_report_download(ranked, researcher) -> None:  # type: ignore[no-untyped-def]
    """Issue 17: the self-contained HTML report, from the detail page and the public page."""
    leaderboard = done_leaderboard(ranked)
    client = login(researcher)
    detail = client.get(reverse("ranking:detail", args=[ranked.study.slug, leaderboard.pk])).content.decode()
    url = reverse("ranking:download", args=[ranked.study.slug, leaderboard.pk, "html"])
    assert f'href="{url}" download>HTML report</a>' in detail
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert response["Content-Disposition"].endswith('.html"')
    body = response.content.decode()
    assert "<svg" in body and leaderboard.result["systems"][0]["system"] in body
    assert Client().get(reverse("ranking:public-html", args=[leaderboard.public_token])).status_code == 404
    leaderboard.published = True
    leaderboard.save()
    assert Client().get(reverse("ranking:public-html", args=[leaderboard.public_token])).status_code == 200
