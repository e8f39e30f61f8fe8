"""A request that failed because the database was out of reach answers 503, not 500.

When PgBouncer or PostgreSQL restarts, or a node loses its network for a moment, a request in
flight fails with psycopg's ``OperationalError`` / ``InterfaceError`` (through Django's). Django
answers that as any bug: 500. That is not a bug of the request, and the same request a second
later will succeed, so the answer is 503 with ``Retry-After: 1``: the load balancer and the trial
page (``static/annotation/trial.js``, which sends a lost answer again with its idempotency key)
treat it as "try again", and a monitoring 5xx-rate split by code tells the two apart.

Django converts every middleware's exception into a response before the outer ones see it, so
the cause is noted by a ``got_request_exception`` receiver and the outermost middleware
(``DatabaseUnavailableMiddleware``, first in ``MIDDLEWARE``) rewrites that 500.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

MESSAGE = "The database is unreachable for a moment; please try again.\n"


def _note(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    if request is not None and isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        request.arbiter_database_unavailable = True  # type: ignore[attr-defined]


got_request_exception.connect(_note, dispatch_uid="config.unavailable.note")


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code == 500 and getattr(request, "arbiter_database_unavailable", False):
            response = HttpResponse(MESSAGE, status=503, content_type="text/plain; charset=utf-8")
            response["Retry-After"] = "1"
            response["Cache-Control"] = "no-store"
        return response
