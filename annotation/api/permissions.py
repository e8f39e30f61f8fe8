"""DRF permissions shared by every app's API (roles of docs/protocol.md "Who does what", annotation.roles)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from annotation.models import Study
from annotation.roles import is_researcher
from annotation.selectors.studies import study_get_for_user


class IsResearcher(BasePermission):
    """Researchers and admins; raters and study-link participants are refused."""

    message = "Only researchers and admins may do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and is_researcher(request.user))


def study_for_request(request: Request, slug: str) -> Study:
    """The API's use of ``study_get_for_user``: the study named by ``slug`` if the caller may manage it,
    else 404 (no existence leak)."""
    return study_get_for_user(user=request.user, slug=slug)
