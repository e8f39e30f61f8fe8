"""400 answers that say why: body too large, too many files or fields (SECURITY.md row 4)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.html import escape
from django.views import defaults


def _answer(request: HttpRequest, message: str, status: int) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    body = (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Request refused</title></head>"
        f"<body><h1>Request refused</h1><p>{escape(message)}</p></body></html>"
    )
    return HttpResponse(body, status=status, content_type="text/html; charset=utf-8")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        return _answer(
            request,
            "The request body is too large: forms and JSON are limited to "
            f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes; upload bundles as a file.",
            413,
        )
    if isinstance(exception, TooManyFilesSent):
        return _answer(request, f"Too many files in one request (the limit is {settings.DATA_UPLOAD_MAX_NUMBER_FILES}).", 400)
    if isinstance(exception, TooManyFieldsSent):
        return _answer(
            request, f"Too many fields in one request (the limit is {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS}).", 400
        )
    return defaults.bad_request(request, exception)  # type: ignore[arg-type]
