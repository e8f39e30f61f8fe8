"""SECURITY.md row 4: request bodies over the caps, too many files or fields.

Each case must be refused with a 4xx (never a 500) whose body says what was wrong (a JSON
``detail`` on ``/api/`` paths, an HTML page elsewhere), and leave every table and the MEDIA_ROOT
listing as they were. The caps: ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (non-file form and JSON bodies),
``ARBITER_MAX_UPLOAD_BYTES`` (bundle uploads, checked before the body is read),
``DATA_UPLOAD_MAX_NUMBER_FILES`` and ``DATA_UPLOAD_MAX_NUMBER_FIELDS``.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.annotation.factories import make_study
from tests.security.test_zip_bundles import example_members, snapshot, zip_with

pytestmark = pytest.mark.django_db

MiB = 1024 * 1024


@pytest.fixture
def study(researcher: Any) -> Any:
    return make_study("uploads", researchers=[researcher])


@pytest.fixture
def logged_in(researcher: Any) -> Client:
    client = Client()
    client.force_login(researcher)
    return client


def named(data: bytes, name: str) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def assert_clear_refusal(response: Any, *words: str, api: bool) -> str:
    """A 4xx whose body names the problem (any of ``words``, case-insensitive)."""
    assert 400 <= response.status_code < 500, response.status_code
    if api:
        assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
        text = str(response.json()["detail"])
    else:
        text = response.content.decode()
    assert any(word.lower() in text.lower() for word in words), f"no clear reason in {text[:300]!r}"
    return text


# --- bodies over DATA_UPLOAD_MAX_MEMORY_SIZE (forms and JSON, no files) ------------------------


def test_form_body_over_the_cap_is_refused_clearly(
    client: Client, _media_root: Path, researcher: Any
) -> None:
    before = snapshot(_media_root)
    big = "x" * (django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    response = client.post("/accounts/login/", {"username": "rita-researcher", "password": big})
    assert_clear_refusal(response, "too large", "limit", api=False)
    assert "_auth_user_id" not in client.session
    assert snapshot(_media_root) == before


def test_json_body_over_the_cap_is_refused_clearly(logged_in: Client, study: Any, _media_root: Path) -> None:
    before = snapshot(_media_root)
    body = {"name": "v1", "coefficients": {"judge-a": 1.0}, "provenance": {"pad": "x" * (6 * MiB)}}
    response = logged_in.post(
        f"/api/studies/{study.slug}/coefficients/", json.dumps(body), content_type="application/json"
    )
    assert_clear_refusal(response, "too large", "limit", api=True)
    assert snapshot(_media_root) == before


# --- too many files / fields ---------------------------------------------------------------------


def test_too_many_files_on_the_bundle_api(logged_in: Client, _media_root: Path) -> None:
    before = snapshot(_media_root)
    files = {
        f"file{i}": named(b"PK\x05\x06" + bytes(18), f"b{i}.zip")
        for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)
    }
    response = logged_in.post("/api/studies/import/", files)
    assert_clear_refusal(response, "too many files", api=True)
    assert snapshot(_media_root) == before


def test_too_many_files_on_the_bundle_form(logged_in: Client, _media_root: Path) -> None:
    before = snapshot(_media_root)
    files = {
        f"bundle{i}": named(b"x", f"b{i}.zip")
        for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)
    }
    response = logged_in.post("/studies/import/", files)
    assert_clear_refusal(response, "too many files", api=False)
    assert snapshot(_media_root) == before


def test_too_many_files_on_the_votes_import(logged_in: Client, study: Any, _media_root: Path) -> None:
    before = snapshot(_media_root)
    files = {
        f"file{i}": named(b"x", f"v{i}.csv") for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)
    }
    response = logged_in.post(f"/api/studies/{study.slug}/votes/import/", files)
    assert_clear_refusal(response, "too many files", api=True)
    assert snapshot(_media_root) == before


def test_too_many_fields_in_a_multipart_bundle_upload(logged_in: Client, _media_root: Path) -> None:
    before = snapshot(_media_root)
    fields: dict[str, Any] = {f"f{i}": "1" for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    fields["file"] = named(b"x", "b.zip")
    response = logged_in.post("/api/studies/import/", fields)
    assert_clear_refusal(response, "too many fields", "too many form fields", api=True)
    assert snapshot(_media_root) == before


def test_too_many_fields_in_a_login_form(client: Client, researcher: Any, _media_root: Path) -> None:
    before = snapshot(_media_root)
    fields = {f"f{i}": "1" for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    fields.update(username="rita-researcher", password="pw-arbiter-123")
    response = client.post("/accounts/login/", fields)
    assert_clear_refusal(response, "too many fields", "too many form fields", api=False)
    assert "_auth_user_id" not in client.session
    assert snapshot(_media_root) == before


# --- bundle uploads over ARBITER_MAX_UPLOAD_BYTES ---------------------------------------------


def _good_zip(examples_dir: Path, tmp_path: Path) -> bytes:
    return zip_with(tmp_path / "good.zip", list(example_members(examples_dir))).read_bytes()


def test_bundle_upload_over_the_cap_is_refused_by_the_api(
    logged_in: Client, examples_dir: Path, tmp_path: Path, _media_root: Path, settings: Any
) -> None:
    data = _good_zip(examples_dir, tmp_path)
    settings.ARBITER_MAX_UPLOAD_BYTES = len(data) - 1
    before = snapshot(_media_root)
    response = logged_in.post("/api/studies/import/", {"file": named(data, "good.zip")})
    text = assert_clear_refusal(response, "limit", api=True)
    assert f"over the {len(data) - 1:,}-byte limit" in text
    assert snapshot(_media_root) == before
    # Control: the same bundle under the cap imports.
    settings.ARBITER_MAX_UPLOAD_BYTES = len(data)
    assert logged_in.post("/api/studies/import/", {"file": named(data, "good.zip")}).status_code == 201


def test_bundle_upload_over_the_cap_is_refused_by_the_form(
    logged_in: Client, examples_dir: Path, tmp_path: Path, _media_root: Path, settings: Any
) -> None:
    data = _good_zip(examples_dir, tmp_path)
    settings.ARBITER_MAX_UPLOAD_BYTES = len(data) - 1
    before = snapshot(_media_root)
    response = logged_in.post("/studies/import/", {"bundle": named(data, "good.zip")})
    assert_clear_refusal(response, f"over the {len(data) - 1:,}-byte limit", api=False)
    assert snapshot(_media_root) == before


class CountingInput(io.BytesIO):
    """A ``wsgi.input`` that counts what the server read of the body."""

    consumed = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.consumed += len(data)
        return data

    def readline(self, size: int | None = -1) -> bytes:
        data = super().readline(size)
        self.consumed += len(data)
        return data


def _multipart(field: str, name: str, payload: bytes) -> tuple[bytes, str]:
    boundary = "arbiter-boundary-7d1c"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
        "Content-Type: application/zip\r\n\r\n"
    ).encode()
    return head + payload + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize("path", ["/api/studies/import/", "/studies/import/"])
def test_an_oversized_bundle_body_is_refused_before_it_is_read(
    path: str, researcher: Any, _media_root: Path, settings: Any
) -> None:
    """A body whose Content-Length is over ARBITER_MAX_UPLOAD_BYTES must not be streamed to disk first.

    Runs through the real WSGI handler (CSRF on), authenticated by an API token for the API
    path and by the session cookie plus CSRF token for the form.
    """
    settings.ARBITER_MAX_UPLOAD_BYTES = 1 * MiB
    body, content_type = _multipart(
        "file" if path.startswith("/api/") else "bundle", "big.zip", bytes(3 * MiB)
    )
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)),
        "HTTP_HOST": "testserver",
    }
    if path.startswith("/api/"):
        environ["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=researcher).key}"
    else:
        client = Client()
        client.force_login(researcher)
        client.get("/studies/import/")
        csrf = client.cookies["csrftoken"].value
        session = client.cookies[django_settings.SESSION_COOKIE_NAME].value
        environ["HTTP_COOKIE"] = f"csrftoken={csrf}; {django_settings.SESSION_COOKIE_NAME}={session}"
        environ["HTTP_X_CSRFTOKEN"] = csrf
    stream = CountingInput(body)
    environ["wsgi.input"] = stream
    before = snapshot(_media_root)
    status_holder: list[str] = []
    # Straight into the WSGI handler, whose request signals would close the connection holding the
    # test's transaction (PostgreSQL); Django's test client unhooks them the same way.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        chunks = WSGIHandler()(environ, lambda status, headers, exc_info=None: status_holder.append(status))
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    text = b"".join(chunks).decode(errors="replace")
    status = int(status_holder[0].split()[0])
    assert status in (400, 413), (status, text[:300])
    assert "limit" in text
    assert stream.consumed < 1 * MiB, f"the server read {stream.consumed:,} bytes of a refused body"
    assert snapshot(_media_root) == before
