"""View decorators shared by every app's researcher pages."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from annotation.roles import is_researcher


def researcher_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Logged-in researchers and admins only; anyone else logged in gets 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not is_researcher(request.user):
            raise PermissionDenied("researchers only")
        return view(request, *args, **kwargs)

    return wrapped
