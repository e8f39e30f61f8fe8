"""Admin: frozen coefficient sets and stored calibration reports are shown read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from calibration.models import CalibrationReport, CoefficientSet


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CoefficientSet)
class CoefficientSetAdmin(ReadOnlyAdmin):
    """Frozen sets cannot be changed or deleted (the model refuses); create them with ``calibrate``."""

    list_display = ("name", "study", "source", "frozen_by_label", "created_at")
    list_filter = ("source",)
    search_fields = ("name", "study__slug")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CalibrationReport)
class CalibrationReportAdmin(ReadOnlyAdmin):
    list_display = ("study", "created_at", "resamples", "seed", "created_by_label")
    list_filter = ("study",)
