"""Roles (docs/protocol.md "Who does what") as Django groups, and the scoping rules every queryset follows.

- admin: staff users or members of the "admin" group; see every study.
- researcher: members of the "researcher" group; see the studies they are listed on.
- rater: members of the "rater" group (accounts) or study-link participants (session only);
  never see systems, candidates or other raters' data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import Group
from django.db.models import QuerySet

if TYPE_CHECKING:
    from annotation.models import Study

ADMIN = "admin"
RESEARCHER = "researcher"
RATER = "rater"
ROLES = (ADMIN, RESEARCHER, RATER)


def ensure_groups() -> None:
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def _groups(user: Any) -> set[str]:
    if not user.is_authenticated:
        return set()
    cached = getattr(user, "_arbiter_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._arbiter_groups = cached
    return cached


def is_admin(user: Any) -> bool:
    return bool(user.is_authenticated and (user.is_superuser or user.is_staff or ADMIN in _groups(user)))


def is_researcher(user: Any) -> bool:
    return is_admin(user) or RESEARCHER in _groups(user)


def studies_for(user: Any) -> QuerySet[Study]:
    """The studies a user may manage: all for admins, their own for researchers, none otherwise."""
    from annotation.models import Study

    if is_admin(user):
        return Study.objects.all()
    if is_researcher(user):
        return Study.objects.filter(researchers=user)
    return Study.objects.none()
