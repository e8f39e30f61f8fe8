"""The ``study.json`` options a researcher gives ``new_study`` (a JSON object, single keys, the
render settings and the failure rule), checked before any file is read (docs/new-study.md)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from annotation.errors import ArbiterError, ValidationFailed
from annotation.services.bundles.reference_format import load_json
from annotation.services.new_study.tables import table_rows_of_text

RENDER_KEY = "render"  # the option holding the study's render settings (docs/rendering.md)
RENDER_FLAG_KEYS = {
    "--viewport": "viewport", "--mode": "mode", "--scale": "scale", "--max-height": "max_height",
    "--timeout": "timeout_s", "--max-console-errors": "max_console_errors",
}  # fmt: skip
# The option holding the media regions of image pages (docs/new-study.md "Media regions of PNG
# pages"): new_study reads it and leaves it out of study.json (each region goes to its page or
# candidate). Rows ``{"page", "system", "kind", "bbox_1000"}``, ``system`` "" for the reference;
# kind ``none`` says the image has no media.
MEDIA_KEY = "media"
# The option holding the briefs' verifiable requirements, ``{page id: requirements}``
# (docs/protocol.md "AesCode's rule score"): new_study gives each brief its own and scores each
# rendered output against them; it is not a study.json key itself.
REQUIREMENTS_KEY = "requirements"
MEDIA_COLUMNS = ("page", "system", "kind", "x0", "y0", "x1", "y1")
NO_MEDIA = "none"


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


def neutralizes(options: dict[str, Any]) -> bool:
    """Whether the study the options make neutralizes media (``settings.neutralize_media``, true
    when left out: docs/bundle-kinds.md)."""
    settings = options.get("settings")
    return not (isinstance(settings, dict) and settings.get("neutralize_media") is False)


def with_media_choice(options: dict[str, Any], *, neutralize: str = "", media: str = "", where: str) -> dict[str, Any]:
    """The options with the researcher's choice for image pages without media regions
    (docs/new-study.md "Media regions of PNG pages"): ``neutralize`` ``no`` switches media
    neutralization off (``settings.neutralize_media``); ``media``, a CSV or JSONL table of regions
    (:data:`MEDIA_COLUMNS`; typed CSV rows may leave the header line out), becomes the ``media``
    option. Empty leaves the options as they are; a choice the options already make otherwise is
    refused."""
    out = dict(options)
    choice = neutralize.strip().lower()
    if choice not in ("", "yes", "no"):
        raise ValidationFailed(f"expected yes or no, got {choice[:20]!r}", where=where)
    if choice:
        settings = out.get("settings", {})
        if not isinstance(settings, dict):
            raise ValidationFailed("expected a JSON object", where="option settings")
        given = settings.get("neutralize_media")
        if given is not None and given != (choice == "yes"):
            raise ValidationFailed(
                f"settings.neutralize_media is {json.dumps(given)[:40]} in the options; give the choice once", where=where
            )
        out["settings"] = {**settings, "neutralize_media": choice == "yes"}
    if media.strip():
        if MEDIA_KEY in out:
            raise ValidationFailed(f"option {MEDIA_KEY!r} is given twice (also in the options)", where=where)
        out[MEDIA_KEY] = media_rows_from_table(media, where=where)
    return out


def media_rows_from_table(text: str, *, where: str) -> list[dict[str, Any]]:
    """The rows of a media table (JSONL when every line is a JSON object, else CSV) as ``media``
    option rows, each region checked as the bundle checks it (an error names the line)."""
    lines = [line for line in text.splitlines() if line.strip()]
    jsonl = bool(lines) and all(line.lstrip().startswith("{") for line in lines)
    headless = bool(lines) and not jsonl and lines[0].split(",")[0].strip().lower() != "page"
    if headless:  # typed rows without the header line: the columns in their order
        text = ",".join(MEDIA_COLUMNS) + "\n" + text
    rows: list[dict[str, Any]] = []
    for line, row in table_rows_of_text(text, shown=where, columns=MEDIA_COLUMNS, jsonl=jsonl, line_offset=-headless):
        region: dict[str, Any] = {"page": row.get("page", ""), "system": row.get("system", ""), "kind": row.get("kind", "")}
        if region["kind"] != NO_MEDIA or any(row.get(c) for c in MEDIA_COLUMNS[3:]):
            try:
                region["bbox_1000"] = [float(row.get(c, "")) for c in MEDIA_COLUMNS[3:]]
            except ValueError:
                raise ValidationFailed("x0, y0, x1, y1: expected numbers from 0 to 1000", where=line) from None
        media_row_checked(region, where=line)
        rows.append(region)
    return rows


def media_row_checked(row: Any, *, where: str) -> tuple[str, str, tuple[Any, ...]]:
    """(page, system, regions) of one ``media`` option row, checked: a page, a kind (``photo``,
    ``chart``, or ``none`` with no box) and a box as the bundle's (docs/protocol.md "The study
    model": ``bbox_1000``)."""
    from annotation.services.bundles.reference_format import MEDIA_KINDS, _Reader

    reader = _Reader(where)
    raw = reader.obj(row, "", ("page", "kind"), ("system", "bbox_1000"))
    page = reader.string(raw["page"], "page", empty=False)
    system = reader.string(raw.get("system", ""), "system")
    kind = reader.choice(raw["kind"], "kind", (*MEDIA_KINDS, NO_MEDIA))
    if kind == NO_MEDIA:
        if "bbox_1000" in raw:
            raise ValidationFailed(f"kind {NO_MEDIA} (no media on the image) takes no box", where=where)
        return page, system, ()
    return page, system, reader.media([{"kind": kind, "bbox_1000": raw.get("bbox_1000")}], "bbox")
