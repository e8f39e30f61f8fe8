"""Editable study data (SPEC §2, §6: the instructions and the judge prompt template are study data)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotation.errors import ValidationFailed
from annotation.models import Study
from annotation.services.audit import audit_record

EDITABLE = ("title", "instructions_md", "judge_prompt", "neutralize_media", "accepting_participants", "completion_code")
TEXT_LIMITS = {"title": 200, "instructions_md": 50_000, "judge_prompt": 50_000, "completion_code": 64}


def study_settings_update(*, study: Study, user: Any = None, **changes: Any) -> Study:
    """Change a study's editable fields; every change is recorded in the audit log.

    An empty ``judge_prompt`` means the project's default prompt. Judge outputs already stored
    keep the prompt they were made with; the audit log says when the prompt changed.
    """
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ValidationFailed(f"not editable: {', '.join(unknown)} (editable: {', '.join(EDITABLE)})")
    for name, value in changes.items():
        if name in TEXT_LIMITS:
            if not isinstance(value, str):
                raise ValidationFailed("expected text", field=name)
            if len(value) > TEXT_LIMITS[name]:
                raise ValidationFailed(f"at most {TEXT_LIMITS[name]:,} characters", field=name)
        elif not isinstance(value, bool):
            raise ValidationFailed("expected true or false", field=name)
    if "title" in changes and not changes["title"].strip():
        raise ValidationFailed("a study needs a title", field="title")
    changed = {k: v for k, v in changes.items() if getattr(study, k) != v}
    if not changed:
        return study
    with transaction.atomic():
        for name, value in changed.items():
            setattr(study, name, value)
        study.save(update_fields=list(changed))
        audit_record(
            action="study.update",
            user=user,
            study=study,
            target=study.slug,
            fields=sorted(changed),
            **({"judge_prompt_chars": len(changed["judge_prompt"])} if "judge_prompt" in changed else {}),
        )
    return study
