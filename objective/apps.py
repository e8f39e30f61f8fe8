from __future__ import annotations

from django.apps import AppConfig


class ObjectiveConfig(AppConfig):
    """docs/protocol.md "The objective protocol": a page's blocks against its ground truth (table
    fidelity, page text error, layout consistency) and the ``score_pages`` command. No models: the
    pure modules ``objective.blocks``, ``objective.score`` and ``objective.aggregate`` import no
    Django, so a study's services and the command call the same code."""

    name = "objective"
    default_auto_field = "django.db.models.BigAutoField"
