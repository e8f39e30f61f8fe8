"""DRF exception handler: project errors become a 4xx with their one-line message."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler

from annotation.errors import ArbiterError


def arbiter_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ArbiterError):
        return Response({"detail": str(exc)}, status=exc.status_code)
    return exception_handler(exc, context)
