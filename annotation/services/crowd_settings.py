"""A study's crowd settings (issue 17 page; issue 29: also the bundle and the API): the one validator.

The crowd settings page (``annotation.views.research.crowd_settings``), ``PATCH
/api/studies/<slug>/`` (through ``study_settings_update``) and the bundle's ``crowd`` object
(``study.json``, every kind) all check values with :func:`crowd_settings_clean`, so a value one
of them takes, the others take too, with the same message.

| key | type | rule |
|---|---|---|
| ``accepting_participants`` | true/false | the participant link takes new participants |
| ``completion_code`` | text ≤ 64 | shown at the end; empty: a new code per participant |
| ``completion_url`` | text ≤ 500 | empty, or an absolute http(s) URL; ``{code}`` is replaced |
| ``screened_out_url`` | text ≤ 500 | empty, or an absolute http(s) URL |
| ``screened_out_code`` | text ≤ 64 | given to screened-out participants |
| ``end_comment`` | true/false | an optional comment box on the end page |
| ``break_every`` | whole number 0 … 10,000 | a break screen every N answered trials (0: none) |
| ``digit_keys`` | true/false | digits answer the highlighted question (the rater page; default true) |
| ``axes_from_verdict`` | true/false | the "v" key sets every axis to the verdict's side (default true) |
| ``mark_defaulted_axes`` | true/false | votes remember the axes so set and left; the votes CSV says so (default false) |

The last three are the rater page's settings (issue 30), on the same settings page; the study keeps
them in ``Study.options["rater_page"]``, the others are Study fields (:func:`crowd_split`).

URLs are stored stripped of surrounding spaces. Plain data in, plain data out: no Django import,
so the Django-free bundle parsers use it too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from annotation.errors import ValidationFailed

#: Every crowd setting with the Study model's default (a test holds them equal).
CROWD_DEFAULTS: dict[str, Any] = {
    "accepting_participants": True,
    "completion_code": "",
    "completion_url": "",
    "screened_out_url": "",
    "screened_out_code": "",
    "end_comment": False,
    "break_every": 40,
}
CROWD_SETTINGS = tuple(CROWD_DEFAULTS)
#: The rater page's settings with their defaults (``annotation.models.RATER_PAGE_DEFAULTS`` is this
#: dict): on the crowd settings page, in the bundle's ``crowd`` object and in PATCH.
RATER_PAGE_SETTINGS: dict[str, bool] = {"digit_keys": True, "axes_from_verdict": True, "mark_defaulted_axes": False}
#: Every key of the bundle's ``crowd`` object, of the settings page and of PATCH's crowd part.
CROWD_KEYS = (*CROWD_SETTINGS, *RATER_PAGE_SETTINGS)
TEXT_LIMITS = {"completion_code": 64, "completion_url": 500, "screened_out_url": 500, "screened_out_code": 64}
URL_FIELDS = ("completion_url", "screened_out_url")
BOOLEAN_FIELDS = ("accepting_participants", "end_comment")
INTEGER_LIMITS = {"break_every": (0, 10_000)}
URL_EXAMPLES = {
    "completion_url": "https://app.prolific.com/submissions/complete?cc={code}",
    "screened_out_url": "https://app.prolific.com/submissions/complete?cc=SCREENED_OUT",
}
FIELD_WORDS = {
    "completion_url": "The completion URL",
    "screened_out_url": "The screened-out URL",
    "break_every": "Breaks every N trials",
}


def crowd_settings_clean(
    values: Mapping[str, Any], *, json_path: str | None = None, filename: str = ""
) -> dict[str, Any]:
    """The given crowd settings checked and normalized (URLs stripped); only the keys given.

    Errors are one :class:`ValidationFailed` line: naming the field (``field 'break_every'``) for
    the page and the API, or the JSON path when ``json_path`` is given (``study.json
    $.crowd.break_every`` with ``json_path="$.crowd"``, ``filename="study.json"``).
    """

    def fail(name: str, message: str) -> ValidationFailed:
        if json_path is None:
            return ValidationFailed(message, field=name)
        return ValidationFailed(message, where=" ".join(p for p in (filename, f"{json_path}.{name}") if p))

    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        if name not in CROWD_DEFAULTS and name not in RATER_PAGE_SETTINGS:
            raise fail(name, f"not a crowd setting (crowd settings: {', '.join(CROWD_KEYS)})")
        if name in TEXT_LIMITS:
            if not isinstance(value, str):
                raise fail(name, f"expected text, got {_shown(value)}")
            if len(value) > TEXT_LIMITS[name]:
                raise fail(name, f"at most {TEXT_LIMITS[name]:,} characters, got {len(value):,}")
            if "\x00" in value:
                raise fail(name, "contains a NUL character")
            if name in URL_FIELDS:
                value = value.strip()
                if value and not _is_web_url(value):
                    raise fail(
                        name, f"{FIELD_WORDS[name]} must start with https:// (or http://), e.g. {URL_EXAMPLES[name]}"
                    )
        elif name in INTEGER_LIMITS:
            low, high = INTEGER_LIMITS[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise fail(name, f"{FIELD_WORDS[name]} is a whole number from {low} to {high:,}, got {_shown(value)}")
        elif not isinstance(value, bool):
            raise fail(name, f"expected true or false, got {_shown(value)}")
        cleaned[name] = value
    return cleaned


def crowd_settings_to_json(values: Mapping[str, Any]) -> dict[str, Any] | None:
    """What an export writes under ``crowd``: every setting when one differs from its default, else nothing."""
    defaults = {**CROWD_DEFAULTS, **RATER_PAGE_SETTINGS}
    current = {name: values.get(name, default) for name, default in defaults.items()}
    return None if current == defaults else current


def crowd_split(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, bool]]:
    """(the Study fields, the rater-page settings for ``Study.options["rater_page"]``) of cleaned
    crowd settings."""
    fields = {name: value for name, value in values.items() if name in CROWD_DEFAULTS}
    page = {name: bool(value) for name, value in values.items() if name in RATER_PAGE_SETTINGS}
    return fields, page


def _is_web_url(value: str) -> bool:
    """An absolute http(s) URL: the participant's browser is sent there."""
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."
