"""Calibration REST endpoints and researcher page (docs/protocol.md "Judges and calibration"): personas,
payloads, freeze form."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from calibration.models import CalibrationReport, CoefficientSet
from calibration.services.calibration import calibration_report_for_study, coefficient_set_freeze
from stats.judge_weights import calibrate
from tests.calibration.cal_factories import make_calibration_study
from tests.calibration.figure_checks import page_figures

pytestmark = pytest.mark.django_db


@pytest.fixture
def cal(researcher):  # type: ignore[no-untyped-def]
    return make_calibration_study("cal-api", researchers=[researcher], n_blocks=2, pages_per_block=6)


def api(user=None) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def urls(slug: str = "cal-api") -> dict[str, str]:
    return {
        "report": f"/api/studies/{slug}/calibration/?bootstrap=40&seed=2",
        "list": f"/api/studies/{slug}/coefficients/",
        "detail": f"/api/studies/{slug}/coefficients/v1/",
        "page": f"/studies/{slug}/calibration/",
    }


def test_report_endpoint_equals_pure_calibrate(cal, researcher) -> None:  # type: ignore[no-untyped-def]
    response = api(researcher).get(urls()["report"])
    assert response.status_code == 200
    body = response.json()
    direct = calibrate(
        cal.judge_outputs, cal.human, judges=cal.judges, resamples=40, seed=2, families=cal.families
    )
    assert body["coefficients"] == pytest.approx(direct.coefficients, rel=1e-12)
    assert body["bootstrap"] == {"resamples": 40, "seed": 2}
    assert body["cv"]["brier"]["value"] == pytest.approx(
        direct.brier.value if direct.brier else None, rel=1e-12
    )
    assert not CalibrationReport.objects.exists()  # GET computes, it stores nothing


def test_report_endpoint_bad_parameters(cal, researcher) -> None:  # type: ignore[no-untyped-def]
    client = api(researcher)
    for query, fragment in (
        ("bootstrap=abc", "bootstrap"),
        ("bootstrap=0", "bootstrap"),
        ("judges=ghost", "ghost"),
    ):
        response = client.get(f"/api/studies/cal-api/calibration/?{query}")
        assert response.status_code == 400, query
        assert fragment in response.json()["detail"] and "\n" not in response.json()["detail"]


def test_coefficient_list_import_detail(cal, researcher) -> None:  # type: ignore[no-untyped-def]
    client = api(researcher)
    report = calibration_report_for_study(study=cal.study, resamples=20, seed=1)
    coefficient_set_freeze(study=cal.study, name="v1", report=report, user=researcher)
    listed = client.get(urls()["list"]).json()
    assert [row["name"] for row in listed] == ["v1"]
    assert (
        listed[0]["n_comparisons"] == report["n_comparisons"]
        and listed[0]["frozen_by"] == researcher.username
    )

    detail = client.get(urls()["detail"]).json()
    assert detail["coefficients"] == report["coefficients"]
    assert detail["provenance"]["data_hash"] == report["fit_data"]["data_hash"]

    posted = client.post(urls()["list"], {**detail, "name": "v1-again"}, format="json")
    assert posted.status_code == 201, posted.content
    assert CoefficientSet.objects.get(study=cal.study, name="v1-again").coefficients == report["coefficients"]

    again = client.post(urls()["list"], detail, format="json")
    assert again.status_code == 409 and "already has a frozen coefficient set" in again.json()["detail"]
    unknown = client.post(urls()["list"], {"name": "w", "coefficients": {"nobody": 1.0}}, format="json")
    assert unknown.status_code == 400 and "unknown judge(s) nobody" in unknown.json()["detail"]
    assert client.get("/api/studies/cal-api/coefficients/missing/").status_code == 404


@pytest.mark.parametrize("key", ["report", "list", "detail", "page"])
def test_personas(cal, researcher, other_researcher, rater_user, admin_user, key: str) -> None:  # type: ignore[no-untyped-def]
    report = calibration_report_for_study(study=cal.study, resamples=20, seed=1)
    coefficient_set_freeze(study=cal.study, name="v1", report=report)
    url = urls()[key]
    if key == "page":

        def get(user):  # type: ignore[no-untyped-def]
            client = Client()
            if user is not None:
                client.force_login(user)
            return client.get(url)
    else:

        def get(user):  # type: ignore[no-untyped-def]
            return api(user).get(url)

    assert get(researcher).status_code == 200
    assert get(admin_user).status_code == 200
    assert get(other_researcher).status_code == 404  # another study's researcher: no existence leak
    assert get(rater_user).status_code == 403
    anonymous = get(None).status_code
    assert anonymous in ((302,) if key == "page" else (401, 403))


def test_deleting_the_user_who_froze_keeps_the_set(cal, researcher) -> None:  # type: ignore[no-untyped-def]
    report = calibration_report_for_study(study=cal.study, resamples=20, seed=1)
    cs = coefficient_set_freeze(study=cal.study, name="v1", report=report, user=researcher)
    researcher.delete()
    kept = CoefficientSet.objects.get(pk=cs.pk)
    assert kept.frozen_by is None and kept.frozen_by_label == "rita-researcher"
    assert kept.coefficients == report["coefficients"]


def test_post_import_personas(cal, other_researcher, rater_user) -> None:  # type: ignore[no-untyped-def]
    body = {"name": "w", "coefficients": {"cal-opus": 1.0}}
    assert api(other_researcher).post(urls()["list"], body, format="json").status_code == 404
    assert api(rater_user).post(urls()["list"], body, format="json").status_code == 403
    assert not CoefficientSet.objects.exists()


def test_page_computes_once_then_freezes(cal, researcher, other_researcher) -> None:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(researcher)
    page = client.get("/studies/cal-api/calibration/")
    assert page.status_code == 200
    html = page.content.decode()
    stored = CalibrationReport.objects.get(study=cal.study)
    assert stored.resamples == 200
    for judge in cal.judges:
        assert judge in html
    assert "<script>" not in html.split("</head>", 1)[1]  # no inline script in the body (CSP)
    # The figures are drawn on requests of their own, so the page shows its tables at once.
    sources = page_figures(client, html, under=f"/studies/cal-api/calibration/figures/{stored.pk}/", count=4)
    assert sorted(src.rsplit("/", 1)[1] for src in sources) == sorted(
        f"{name}.svg" for name in ("coefficients", "reliability", "per_block", "diagnostics")
    )
    assert client.get(f"/studies/cal-api/calibration/figures/{stored.pk + 1}/reliability.svg").status_code == 404
    outsider = Client()
    outsider.force_login(other_researcher)
    assert outsider.get(sources[0]).status_code == 404
    client.get("/studies/cal-api/calibration/")
    assert CalibrationReport.objects.filter(study=cal.study).count() == 1  # shown again, not recomputed

    frozen = client.post(
        "/studies/cal-api/calibration/", {"action": "freeze", "report": stored.pk, "name": "web"}
    )
    assert frozen.status_code == 302
    cs = CoefficientSet.objects.get(study=cal.study, name="web")
    assert cs.coefficients == stored.report["coefficients"] and cs.frozen_by == researcher
    twice = client.post(
        "/studies/cal-api/calibration/", {"action": "freeze", "report": stored.pk, "name": "web"}
    )
    assert twice.status_code == 409 and "already has a frozen coefficient set" in twice.content.decode()

    recomputed = client.post(
        "/studies/cal-api/calibration/", {"action": "recompute", "bootstrap": "30", "seed": "4"}
    )
    assert recomputed.status_code == 302
    latest = CalibrationReport.objects.filter(study=cal.study).order_by("-id").first()
    assert latest is not None and (latest.resamples, latest.seed) == (30, 4)

    download = client.get("/studies/cal-api/calibration/report.html")
    assert download.status_code == 200 and b"<script" not in download.content
    data = json.loads(client.get("/studies/cal-api/calibration/report.json").content)
    assert data["bootstrap"] == {"resamples": 30, "seed": 4}


def test_a_figure_kept_for_an_old_report_row_is_not_shown_for_a_new_row_of_the_same_id(cal, researcher) -> None:  # type: ignore[no-untyped-def]
    # SQLite gives a new row the highest id again once that row is deleted; the figure kept in the
    # cache for the old row must not be served for the new one.
    client = Client()
    client.force_login(researcher)
    client.get("/studies/cal-api/calibration/")
    stored = CalibrationReport.objects.get(study=cal.study)
    url = f"/studies/cal-api/calibration/figures/{stored.pk}/coefficients.svg"
    before = client.get(url).content
    other = json.loads(json.dumps(stored.report))
    for judge in other["coefficients"]:
        other["coefficients"][judge] = -1.0
    CalibrationReport.objects.filter(pk=stored.pk).update(report=other)
    after = client.get(url).content
    assert after != before
    cache.clear()
    assert client.get(url).content == after  # what a fresh process draws for the new row
