"""Exclusion rules of a study (docs/study-kinds.md "Hygiene rules" questionnaire hygiene; issue 17 for
``pairwise_reference``).

The stored settings (``Study.options["exclusion_rules"]``), their checks, the settings form and the
``--rules`` option of the report commands. Shared by the kind reports and the reference kind's
agreement and calibration, which is why it is its own module (no import cycle between them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import transaction

from annotation.errors import ValidationFailed
from annotation.models import Study
from annotation.safe_json import JSONRefused, loads_bounded
from annotation.services.audit import audit_record

if TYPE_CHECKING:
    from stats.hygiene import HygieneRules

# Counts, not rules: never null (the honest error rate of the gold test is a rate, not a rule).
_COUNTS = ("straightline_min_trials", "position_min_trials", "gold_honest_error")
#: The gold rule's setting before issue 39 (exclude above a share of failed gold trials), still
#: read from stored settings: ``null`` (rule off) switches the binomial test off; a number is
#: superseded by the test (docs/protocol.md "Gold trials: the exclusion test") and dropped.
_LEGACY_GOLD_SHARE = "max_gold_failure_share"
_INTEGER_RULES = {
    "comprehension_max_attempts",
    "max_attention_failures",
    "straightline_min_trials",
    "straightline_run",
    "position_min_trials",
}


def _rule_names() -> list[str]:
    """The settings' names: the fields of ``HygieneRules``, in their order."""
    from stats.hygiene import HygieneRules

    return [f.name for f in fields(HygieneRules)]


def _rule_settings(values: Any, *, where: str) -> dict[str, Any]:
    """Check one source of exclusion-rule settings (field names and types of ``HygieneRules``)."""
    if not isinstance(values, Mapping):
        raise ValidationFailed(
            f"expected a JSON object of exclusion-rule settings, got {type(values).__name__}", where=where
        )
    names = _rule_names()
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key == _LEGACY_GOLD_SHARE:
            if value is None and "gold_false_exclusion" not in values:
                out["gold_false_exclusion"] = None
            continue
        if key not in names:
            raise ValidationFailed(
                f"unknown exclusion-rule setting {key!r}; expected one of {', '.join(names)}",
                where=where,
            )
        if value is None:
            if key in _COUNTS:
                raise ValidationFailed(f"{key} cannot be null (it is a count, not a rule)", where=where)
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValidationFailed(f"{key}: expected a number or null, got {value!r}", where=where)
        elif key in _INTEGER_RULES:
            if value != int(value):
                raise ValidationFailed(f"{key}: expected an integer, got {value!r}", where=where)
            value = int(value)
        out[key] = value
    return out


def hygiene_rules(
    study: Study, overrides: Mapping[str, Any] | None = None, *, where: str = ""
) -> HygieneRules:
    """``Study.options["exclusion_rules"]`` with ``overrides`` on top (decision 4), checked.

    Missing keys take the ``HygieneRules`` defaults; ``null`` switches a rule off.
    """
    from stats.hygiene import HygieneRules

    settings: dict[str, Any] = {}
    stored = (study.options or {}).get("exclusion_rules")
    settings.update(_rule_settings(stored or {}, where=f"study '{study.slug}' options $.exclusion_rules"))
    if overrides is not None:
        settings.update(_rule_settings(overrides, where=where or "rules"))
    try:
        return HygieneRules(**settings)
    except ValueError as exc:
        raise ValidationFailed(str(exc), where=where or "exclusion rules") from None


def exclusion_rules_form_values(study: Study) -> list[dict[str, Any]]:
    """The effective settings of every exclusion rule, for the settings form (name, value, default)."""
    from stats.hygiene import HygieneRules

    rules = hygiene_rules(study)
    defaults = HygieneRules()
    return [
        {
            "name": name,
            "value": "" if getattr(rules, name) is None else getattr(rules, name),
            "default": "off" if getattr(defaults, name) is None else getattr(defaults, name),
            "nullable": name not in _COUNTS,
        }
        for name in _rule_names()
    ]


def exclusion_rules_update(*, study: Study, values: Mapping[str, Any], actor: Any = None) -> HygieneRules:
    """Store a study's exclusion-rule settings (``Study.options["exclusion_rules"]``), checked whole.

    ``values`` holds every setting to store: numbers, ``None`` (rule off) or, from a web form,
    text (empty text = off; a number otherwise). Settings left out fall back to their defaults.
    Nothing is stored when any value is wrong; the change is audited.
    """
    from stats.hygiene import HygieneRules

    parsed: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, str):
            text = value.strip()
            if not text:
                value = None
            else:
                try:
                    value = float(text) if key not in _INTEGER_RULES else int(text)
                except ValueError:
                    raise ValidationFailed(
                        f"expected a number or empty (off), got {text!r}", field=key
                    ) from None
        parsed[key] = value
    checked = _rule_settings(parsed, where="exclusion rules")
    try:
        rules = HygieneRules(**checked)
    except ValueError as exc:
        raise ValidationFailed(str(exc), where="exclusion rules") from None
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)
        previous = (locked.options or {}).get("exclusion_rules", {})
        locked.options = {**(locked.options or {}), "exclusion_rules": checked}
        locked.save(update_fields=["options"])
        audit_record(
            action="study.exclusion_rules",
            user=actor,
            study=locked,
            target=locked.slug,
            previous=previous,
            rules=checked,
        )
    study.options = locked.options
    return rules


def study_rules_saved(study: Study) -> bool:
    """Whether the reports apply the study's exclusion rules by default (issue 30): the quality
    page (or ``exclusion_rules_update``) saved them, or the study has gold trials (whose ``gold``
    rule is on by default)."""
    options = study.options or {}
    return "exclusion_rules" in options or bool(options.get("gold_trials"))


def effective_rules(
    study: Study, rules: Mapping[str, Any] | None, *, raw: bool = False
) -> tuple[Mapping[str, Any] | None, bool]:
    """The rules a report applies and whether they were applied by default (not asked for).

    ``rules`` None: the study's saved rules when it has some (``study_rules_saved``), else none;
    ``raw`` (``--no-rules``): none at all.
    """
    if raw:
        if rules is not None:
            raise ValidationFailed("give --rules or --no-rules, not both", field="--no-rules")
        return None, False
    if rules is None and study_rules_saved(study):
        return {}, True
    return rules, False


def rules_option(value: str | None) -> tuple[dict[str, Any] | None, str]:
    """A command's ``--rules [PATH]``: None (not asked), {} (the stored rules) or a file's settings."""
    if value is None:
        return None, ""
    if value == "":
        return {}, "rules"
    return read_rules_file(Path(value)), str(value)


def exclusions_line(exclusions: Mapping[str, Any]) -> str:
    """One line of what the exclusion rules removed (commands run with ``--rules``)."""
    parts = [
        f"{r['rule']} {r['participants_first']} raters / {r['answers_first']} votes"
        for r in exclusions["rules"]
    ]
    excluded = [f"{r['participant']} ({r['rule']})" for r in exclusions.get("excluded_raters", [])]
    how = "the study's saved exclusion rules (default; --no-rules for the raw figures)" if exclusions.get(
        "applied_by_default") else "exclusion rules"
    return (
        f"{how} kept {exclusions['n_kept_raters']} of {exclusions['n_raters']} raters, "
        f"{exclusions['n_kept_votes']} of {exclusions['n_votes']} votes"
        + (f" (removed: {', '.join(parts)})" if parts else "")
        + (f"; excluded: {', '.join(excluded)}" if excluded else "")
    )


def read_rules_file(path: Path) -> dict[str, Any]:
    """The ``--rules`` JSON object; one-line errors naming the file (and line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationFailed(
            f"cannot read the rules file: {exc.strerror or exc}", where=str(path)
        ) from None
    try:
        data = loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed(f"not valid JSON: {exc.msg}", where=f"{path}:{exc.lineno}") from None
    except JSONRefused as exc:
        raise ValidationFailed(str(exc), where=str(path)) from None
    if not isinstance(data, dict):
        raise ValidationFailed("expected a JSON object of exclusion-rule settings", where=str(path))
    return data
