from __future__ import annotations

from django.apps import AppConfig


class KindReportsConfig(AppConfig):
    """The docs/study-kinds.md "The kind report" reports of the pairwise, checklist and rating kinds (no
    models of its own)."""

    name = "kind_reports"
    default_auto_field = "django.db.models.BigAutoField"
