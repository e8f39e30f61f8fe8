"""Editable study data (SPEC §2, §6: the instructions and the judge prompt template are study data)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotation.errors import ValidationFailed
from annotation.models import RATER_PAGE_DEFAULTS, Study, rater_page_options
from annotation.services.audit import audit_record

EDITABLE = (
    "title", "instructions_md", "judge_prompt", "neutralize_media", "accepting_participants", "completion_code",
    # Crowd settings (issue 17): the round trip to the crowd platform and breaks.
    "completion_url", "screened_out_url", "screened_out_code", "end_comment", "break_every",
    # The rater page (issue 30), kept in options["rater_page"].
    *RATER_PAGE_DEFAULTS,
)
TEXT_LIMITS = {
    "title": 200, "instructions_md": 50_000, "judge_prompt": 50_000, "completion_code": 64,
    "completion_url": 500, "screened_out_url": 500, "screened_out_code": 64,
}
URL_FIELDS = ("completion_url", "screened_out_url")
INTEGER_LIMITS = {"break_every": (0, 10_000)}
FIELD_WORDS = {
    "completion_url": "The completion URL", "screened_out_url": "The screened-out URL",
    "break_every": "Breaks every N trials",
}


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
            if name in URL_FIELDS and value.strip():
                _url_check(name, value.strip())
        elif name in INTEGER_LIMITS:
            low, high = INTEGER_LIMITS[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValidationFailed(f"{FIELD_WORDS[name]} is a whole number from {low} to {high:,}", field=name)
        elif not isinstance(value, bool):
            raise ValidationFailed("expected true or false", field=name)
    for name in URL_FIELDS:
        if name in changes:
            changes[name] = changes[name].strip()
    if "title" in changes and not changes["title"].strip():
        raise ValidationFailed("a study needs a title", field="title")
    page_now = rater_page_options(study)
    page_changed = {k: v for k, v in changes.items() if k in RATER_PAGE_DEFAULTS and page_now[k] != v}
    changed = {k: v for k, v in changes.items() if k not in RATER_PAGE_DEFAULTS and getattr(study, k) != v}
    if not changed and not page_changed:
        return study
    with transaction.atomic():
        for name, value in changed.items():
            setattr(study, name, value)
        fields = list(changed)
        if page_changed:
            study.options = {**(study.options or {}), "rater_page": {**page_now, **page_changed}}
            fields.append("options")
        study.save(update_fields=fields)
        changed.update(page_changed)
        audit_record(
            action="study.update",
            user=user,
            study=study,
            target=study.slug,
            fields=sorted(changed),
            **({"judge_prompt_chars": len(changed["judge_prompt"])} if "judge_prompt" in changed else {}),
        )
    return study


def _url_check(name: str, value: str) -> None:
    """A crowd-platform URL: absolute http(s), as the participant's browser will be sent there."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationFailed(
            f"{FIELD_WORDS[name]} must start with https:// (or http://), e.g. "
            "https://app.prolific.com/submissions/complete?cc=CODE",
            field=name,
        )
