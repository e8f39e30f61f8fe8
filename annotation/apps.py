from __future__ import annotations

from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from annotation.selectors.compiled import generic_plans

        connection_created.connect(generic_plans, dispatch_uid="annotation.generic_plans")
