"""Login with throttling of failed attempts (researcher and admin accounts; SECURITY.md row 18).

Every attempt is counted *before* its password is checked, with one atomic increment per counter
(``annotation.services.login_counters``: the shared cache, or the database when no shared cache is
configured, so every web process and node sees the same counts), so concurrent guesses cannot slip
past the limit between a check and an update:

- per account and client address: ``ARBITER_LOGIN_MAX_FAILURES`` (5) attempts per window; the
  address locked out is locked out of *that* account only, so people behind one proxy or NAT keep
  logging into their own accounts;
- per account, over all addresses: ``ARBITER_LOGIN_MAX_FAILURES_PER_ACCOUNT`` (20), against a
  guesser spreading over many addresses. Attempts refused by the first counter do not count here,
  so one address alone can never lock an account.

A successful login resets its (account, address) counter and takes its own attempt back from the
account's. Past a limit the attempt answers 429 without checking the password, on the login page
and on ``POST /api/auth/token/`` alike. The client address comes from
``annotation.client_address`` (``ARBITER_TRUSTED_PROXIES`` / ``ARBITER_PROXY_HOPS``).
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.exceptions import NON_FIELD_ERRORS
from django.forms.utils import ErrorDict
from django.http import HttpRequest, HttpResponse
from rest_framework import status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.api.parsers import BoundedJSONParser
from annotation.client_address import client_address
from annotation.services.login_counters import counter_add, counter_delete, counter_take_back


@dataclass(frozen=True)
class LoginAttempt:
    """The counters one admitted attempt was counted in."""

    pair_key: str
    account_key: str


def _window() -> int:
    return int(getattr(settings, "ARBITER_LOGIN_WINDOW_SECONDS", 15 * 60))


def _count(key: str) -> int:
    """Atomically add one to ``key`` (created for one window) and return the new count."""
    return counter_add(key, _window())


def login_attempt_start(request: HttpRequest, username: str) -> LoginAttempt | None:
    """Count an attempt before its password is checked; ``None`` when it is over a limit."""
    # Hashed: the username and the address are client input of any length; keys stay short and safe.
    # NFKC as the login form's UsernameField does before the password check: 'ｒｉｔａ' (fullwidth) or
    # '𝐫ita' test rita's password, so they must count as her (else each variant is a fresh counter).
    account = hashlib.sha256(unicodedata.normalize("NFKC", username).strip().casefold().encode()).hexdigest()
    address = hashlib.sha256(client_address(request).encode()).hexdigest()[:32]
    attempt = LoginAttempt(pair_key=f"login-try:pair:{account}:{address}", account_key=f"login-try:user:{account}")
    if _count(attempt.pair_key) > int(getattr(settings, "ARBITER_LOGIN_MAX_FAILURES", 5)):
        return None
    if _count(attempt.account_key) > int(getattr(settings, "ARBITER_LOGIN_MAX_FAILURES_PER_ACCOUNT", 20)):
        return None
    return attempt


def login_attempt_succeeded(attempt: LoginAttempt) -> None:
    """A right password: its pair starts again, and it does not count against the account."""
    counter_delete(attempt.pair_key)
    counter_take_back(attempt.account_key)


TOO_MANY = "Too many failed login attempts. Please wait a few minutes and try again."


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")
        attempt = login_attempt_start(request, username)
        if attempt is None:
            # Never cleaned: cleaning the form (``form.errors``) would check the password.
            form = self.get_form_class()(request, initial={"username": username[:150]})
            errors = ErrorDict({NON_FIELD_ERRORS: form.error_class([TOO_MANY], error_class="nonfield")})
            form._errors = errors  # type: ignore[attr-defined]
            response = self.render_to_response(self.get_context_data(form=form, throttled=True))
            response.status_code = 429
            return response
        self._password_checked_ok = False
        response = super().post(request, *args, **kwargs)
        # Not ``request.user.is_authenticated``: a wrong password posted from a logged-in session
        # leaves that session's user in place, which would reset the counters of every guess.
        if self._password_checked_ok:
            login_attempt_succeeded(attempt)
        return response

    def form_valid(self, form: Any) -> HttpResponse:
        self._password_checked_ok = True
        return super().form_valid(form)


class ThrottledObtainAuthToken(ObtainAuthToken):
    """``POST /api/auth/token/`` with the same failure throttling as the login page."""

    # ObtainAuthToken names DRF's unbounded JSONParser itself; use the project's (SECURITY.md row 19).
    parser_classes = (FormParser, MultiPartParser, BoundedJSONParser)

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        attempt = login_attempt_start(request._request, str(data.get("username", "")))
        if attempt is None:
            return Response({"detail": TOO_MANY}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            return Response(serializer.errors, status=status.HTTP_400_BAD_REQUEST)
        login_attempt_succeeded(attempt)
        # What ObtainAuthToken.post does, without validating (checking the password) a second time.
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})
