"""A trial's images through Django's middleware: the image pass (annotation/image_pass.py) serves
them with no query; without a valid pass the trial row and the session decide."""

from __future__ import annotations

import re

import pytest
from django.conf import settings as django_settings
from django.core.handlers.wsgi import WSGIHandler
from django.test import Client

from annotation.models import Trial
from annotation.rater import images as image_pass
from tests.annotation.test_rater_flow import form_of, join, scheduled

pytestmark = pytest.mark.django_db

IMAGE_RE = re.compile(r'src="(/t/[^"]+\.png)"')


@pytest.fixture
def joined():  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    return client, html, list(dict.fromkeys(IMAGE_RE.findall(html)))


def _body(response) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[no-any-return]


def _same_browser(client: Client) -> Client:
    again = Client()
    for name, morsel in client.cookies.items():
        again.cookies[name] = morsel.value
    return again


def test_a_passed_image_is_the_file_with_no_query(joined, settings, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    client, html, urls = joined
    trial = Trial.objects.select_related("comparison__candidate_a", "comparison__candidate_b").get(
        token=form_of(html)["token"]
    )
    for url in urls:
        with django_assert_max_num_queries(0):
            response = client.get(url)
        assert response.status_code == 200 and _body(response).startswith(b"\x89PNG")
        assert response["Content-Type"] == "image/png" and response["Cache-Control"] == "private, max-age=86400"
        assert "X-Accel-Redirect" not in response and "Content-Disposition" not in response
        assert "X-Frame-Options" in response  # Django's security headers, as on every response
    shown = trial.comparison.candidate_b if trial.swapped else trial.comparison.candidate_a
    left = client.get(f"/t/{trial.token}/left.png")
    assert _body(left) == (settings.MEDIA_ROOT / shown.neutralized_image.file.name).read_bytes()


def test_without_a_valid_pass_the_trial_row_and_the_session_decide(joined, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    client, html, urls = joined
    stranger = Client()
    stranger.cookies[image_pass.COOKIE_NAME] = client.cookies[image_pass.COOKIE_NAME].value
    refused = stranger.get(urls[0])  # another session: the pass does not open
    assert refused.status_code == 404 and not _body(refused).startswith(b"\x89PNG")
    assert Client().get(urls[0]).status_code == 404  # no cookie at all
    token = form_of(html)["token"]
    assert client.get(f"/t/{token}/item.png").status_code == 404  # not a slot of the trial
    owner = Client()  # the owner without the pass: the trial row and the session
    owner.cookies[django_settings.SESSION_COOKIE_NAME] = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    with django_assert_max_num_queries(2):
        served = owner.get(urls[0])
    assert served.status_code == 200 and _body(served).startswith(b"\x89PNG")
    assert client.get(urls[0], HTTP_HOST="evil.example").status_code == 400
    assert client.post(urls[0]).status_code in (403, 405)


def test_https_only_and_behind_a_proxy(joined, settings) -> None:  # type: ignore[no-untyped-def]
    client, _html, urls = joined
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    https = _same_browser(client)  # the middleware reads its settings when a client first loads it
    redirected = https.get(urls[0])
    assert redirected.status_code == 301 and redirected["Location"].startswith("https://")
    secure = https.get(urls[0], secure=True)
    assert secure.status_code == 200 and secure["Strict-Transport-Security"] == "max-age=3600"
    settings.SECURE_SSL_REDIRECT = False
    settings.ARBITER_IMAGE_ACCEL_REDIRECT = "/protected-images/"
    accel = _same_browser(client).get(urls[0])
    assert accel.status_code == 200 and accel.content == b"" and accel["Content-Type"] == "image/png"
    assert re.fullmatch(r"/protected-images/[0-9a-zA-Z/_.-]+\.png", accel["X-Accel-Redirect"])


def test_the_served_application_is_djangos() -> None:
    from config import wsgi

    assert isinstance(wsgi.application, WSGIHandler)


def test_a_granted_file_gone_from_disk_is_a_404(joined, settings) -> None:  # type: ignore[no-untyped-def]
    client, _html, urls = joined
    assert client.get(urls[0]).status_code == 200
    settings.MEDIA_ROOT = settings.MEDIA_ROOT / "elsewhere"  # every stored file is missing now
    missing = client.get(urls[0])
    assert missing.status_code == 404 and not _body(missing).startswith(b"\x89PNG")
