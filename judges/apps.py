from __future__ import annotations

from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from annotation.signals import candidates_replaced, candidates_replacing
        from judges.signals import refuse_while_calls_run, supersede_outputs

        candidates_replacing.connect(refuse_while_calls_run, dispatch_uid="judges.refuse_while_calls_run")
        candidates_replaced.connect(supersede_outputs, dispatch_uid="judges.supersede_outputs")
