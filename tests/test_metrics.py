"""``/metrics`` (config/metrics.py): who may read it, that the counters move, the JSON request log."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import Client
from prometheus_client import REGISTRY

from tests.annotation.test_rater_flow import answer, join, scheduled

pytestmark = pytest.mark.django_db


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_answer_staff_and_allowed_addresses_only(settings, admin_user, researcher) -> None:  # type: ignore[no-untyped-def]
    import ipaddress

    assert Client().get("/metrics").status_code == 404  # anonymous, no allowed range
    researcher_client = Client()
    researcher_client.force_login(researcher)
    assert researcher_client.get("/metrics").status_code == 404  # a researcher is not staff
    staff = Client()
    staff.force_login(admin_user)
    response = staff.get("/metrics")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert b"arbiter_votes_stored_total" in response.content and b"arbiter_judge_queue" in response.content
    settings.ARBITER_METRICS_ALLOW_NETWORKS = [ipaddress.ip_network("10.1.0.0/16")]
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="10.2.0.1").get("/metrics").status_code == 404
    # Behind an untrusted proxy chain the forwarded address is not believed.
    assert Client(REMOTE_ADDR="10.2.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3").get("/metrics").status_code == 404


def test_a_stored_vote_and_the_rater_requests_move_their_counters(admin_user, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    votes = _value("arbiter_votes_stored_total")
    trial_pages = _value("arbiter_rater_request_seconds_count", view="rater:link")
    with django_capture_on_commit_callbacks(execute=True):  # a vote counts once its transaction commits
        response = answer(client, html)
    assert response.status_code == 200
    assert _value("arbiter_votes_stored_total") == votes + 1
    client.get(f"/s/{rs.study.link_token}/")
    assert _value("arbiter_rater_request_seconds_count", view="rater:link") == trial_pages + 1
    assert _value("arbiter_rater_responses_total", view="rater:link", status="200") >= 1
    staff = Client()
    staff.force_login(admin_user)
    exposed = staff.get("/metrics").content.decode()
    assert f"arbiter_votes_stored_total {votes + 1}" in exposed
    assert 'arbiter_judge_queue{status="pending"} 0.0' in exposed


def test_json_logs_give_each_request_one_line_and_its_request_id(settings, caplog) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_LOG_FORMAT = "json"
    logger = logging.getLogger("arbiter.request")
    logger.addHandler(caplog.handler)
    try:
        caplog.set_level(logging.INFO, logger="arbiter.request")
        response = Client().get("/accounts/login/", HTTP_X_REQUEST_ID="lb-0123456789")
        fresh = Client().get("/accounts/login/", HTTP_X_REQUEST_ID="bad id with spaces")
    finally:
        logger.removeHandler(caplog.handler)
    assert response["X-Request-ID"] == "lb-0123456789"
    assert fresh["X-Request-ID"] != "bad id with spaces" and len(fresh["X-Request-ID"]) == 32
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "arbiter.request"]
    assert [line["request_id"] for line in lines] == ["lb-0123456789", fresh["X-Request-ID"]]
    assert lines[0]["path"] == "/accounts/login/" and lines[0]["status"] == 200 and lines[0]["method"] == "GET"
