"""Refuse oversized uploads from their Content-Length, before the body is read (SECURITY.md row 4),
and NUL characters in form fields (row 19); time rater requests (the ``arbiter_rater_request_queries``
and ``arbiter_rater_db_seconds`` metrics; ``Server-Timing`` only in a load benchmark's server)."""


from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse

from annotation.metrics import RATER_DB_SECONDS, RATER_REQUEST_QUERIES
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
    """400 for a NUL character in the URL path, a query parameter or a form field (SECURITY.md row 19).

    PostgreSQL text cannot hold NUL, so such a value would end as a 500 (``DataError``) wherever a
    view stores or filters by it. Uploaded files are not looked at (their bytes are binary); JSON
    bodies are refused by the API's parser (``annotation.api.parsers``).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path_info:
            # ``<str:token>`` segments (participant links, trials, public leaderboards) are looked up
            # in the database as they are.
            return _answer(request, "The URL path contains a NUL character.", 400)
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


# --- rater request timing: metrics; Server-Timing only when a benchmark asks --------------------

RATER_PATH_PREFIXES = ("/s/", "/t/", "/api/rater/")


class RequestTiming:
    """Database and render time of one request, reported in its ``Server-Timing`` header."""

    def __init__(self) -> None:
        self.db = 0.0
        self.queries = 0
        self.render = 0.0

    def db_wrapper(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.db += time.perf_counter() - start
            self.queries += 1

    @contextmanager
    def rendering(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.render += time.perf_counter() - start


@contextmanager
def render_timed(request: HttpRequest) -> Iterator[None]:
    """Count the enclosed template rendering as the request's render time (no-op elsewhere)."""
    timing: RequestTiming | None = getattr(request, "server_timing", None)
    if timing is None:
        yield
        return
    with timing.rendering():
        yield


def server_timing(*, db: float, queries: int, render: float, app: float) -> str:
    """The ``Server-Timing`` value of a rater response (durations given in seconds)."""
    return (
        f'db;dur={1000 * db:.2f};desc="{queries} queries", '
        f"render;dur={1000 * render:.2f}, app;dur={1000 * app:.2f}"
    )


class ServerTimingMiddleware:
    """Database queries, database time and render time of each rater request.

    Only rater URLs are measured (the hot path of a study: trial pages, images, answers and the
    rater API). The figures go to the ``arbiter_rater_request_queries`` and
    ``arbiter_rater_db_seconds`` histograms (``/metrics``: staff and allowed addresses). They are
    not sent to the rater: an answer that fills a hidden repeat or a serve-time trial takes a
    different number of queries than another, and a header a browser can read would tell a trial's
    role (SECURITY.md, docs/decisions/0067-no-diagnostics-in-rater-responses.md). A load benchmark's
    own server (``ARBITER_SERVER_TIMING=1``, refused by the production settings) adds
    ``Server-Timing: db;dur=…;desc="N queries", render;dur=…, app;dur=…`` (milliseconds inside the
    application, the session included) to read them per request.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(RATER_PATH_PREFIXES):
            return self.get_response(request)
        timing = RequestTiming()
        request.server_timing = timing  # type: ignore[attr-defined]
        start = time.perf_counter()
        with ExitStack() as stack:
            # Both aliases the rater's path may use (annotation/rater/db.py), counted once each.
            for alias in dict.fromkeys(("default", getattr(settings, "ARBITER_RATER_DATABASE", "default") or "default")):
                stack.enter_context(connections[alias].execute_wrapper(timing.db_wrapper))
            response = self.get_response(request)
        match = request.resolver_match
        view = match.view_name if match is not None else ""
        RATER_REQUEST_QUERIES.labels(view=view).observe(timing.queries)
        RATER_DB_SECONDS.labels(view=view).observe(timing.db)
        if settings.ARBITER_SERVER_TIMING:
            response["Server-Timing"] = server_timing(
                db=timing.db, queries=timing.queries, render=timing.render, app=time.perf_counter() - start
            )
        return response

    def process_template_response(self, request: HttpRequest, response: Any) -> Any:
        """DRF responses render after the view: time that as render too."""
        timing: RequestTiming | None = getattr(request, "server_timing", None)
        if timing is not None and hasattr(response, "add_post_render_callback"):
            start = time.perf_counter()

            def done(rendered: Any) -> None:
                timing.render += time.perf_counter() - start

            response.add_post_render_callback(done)
        return response
