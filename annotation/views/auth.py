"""Login with throttling of failed attempts (researcher and admin accounts; SECURITY.md).

Failures are counted per username and per client address in the cache; past the limit a login
is refused with 429 for the rest of the window, even with the right password.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from rest_framework import status
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.request import Request
from rest_framework.response import Response


def _keys(request: HttpRequest, username: str) -> list[str]:
    address = request.META.get("REMOTE_ADDR", "")
    # Hashed: the username is client input of any length; cache keys must stay short and safe.
    user_key = hashlib.sha256(username.strip().lower().encode()).hexdigest()
    return [f"login-fail:user:{user_key}", f"login-fail:addr:{address}"]


def login_blocked(request: HttpRequest, username: str) -> bool:
    limit = int(getattr(settings, "ARBITER_LOGIN_MAX_FAILURES", 5))
    return any((cache.get(key) or 0) >= limit for key in _keys(request, username))


def login_failed(request: HttpRequest, username: str) -> None:
    window = int(getattr(settings, "ARBITER_LOGIN_WINDOW_SECONDS", 15 * 60))
    for key in _keys(request, username):
        cache.add(key, 0, window)
        try:
            cache.incr(key)
        except ValueError:
            cache.set(key, 1, window)


def login_succeeded(request: HttpRequest, username: str) -> None:
    cache.delete(_keys(request, username)[0])


TOO_MANY = "Too many failed login attempts. Please wait a few minutes and try again."


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        if login_blocked(request, username):
            form = self.get_form()
            form.add_error(None, TOO_MANY)
            response = self.render_to_response(self.get_context_data(form=form, throttled=True))
            response.status_code = 429
            return response
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            login_succeeded(request, username)
        else:
            login_failed(request, username)
        return response


class ThrottledObtainAuthToken(ObtainAuthToken):
    """``POST /api/auth/token/`` with the same failure throttling as the login page."""

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        username = str(data.get("username", ""))
        if login_blocked(request._request, username):
            return Response({"detail": TOO_MANY}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            login_failed(request._request, username)
            return Response(serializer.errors, status=status.HTTP_400_BAD_REQUEST)
        login_succeeded(request._request, username)
        return super().post(request, *args, **kwargs)
