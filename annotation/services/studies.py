"""Editable study data (docs/protocol.md "The study model", "Judges and calibration": the instructions and the
judge prompt template are study data)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from annotation.errors import ValidationFailed
from annotation.models import RATER_PAGE_DEFAULTS, Study, rater_page_options
from annotation.services.audit import audit_record
from annotation.services.crowd_settings import CROWD_KEYS, CROWD_SETTINGS, crowd_settings_clean

# Crowd settings (issue 17; issue 29: the page, this service's API caller and the bundle share
# one validator, annotation.services.crowd_settings); the rater page (issue 30), kept in
# options["rater_page"].
EDITABLE = ("title", "instructions_md", "judge_prompt", "neutralize_media", *CROWD_SETTINGS, *RATER_PAGE_DEFAULTS)
TEXT_LIMITS = {"title": 200, "instructions_md": 50_000, "judge_prompt": 50_000}


def study_settings_update(*, study: Study, user: Any = None, **changes: Any) -> Study:
    """Change a study's editable fields; every change is recorded in the audit log.

    An empty ``judge_prompt`` means the project's default prompt. Judge outputs already stored
    keep the prompt they were made with; the audit log says when the prompt changed. The crowd
    settings are checked by :func:`crowd_settings_clean`, as the bundle's ``crowd`` object is.
    """
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ValidationFailed(f"not editable: {', '.join(unknown)} (editable: {', '.join(EDITABLE)})")
    for name, value in changes.items():
        if name in CROWD_KEYS:
            continue
        if name in TEXT_LIMITS:
            if not isinstance(value, str):
                raise ValidationFailed("expected text", field=name)
            if len(value) > TEXT_LIMITS[name]:
                raise ValidationFailed(f"at most {TEXT_LIMITS[name]:,} characters", field=name)
        elif not isinstance(value, bool):
            raise ValidationFailed("expected true or false", field=name)
    changes.update(crowd_settings_clean({k: v for k, v in changes.items() if k in CROWD_KEYS}))
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



def study_failure_rule_update(*, study: Study, user: Any = None, rule: str) -> bool:
    """Change how failed renders count in the study's leaderboards (docs/protocol.md "Failed renders in
    the leaderboard"): ``ambihtmlbench`` or ``aescode``, kept as the ``render`` option's
    ``failure_rule``; recorded in the audit log. Leaderboards computed before keep the rule they
    used. Whether it changed."""
    from annotation.errors import ArbiterError
    from annotation.render.settings import FAILURE_RULE_KEY, failure_rule_of, parse_failure_rule

    try:
        chosen = parse_failure_rule(rule, where="failure_rule")
    except ArbiterError as exc:
        raise ValidationFailed(str(exc)) from None
    if chosen == failure_rule_of(study.options):
        return False
    with transaction.atomic():
        render = (study.options or {}).get("render")
        study.options = {**(study.options or {}), "render": {**(render if isinstance(render, dict) else {}), FAILURE_RULE_KEY: chosen}}
        study.save(update_fields=["options"])
        audit_record(action="study.update", user=user, study=study, target=study.slug, fields=["render.failure_rule"],
                     failure_rule=chosen)
    return True
