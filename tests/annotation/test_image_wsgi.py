"""Pass-granted images answered before Django's handler (annotation/image_wsgi.py), as gunicorn calls it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from django.test import Client, RequestFactory

from annotation import image_cookie
from annotation.image_wsgi import ImagePassApplication
from annotation.models import Trial
from tests.annotation.test_rater_flow import form_of, join, scheduled

pytestmark = pytest.mark.django_db

IMAGE_RE = re.compile(r'src="(/t/[^"]+\.png)"')
DYNAMIC = {"Server-Timing", "Date"}  # per request


class Called:
    """A WSGI call: status, headers and body, as a server would collect them.

    A served request closes the database connection when it starts and ends; inside a test's
    transaction it must stay open, so those two receivers are off for the call, as Django's test
    client does it.
    """

    def __init__(self, app: Any, environ: dict[str, Any]) -> None:
        self.status, self.headers = "", {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            self.status, self.headers = status, dict(headers)

        signals.request_started.disconnect(close_old_connections)
        signals.request_finished.disconnect(close_old_connections)
        try:
            iterable = app(environ, start_response)
            try:
                self.body = b"".join(iterable)
            finally:
                getattr(iterable, "close", lambda: None)()
        finally:
            signals.request_started.connect(close_old_connections)
            signals.request_finished.connect(close_old_connections)

    @property
    def code(self) -> int:
        return int(self.status.split()[0])


def _environ(url: str, client: Client | None, **extra: Any) -> dict[str, Any]:
    cookies = "; ".join(f"{k}={m.value}" for k, m in client.cookies.items()) if client else ""
    return RequestFactory().get(url, HTTP_COOKIE=cookies, **extra).environ  # type: ignore[no-any-return]


@pytest.fixture
def joined():  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    return client, html, list(dict.fromkeys(IMAGE_RE.findall(html)))


def test_the_image_is_the_file_with_djangos_headers_and_no_query(joined, settings, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    client, html, urls = joined
    app = ImagePassApplication(WSGIHandler())
    trial = Trial.objects.select_related("comparison__candidate_a", "comparison__candidate_b").get(
        token=form_of(html)["token"]
    )
    for url in urls:
        with django_assert_max_num_queries(0):
            fast = Called(app, _environ(url, client))
        assert fast.code == 200 and fast.body.startswith(b"\x89PNG")
        assert "X-Accel-Redirect" not in fast.headers and "Content-Disposition" not in fast.headers
        assert fast.headers["Content-Length"] == str(len(fast.body))
        assert re.fullmatch(r'db;dur=0\.00;desc="0 queries", render;dur=0\.00, app;dur=[\d.]+', fast.headers["Server-Timing"])
        via_django = client.get(url)  # the view behind the whole middleware stack
        assert b"".join(via_django.streaming_content) == fast.body
        expected = {k: v for k, v in via_django.items() if k not in DYNAMIC}
        assert {k: v for k, v in fast.headers.items() if k not in DYNAMIC} == expected
    shown = trial.comparison.candidate_b if trial.swapped else trial.comparison.candidate_a
    left = Called(app, _environ(f"/t/{trial.token}/left.png", client))
    assert left.body == (settings.MEDIA_ROOT / shown.neutralized_image.file.name).read_bytes()


def test_without_a_valid_pass_django_decides(joined, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    client, html, urls = joined
    app = ImagePassApplication(WSGIHandler())
    stranger = Client()
    stranger.cookies[image_cookie.COOKIE_NAME] = client.cookies[image_cookie.COOKIE_NAME].value
    refused = Called(app, _environ(urls[0], stranger))  # another session: the pass does not open
    assert refused.code == 404 and not refused.body.startswith(b"\x89PNG")
    assert Called(app, _environ(urls[0], None)).code == 404  # no cookie at all
    token = form_of(html)["token"]
    assert Called(app, _environ(f"/t/{token}/item.png", client)).code == 404  # not a slot of the trial
    # The owner without the pass is served by Django from the trial row and the session.
    owner = Client()
    owner.cookies[django_settings.SESSION_COOKIE_NAME] = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    with django_assert_max_num_queries(2):
        served = Called(app, _environ(urls[0], owner))
    assert served.code == 200 and served.body.startswith(b"\x89PNG")
    # Requests Django refuses before any view are still refused.
    assert Called(app, _environ(urls[0], client, HTTP_HOST="evil.example")).code == 400
    assert Called(app, _environ(urls[0], client, REQUEST_METHOD="POST")).code in (403, 405)


def test_https_only_and_behind_a_proxy(joined, settings) -> None:  # type: ignore[no-untyped-def]
    client, _html, urls = joined
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    app = ImagePassApplication(WSGIHandler())
    redirected = Called(app, _environ(urls[0], client))
    assert redirected.code == 301 and redirected.headers["Location"].startswith("https://")
    secure = Called(app, _environ(urls[0], client, **{"wsgi.url_scheme": "https"}))
    assert secure.code == 200 and secure.headers["Strict-Transport-Security"] == "max-age=3600"
    settings.SECURE_SSL_REDIRECT = False
    settings.ARBITER_IMAGE_ACCEL_REDIRECT = "/protected-images/"
    accel = Called(ImagePassApplication(WSGIHandler()), _environ(urls[0], client))
    assert accel.code == 200 and accel.body == b"" and accel.headers["Content-Type"] == "image/png"
    assert re.fullmatch(r"/protected-images/[0-9a-zA-Z/_.-]+\.png", accel.headers["X-Accel-Redirect"])


def test_the_served_application_is_wrapped() -> None:
    from config import wsgi

    assert isinstance(wsgi.application, ImagePassApplication)
    assert wsgi.application.application is wsgi.django_application


def test_a_granted_file_gone_from_disk_is_djangos_404(joined, settings) -> None:  # type: ignore[no-untyped-def]
    client, _html, urls = joined
    app = ImagePassApplication(WSGIHandler())
    assert Called(app, _environ(urls[0], client)).code == 200
    settings.MEDIA_ROOT = settings.MEDIA_ROOT / "elsewhere"  # every stored file is missing now
    missing = Called(app, _environ(urls[0], client))
    assert missing.code == 404 and not missing.body.startswith(b"\x89PNG")
