"""Admin registry of judges (docs/protocol.md "Judges and calibration": endpoints are admin-configured only)
and their outputs."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from annotation.errors import ValidationFailed
from judges.models import Judge, JudgeOutput


class JudgeAdminForm(forms.ModelForm):
    class Meta:
        model = Judge
        fields = [
            "name", "family", "provider", "model", "base_url", "api_key_env", "max_image_edge", "max_image_bytes",
            "max_request_bytes", "rate_per_second", "concurrency", "timeout_seconds", "max_invalid_retries",
            "max_transport_retries", "max_attempts", "temperature", "max_tokens", "api_version", "token_param",
            "send_temperature", "seed", "reasoning_effort", "structured_output", "price_input_per_mtok",
            "price_output_per_mtok", "batch_discount", "adapt_parameters",
        ]
        help_texts = {
            "api_key_env": "Name of the environment variable that holds the key (read at call time, never stored).",
            "base_url": "OpenAI-compatible: the base including /v1. Anthropic: the host (…/v1/messages is appended).",
        }

    def clean(self) -> dict[str, Any]:
        # The provider adapters load with the first form checked, not with every process's admin.
        from judges.services.judges import CALLABLE_PROVIDERS, judge_validate_fields

        data = super().clean() or {}
        if data.get("provider") in CALLABLE_PROVIDERS:
            try:
                checked = judge_validate_fields(
                    {k: data.get(k) for k in ("provider", "model", "base_url", "api_key_env", "rate_per_second")}
                )
            except ValidationFailed as exc:
                field = exc.field if exc.field in self.fields else "__all__"
                raise forms.ValidationError({field: str(exc)}) from None
            data["base_url"] = checked["base_url"]
        return data


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    form = JudgeAdminForm
    list_display = ("name", "family", "provider", "model", "base_url", "concurrency", "rate_per_second", "timeout_seconds")
    list_filter = ("provider", "family")
    search_fields = ("name", "model", "family")


@admin.register(JudgeOutput)
class JudgeOutputAdmin(admin.ModelAdmin):
    list_display = ("judge", "comparison", "order", "repeat", "status", "winner", "confidence", "attempts", "finished_at")
    list_filter = ("status", "order", "judge")
    search_fields = ("comparison__external_id", "judge__name")
    list_select_related = ("judge", "comparison")
    readonly_fields = [f.name for f in JudgeOutput._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
