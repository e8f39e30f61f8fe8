"""A trial's images: the image pass that serves them with no query, and the one image view.

The pass is stateless: no database or session read per image.

When a trial is shown, its response carries an ``HttpOnly`` cookie scoped to ``/t/`` holding
the trial token, its slots' stored (content-hash) file names and an expiry, encrypted and
authenticated with AES-GCM under a key derived from ``SECRET_KEY``, with the session key as
associated data. An image request (``/t/<trial token>/<slot>.png``: URLs are unchanged, opaque
and differ between a repeat and its original) presenting the cookie of the same session and the
same trial is served from the file directly. Anything else (no cookie, another session, another
trial, an expired or altered cookie) falls back to the database check, which refuses strangers.

The rater cannot read the file names (they would tell a hidden repeat from its original), nor
forge or move the cookie to another session, because it does not decrypt without the session key.

Image requests go through Django's middleware like every other request: the security headers,
the request log and the timing metrics are Django's. The session is never loaded on the
pass's path (the session key is read from its cookie), so a granted image costs no query.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import quote

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.crypto import salted_hmac
from django.views.decorators.http import require_GET

from annotation.images import stored_image_path
from annotation.media import MEDIA_UNAVAILABLE_TEXT, MediaUnavailable, media_is_local, read_media
from annotation.models import Rater
from annotation.rater.forms import SESSION_RATERS
from annotation.rater.screens import Screen
from annotation.services.answers import trial_image

COOKIE_NAME = "arbiter_trial_images"
COOKIE_PATH = "/t/"
LIFETIME_SECONDS = 6 * 3600
NONCE_BYTES = 12


@lru_cache(maxsize=4)
def _cipher(secret: str) -> AESGCM:
    key = salted_hmac("arbiter.image-cookie", "aes-256-gcm", secret=secret, algorithm="sha256").digest()
    return AESGCM(key)


def _session_key(request: HttpRequest) -> str:
    """The session key the browser presents (read from the cookie: loading the session costs a query)."""
    return request.COOKIES.get(settings.SESSION_COOKIE_NAME, "")


def cookie_value(*, session_key: str, trial_token: str, files: Mapping[str, str], now: float | None = None) -> str:
    payload = json.dumps(
        {"t": trial_token, "f": dict(files), "e": int((now or time.time()) + LIFETIME_SECONDS)},
        separators=(",", ":"),
    ).encode()
    nonce = os.urandom(NONCE_BYTES)
    sealed = _cipher(settings.SECRET_KEY).encrypt(nonce, payload, session_key.encode())
    return base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")


def cookie_files(*, value: str, session_key: str, trial_token: str, now: float | None = None) -> dict[str, str] | None:
    """The slot → file map the cookie grants for this trial and session, or None."""
    if not value or not session_key:
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        if len(raw) <= NONCE_BYTES:
            return None
        payload = json.loads(
            _cipher(settings.SECRET_KEY).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], session_key.encode())
        )
    except (InvalidTag, ValueError, binascii.Error):
        return None
    if payload.get("t") != trial_token or int(payload.get("e", 0)) < (now or time.time()):
        return None
    files = payload.get("f")
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else None


def grant(request: HttpRequest, response: HttpResponseBase, *, trial_token: str, files: Mapping[str, str]) -> None:
    """Attach the image pass of the trial shown in ``response`` (only for a saved session)."""
    session_key = _session_key(request)
    if not session_key or not files:
        return
    response.set_cookie(
        COOKIE_NAME, cookie_value(session_key=session_key, trial_token=trial_token, files=files),
        max_age=LIFETIME_SECONDS, path=COOKIE_PATH, secure=settings.SESSION_COOKIE_SECURE, httponly=True,
        samesite="Lax",
    )


def granted_file(request: HttpRequest, *, trial_token: str, slot: str) -> str | None:
    """The stored file of ``slot`` if the request's image pass grants it; None: check the database."""
    files = cookie_files(
        value=request.COOKIES.get(COOKIE_NAME, ""), session_key=_session_key(request), trial_token=trial_token
    )
    if files is None:
        return None
    return files.get(slot, "")


def image_pass_grant(request: HttpRequest, response: HttpResponseBase, screen: Screen) -> None:
    """Give the image pass of the trial a Screen shows (its files were read with the trial)."""
    images = screen.images
    if images is not None:
        grant(request, response, trial_token=images.trial_token, files=images.files)


@require_GET
def trial_image_view(request: HttpRequest, trial_token: str, slot: str) -> HttpResponseBase:
    """An image of a trial the session owns: no file name, no metadata, private caching only.

    The trial's image pass (set with the trial) answers without a database or session read;
    without one, the trial row and the session decide.
    """
    file = granted_file(request, trial_token=trial_token, slot=slot)
    if file is None:
        found = trial_image(trial_token=trial_token, slot=slot)
        if found is None or not found.live or found.file is None or found.rater_id is None:
            raise Http404
        if found.rater_id != _session_rater_id(request, found.study_id):
            raise Http404
        file = found.file
    if not file:
        raise Http404
    response: HttpResponseBase
    accel = settings.ARBITER_IMAGE_ACCEL_REDIRECT
    if accel:  # behind nginx: it sends the file from an internal location (README "Running at scale")
        response = HttpResponse(content_type="image/png")
        response["X-Accel-Redirect"] = accel.rstrip("/") + "/" + quote(file)
    elif media_is_local():
        try:
            handle = stored_image_path(file).open("rb")
        except OSError:
            raise Http404 from None
        response = FileResponse(handle, content_type="image/png")
        if "Content-Disposition" in response:
            del response["Content-Disposition"]
    else:  # the bucket: read whole through the storage, so an outage is a 503 and never half an image
        try:
            response = HttpResponse(read_media(file, rater=True), content_type="image/png")
        except FileNotFoundError:
            raise Http404 from None
        except MediaUnavailable:
            return media_unavailable_response()
    response["Cache-Control"] = "private, max-age=86400"
    return response


def _session_rater_id(request: HttpRequest, study_id: int) -> int | None:
    """The rater the session speaks for in a study, without a pass: a link participant or an account."""
    rater_id = request.session.get(SESSION_RATERS, {}).get(str(study_id))
    if rater_id is not None:
        return int(rater_id)
    user = request.user
    if user.is_authenticated:
        return Rater.objects.filter(study_id=study_id, user=user).values_list("pk", flat=True).order_by().first()
    return None


def media_unavailable_response() -> HttpResponse:
    """The bucket cannot be reached: a 503 the page retries, never a 500 (it clears by itself)."""
    response = HttpResponse(MEDIA_UNAVAILABLE_TEXT, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = "5"
    response["Cache-Control"] = "no-store"
    return response
