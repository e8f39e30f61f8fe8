from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The synthetic demo study (``make_demo_study``). Sits on top of every other app."""

    name = "demo"
    default_auto_field = "django.db.models.BigAutoField"
