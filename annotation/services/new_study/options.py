"""The ``study.json`` options a researcher gives ``new_study`` (a JSON object, single keys, the
render settings and the failure rule), checked before any file is read (docs/new-study.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from annotation.errors import ArbiterError, ValidationFailed
from annotation.services.bundles.reference_format import load_json

RENDER_KEY = "render"  # the option holding the study's render settings (docs/rendering.md)
RENDER_FLAG_KEYS = {
    "--viewport": "viewport", "--mode": "mode", "--scale": "scale", "--max-height": "max_height",
    "--timeout": "timeout_s", "--max-console-errors": "max_console_errors",
}  # fmt: skip


def render_settings_from_options(options: dict[str, Any]) -> Any:
    """The study's render settings: the ``render`` option (an object of docs/rendering.md's
    settings, e.g. ``{"viewport": "1280x720", "mode": "canvas"}``), defaults for keys left out."""
    from annotation.render.settings import FAILURE_RULE_KEY, RenderSettings

    raw = options.get(RENDER_KEY, {})
    if not isinstance(raw, dict):
        raise ValidationFailed('expected a JSON object such as {"viewport": "1280x720"}', where=f"option {RENDER_KEY}")
    try:
        return RenderSettings.from_json({k: v for k, v in raw.items() if k != FAILURE_RULE_KEY})
    except (TypeError, ArbiterError) as exc:
        # The settings' errors name render_pages' flags; here the option's own key is named.
        flag, _, rest = str(exc).partition(": ")
        if flag in RENDER_FLAG_KEYS:
            raise ValidationFailed(rest, where=f"option {RENDER_KEY}.{RENDER_FLAG_KEYS[flag]}") from None
        raise ValidationFailed(str(exc), where=f"option {RENDER_KEY}") from None


def study_render_from_options(options: dict[str, Any]) -> dict[str, Any]:
    """The study's ``render`` object: the render settings (defaults filled in) and the failure rule
    (``failure_rule``, docs/protocol.md "Failed renders in the leaderboard")."""
    from annotation.render.settings import study_render_from_json

    render_settings_from_options(options)  # its errors first, named as the render option's
    try:
        return study_render_from_json(options.get(RENDER_KEY, {}))
    except ArbiterError as exc:
        raise ValidationFailed(str(exc), where=f"option {RENDER_KEY}") from None


def with_failure_rule(options: dict[str, Any], rule: str | None, *, where: str) -> dict[str, Any]:
    """The options with the failure rule a flag or form field chose (``new_study --render-failures``,
    the upload's ``render_failures``) put in the ``render`` object; None or empty leaves them as
    they are. A different rule already in the ``render`` option is refused."""
    from annotation.render.settings import FAILURE_RULE_KEY, parse_failure_rule

    if not rule:
        return options
    try:
        chosen = parse_failure_rule(rule, where=where)
    except ArbiterError as exc:
        raise ValidationFailed(str(exc)) from None
    raw = options.get(RENDER_KEY, {})
    if not isinstance(raw, dict):
        raise ValidationFailed('expected a JSON object such as {"viewport": "1280x720"}', where=f"option {RENDER_KEY}")
    given = raw.get(FAILURE_RULE_KEY)
    if given is not None and str(given).strip().lower() != chosen:
        raise ValidationFailed(
            f"the render option's failure_rule is {str(given)[:40]!r}; give the rule once", where=where
        )
    return {**options, RENDER_KEY: {**raw, FAILURE_RULE_KEY: chosen}}


def options_from_json(text: str, *, where: str) -> dict[str, Any]:
    """An options JSON object (top-level study.json keys)."""
    if not text.strip():
        return {}
    value = load_json(text.encode("utf-8"), filename=where)
    if not isinstance(value, dict):
        raise ValidationFailed("expected a JSON object of study.json keys", where=where)
    return value


def merged_options(sources: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Options from several places (a file, then single keys); a key given twice is refused."""
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for where, values in sources:
        for key, value in values.items():
            if key in merged:
                raise ValidationFailed(f"option {key!r} is given twice (also in {origin[key]})", where=where)
            merged[key] = value
            origin[key] = where
    return merged
