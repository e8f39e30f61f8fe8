"""Images granted by the trial's image pass, answered before Django's request handling.

Three of every four rater requests are a trial's images (docs/benchmarks.md, "rater hot path").
With the pass (``annotation.image_cookie``) such a request needs no database, session or URL
lookup, yet going through Django's handler, its middleware stack and ``FileResponse`` cost
0.85 ms of CPU per image against 0.38 ms answered here. ``ImagePassApplication`` wraps the WSGI
application: a ``GET /t/<trial token>/<slot>.png`` whose pass decrypts for the request's session
and trial is answered with the file (or the ``X-Accel-Redirect`` behind nginx); everything else,
a request without a valid pass included, goes to Django unchanged, which checks the trial row and
the session and refuses strangers with its 404.

The response carries what Django's image view and middleware send: the same security headers
(computed once per scheme by Django's own ``SecurityMiddleware``, ``XFrameOptionsMiddleware``
and ``ContentSecurityPolicyMiddleware``, those present in ``MIDDLEWARE``), ``Cache-Control:
private``, no ``Content-Disposition`` (no file name) and ``Server-Timing``. A request Django
would refuse before any view (a host outside ``ALLOWED_HOSTS``, plain HTTP under
``SECURE_SSL_REDIRECT``) is left to Django.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote
from wsgiref.util import FileWrapper

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from annotation import image_cookie
from annotation.images import stored_image_path
from annotation.media import MEDIA_UNAVAILABLE_TEXT, MediaUnavailable, media_is_local, read_media
from annotation.metrics import RATER_REQUEST_SECONDS, RATER_RESPONSES, log_request, request_id_of
from annotation.middleware import server_timing

IMAGE_PATH_RE = re.compile(r"/t/(?P<token>[A-Za-z0-9_-]+)/(?P<slot>[a-z]+)\.png")
CACHE_CONTROL = "private, max-age=86400"
# Middleware whose response phase adds headers to every response, an image's included.
HEADER_MIDDLEWARE = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
)

# The image view's series, answered here (Django's own answers are timed by config/metrics.py).
IMAGE_PASS_SECONDS = RATER_REQUEST_SECONDS.labels(view="rater:image")
IMAGE_PASS_RESPONSES = RATER_RESPONSES.labels(view="rater:image", status="200")

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _no_view(request: HttpRequest) -> HttpResponse:  # the header middleware's get_response, never called
    raise AssertionError("header middleware only")


class ImagePassApplication:
    """The WSGI application ``application``, with pass-granted images answered first."""

    def __init__(self, application: WSGIApp) -> None:
        self.application = application
        self._headers: dict[bool, list[tuple[str, str]]] = {}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        start = time.perf_counter()
        match = IMAGE_PATH_RE.fullmatch(environ.get("PATH_INFO", ""))
        if match is None or environ.get("REQUEST_METHOD") != "GET" or "HTTP_COOKIE" not in environ:
            return self.application(environ, start_response)
        request = WSGIRequest(environ)
        file = image_cookie.granted_file(request, trial_token=match["token"], slot=match["slot"])
        if not file:
            return self.application(environ, start_response)
        try:
            request.get_host()
        except DisallowedHost:
            return self.application(environ, start_response)  # Django answers 400
        secure = request.is_secure()
        if settings.SECURE_SSL_REDIRECT and not secure:
            return self.application(environ, start_response)  # Django redirects
        headers = [("Content-Type", "image/png"), ("Cache-Control", CACHE_CONTROL), *self._security_headers(request, secure)]
        accel = settings.ARBITER_IMAGE_ACCEL_REDIRECT
        if accel:  # behind nginx: it sends the file from its internal location
            body: Iterable[bytes] = [b""]
            headers += [("X-Accel-Redirect", accel.rstrip("/") + "/" + quote(file)), ("Content-Length", "0")]
        elif media_is_local():
            try:
                handle = stored_image_path(file).open("rb")
            except OSError:
                return self.application(environ, start_response)  # Django answers 404
            headers.append(("Content-Length", str(os.fstat(handle.fileno()).st_size)))
            body = environ.get("wsgi.file_wrapper", FileWrapper)(handle, 64 * 1024)  # gunicorn: sendfile
        else:  # the bucket (annotation/media.py): one GET, read whole, so an outage is a 503, not half an image
            try:
                data = read_media(file, rater=True)
            except FileNotFoundError:
                return self.application(environ, start_response)  # Django answers 404
            except MediaUnavailable:
                unavailable = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store"),
                               ("Retry-After", "5"), *self._security_headers(request, secure)]
                text = MEDIA_UNAVAILABLE_TEXT.encode()
                start_response("503 Service Unavailable", [*unavailable, ("Content-Length", str(len(text)))])
                return [text]
            headers.append(("Content-Length", str(len(data))))
            body = [data]
        elapsed = time.perf_counter() - start
        headers.append(("Server-Timing", server_timing(db=0.0, queries=0, render=0.0, app=elapsed)))
        IMAGE_PASS_SECONDS.observe(elapsed)
        IMAGE_PASS_RESPONSES.inc()
        if settings.ARBITER_LOG_FORMAT == "json":  # the same request line as Django's (config/metrics.py)
            request_id = request_id_of(environ.get("HTTP_X_REQUEST_ID"))
            headers.append(("X-Request-ID", request_id))
            log_request(request_id=request_id, method="GET", path=environ.get("PATH_INFO", ""), status=200,
                        seconds=elapsed, view="rater:image")
        start_response("200 OK", headers)
        return body

    def _security_headers(self, request: HttpRequest, secure: bool) -> list[tuple[str, str]]:
        """The headers Django's header middleware adds to an image response (per scheme, computed once)."""
        found = self._headers.get(secure)
        if found is None:
            response = HttpResponse(content_type="image/png")
            for path in reversed([m for m in settings.MIDDLEWARE if m in HEADER_MIDDLEWARE]):
                import_string(path)(_no_view).process_response(request, response)
            found = self._headers[secure] = [(k, v) for k, v in response.items() if k != "Content-Type"]
        return found

