"""A stateless pass for the current trial's images: no database or session read per image.

When a trial is shown, its response carries an ``HttpOnly`` cookie scoped to ``/t/`` holding
the trial token, its slots' stored (content-hash) file names and an expiry, encrypted and
authenticated with AES-GCM under a key derived from ``SECRET_KEY``, with the session key as
associated data. An image request (``/t/<trial token>/<slot>.png``: URLs are unchanged, opaque
and differ between a repeat and its original) presenting the cookie of the same session and the
same trial is served from the file directly. Anything else (no cookie, another session, another
trial, an expired or altered cookie) falls back to the database check, which refuses strangers.

The rater cannot read the file names (they would tell a hidden repeat from its original), nor
forge or move the cookie to another session, because it does not decrypt without the session key.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from collections.abc import Mapping
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.crypto import salted_hmac

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


def grant(request: HttpRequest, response: HttpResponse, *, trial_token: str, files: Mapping[str, str]) -> None:
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
