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


class NulFieldMiddleware:
    """400 for a NUL character in a query parameter or a form field (SECURITY.md row 19).

    PostgreSQL text cannot hold NUL, so such a value would end as a 500 (``DataError``) wherever a
    view stores or filters by it. Uploaded files are not looked at (their bytes are binary); JSON
    bodies are refused by the API's parser (``annotation.api.parsers``).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        fields = [request.GET]
        content_type = request.META.get("CONTENT_TYPE", "")
        if request.method == "POST" and content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            fields.append(request.POST)
        for query in fields:
            for key, values in query.lists():
                if "\x00" in key or any("\x00" in value for value in values):
                    shown = key.replace("\x00", "\\0")[:60]
                    return _answer(request, f"Field '{shown}' contains a NUL character.", 400)
        return self.get_response(request)
