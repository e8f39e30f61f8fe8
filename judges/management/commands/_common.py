"""Helpers shared by the judges commands."""

from __future__ import annotations

from annotation.errors import NotFound
from annotation.models import Study


def study_by_slug(slug: str) -> Study:
    try:
        return Study.objects.get(slug=slug)
    except Study.DoesNotExist:
        raise NotFound(f"no study with slug {slug!r}") from None
