from __future__ import annotations

from django.apps import AppConfig


class RankingConfig(AppConfig):
    name = "ranking"
    default_auto_field = "django.db.models.BigAutoField"
