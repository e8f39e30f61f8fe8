"""Refuse oversized uploads from their Content-Length, before the body is read (SECURITY.md row 4)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from annotation.views.errors import _answer

# Room for the multipart envelope around a file of exactly the limit.
MULTIPART_OVERHEAD = 64 * 1024


class UploadSizeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = int(settings.ARBITER_MAX_UPLOAD_BYTES)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _answer(request, "The Content-Length header is not a number.", 400)
        if length > limit + MULTIPART_OVERHEAD:
            return _answer(request, f"The upload is {length:,} bytes, over the {limit:,}-byte limit.", 413)
        return self.get_response(request)
