"""Configurable exclusion rules (docs/study-kinds.md "Hygiene rules" hygiene): the settings form, the API and
their effect on kind_report."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from annotation.models import AuditEvent, Study
from stats.hygiene import HygieneRules
from tests.kind_reports.test_kind_report import PAIRWISE_KEPT, build_pairwise, run_default

pytestmark = pytest.mark.django_db


def _form(**changes: str) -> dict[str, str]:
    defaults = HygieneRules()
    values = {
        name: "" if getattr(defaults, name) is None else str(getattr(defaults, name))
        for name in defaults.__dataclass_fields__
    }
    return {**values, **changes}


def test_form_saves_rules_that_the_report_then_applies(tmp_path: Path, researcher: Any) -> None:
    sc = build_pairwise(tmp_path, researchers=(researcher,))
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/research/studies/{sc.study.slug}/kind-report/?bootstrap=50").content.decode()
    assert 'name="min_median_response_ms"' in page and 'value="1000.0"' in page
    before = run_default(tmp_path, "pw")["hygiene"]
    assert "p8" in {p["participant"] for p in before["excluded_participants"]}

    response = client.post(
        f"/research/studies/{sc.study.slug}/kind-report/rules/", _form(min_median_response_ms="")
    )
    assert response.status_code == 302
    sc.study.refresh_from_db()
    assert sc.study.options["exclusion_rules"]["min_median_response_ms"] is None
    after = run_default(tmp_path, "pw", name="after.json")["hygiene"]
    assert "p8" not in {p["participant"] for p in after["excluded_participants"]}
    assert after["kept_participants"] == len(PAIRWISE_KEPT) + 1
    event = AuditEvent.objects.filter(action="study.exclusion_rules").get()
    assert event.details["rules"]["min_median_response_ms"] is None and event.actor == researcher


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"straightline_share": "1.5"}, "straightline_share must be in (0, 1]"),
        ({"straightline_min_trials": ""}, "straightline_min_trials cannot be null"),
        ({"max_attention_failures": "two"}, "expected a number or empty (off), got 'two'"),
        ({"straightline_run": "1"}, "straightline_run must be at least 2"),
    ],
)
def test_bad_settings_are_refused_whole(
    tmp_path: Path, researcher: Any, changes: dict[str, str], message: str
) -> None:
    sc = build_pairwise(tmp_path, researchers=(researcher,))
    client = Client()
    client.force_login(researcher)
    response = client.post(
        f"/research/studies/{sc.study.slug}/kind-report/rules/",
        _form(min_median_response_ms="", **changes),
        follow=True,
    )
    assert message in html.unescape(response.content.decode())
    assert "exclusion_rules" not in Study.objects.get(pk=sc.study.pk).options
    assert not AuditEvent.objects.filter(action="study.exclusion_rules").exists()


def test_api_reads_and_replaces_the_rules(tmp_path: Path, researcher: Any, other_researcher: Any) -> None:
    sc = build_pairwise(tmp_path, researchers=(researcher,))
    client = Client()
    client.force_login(researcher)
    url = f"/api/studies/{sc.study.slug}/exclusion-rules/"
    assert client.get(url).json() == {**HygieneRules().__dict__}
    response = client.put(
        url, {"max_attention_failures": 1, "straightline_run": 5}, content_type="application/json"
    )
    assert response.status_code == 200
    assert response.json()["max_attention_failures"] == 1 and response.json()["straightline_run"] == 5
    assert Study.objects.get(pk=sc.study.pk).options["exclusion_rules"] == {
        "max_attention_failures": 1,
        "straightline_run": 5,
    }
    bad = client.put(url, {"colour": 1}, content_type="application/json")
    assert bad.status_code == 400 and "unknown exclusion-rule setting 'colour'" in bad.content.decode()
    outsider = Client()
    outsider.force_login(other_researcher)
    assert outsider.get(url).status_code == 404
    assert outsider.put(url, {}, content_type="application/json").status_code == 404
