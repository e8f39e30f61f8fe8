"""Django admin for the study data. The audit log is read-only; frozen data is not editable here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from annotation.models import (
    Assignment,
    AuditEvent,
    Axis,
    Block,
    Candidate,
    CandidateVersion,
    Comparison,
    Page,
    Rater,
    Study,
    System,
)


class AxisInline(admin.TabularInline):
    model = Axis
    extra = 0


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "title", "kind", "created_at"]
    search_fields = ["slug", "title"]
    filter_horizontal = ["researchers"]
    readonly_fields = ["link_token", "created_at", "created_by"]
    inlines = [AxisInline]


@admin.register(System)
class SystemAdmin(admin.ModelAdmin):
    list_display = ["external_id", "name", "study"]
    list_filter = ["study"]


@admin.register(Page)
class PageAdmin(admin.ModelAdmin):
    list_display = ["external_id", "study"]
    list_filter = ["study"]
    search_fields = ["external_id"]
    raw_id_fields = ["image", "neutralized_image"]


class CandidateVersionInline(admin.TabularInline):
    """Earlier and current versions (paper B.5): history, read-only (``import_study --update`` writes it)."""

    model = CandidateVersion
    extra = 0
    can_delete = False
    readonly_fields = ["number", "image", "neutralized_image", "rendered", "media", "date", "note", "activated_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ["page", "system", "rendered", "version"]
    list_filter = ["rendered", "system__study"]
    raw_id_fields = ["page", "system", "image", "neutralized_image"]
    readonly_fields = ["version"]
    inlines = [CandidateVersionInline]


@admin.register(Comparison)
class ComparisonAdmin(admin.ModelAdmin):
    list_display = ["external_id", "study", "page", "set"]
    list_filter = ["study", "set"]
    raw_id_fields = ["page", "candidate_a", "candidate_b"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # canonical identities never change (docs/protocol.md "Canonical answers")


@admin.register(Block)
class BlockAdmin(admin.ModelAdmin):
    list_display = ["name", "study", "target_raters", "seed"]
    list_filter = ["study"]


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ["external_id", "study", "source", "user", "created_at"]
    list_filter = ["study", "source"]
    search_fields = ["external_id"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["block", "slot", "rater", "state", "started_at", "finished_at"]
    list_filter = ["state", "block__study"]
    raw_id_fields = ["rater"]
    readonly_fields = ["token", "seed", "completion_code"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor_label", "action", "study", "target"]
    list_filter = ["action", "study"]
    search_fields = ["actor_label", "target"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
