"""Django admin for leaderboards: read-only records (computed by tasks, published from the study page)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from ranking.models import Leaderboard


@admin.register(Leaderboard)
class LeaderboardAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "study",
        "coefficient_set",
        "resamples",
        "seed",
        "status",
        "published",
        "created_at",
    ]
    list_filter = ["status", "published"]
    search_fields = ["study__slug", "coefficient_set__name"]
    exclude = ["inputs"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
