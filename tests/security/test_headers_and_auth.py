"""SECURITY.md rows 1–3 and login throttling."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


def test_html_responses_carry_the_security_headers(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", csp)
    assert script_src is not None
    assert "'nonce-" in script_src.group(1)
    assert "unsafe-inline" not in script_src.group(1) and "unsafe-eval" not in script_src.group(1)
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    body = response.content.decode()
    # Every script tag carries the nonce of this response; htmx may not evaluate scripts.
    nonce = re.search(r"'nonce-([^']+)'", csp).group(1)  # type: ignore[union-attr]
    scripts = re.findall(r"<script[^>]*>", body)
    assert scripts and all(f'nonce="{nonce}"' in tag for tag in scripts)
    assert '"allowEval": false' in body and '"allowScriptTags": false' in body


def test_bad_host_is_rejected(client: Client) -> None:
    response = client.get("/accounts/login/", HTTP_HOST="evil.example.com")
    assert response.status_code == 400


def test_unsafe_method_without_csrf_token_is_forbidden(researcher: object) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(researcher)  # type: ignore[arg-type]
    response = client.post("/accounts/logout/")
    assert response.status_code == 403


def test_login_is_throttled_after_repeated_failures(researcher: object) -> None:
    client = Client()
    for _ in range(5):
        response = client.post("/accounts/login/", {"username": "rita-researcher", "password": "wrong"})
        assert response.status_code == 200
    blocked = client.post("/accounts/login/", {"username": "rita-researcher", "password": "pw-arbiter-123"})
    assert blocked.status_code == 429
    assert b"Too many failed login attempts" in blocked.content
    assert "_auth_user_id" not in client.session


def test_token_login_and_throttling(researcher: object) -> None:
    client = Client()
    ok = client.post("/api/auth/token/", {"username": "rita-researcher", "password": "pw-arbiter-123"})
    assert ok.status_code == 200 and len(ok.json()["token"]) == 40
    for _ in range(5):
        assert (
            client.post("/api/auth/token/", {"username": "rita-researcher", "password": "no"}).status_code
            == 400
        )
    assert (
        client.post(
            "/api/auth/token/", {"username": "rita-researcher", "password": "pw-arbiter-123"}
        ).status_code
        == 429
    )


def test_schema_and_docs_are_served(client: Client, researcher: object) -> None:
    client.force_login(researcher)  # type: ignore[arg-type]
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()
