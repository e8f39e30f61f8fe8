"""The study bundle's ``study.json`` (docs/protocol.md "Files") as a validated, typed in-memory value.

:func:`study_spec_parse` turns the bytes of ``study.json`` into a :class:`StudySpec` or raises
:class:`~annotation.errors.ValidationFailed` with one line naming the file, the JSON path and the
field (``study.json $.candidates[4].system: unknown system 'delta'``). It checks everything that
can be checked without the images and the database: types, required keys, unknown keys, ids,
duplicates, references between pages / systems / candidates / comparisons / axes, bbox ranges.
:func:`study_spec_to_json` is its inverse (the export), so export → import is the identity.

Decisions (docs/protocol.md "Files" is silent on them):
- Unknown keys are refused, so a misspelt optional key (``"comparsions"``) is not silently dropped.
- ``targets``, ``media`` (pages, candidates) and ``meta`` may be omitted (empty); a target's
  ``role`` and ``description`` default to ``""``. ``judge_prompt`` and ``comparisons`` are optional.
- An optional extra ``settings`` object carries the study's seed, hidden repeats, minimum gap and
  neutralization (every kind); the export writes it only when one differs from its default.
- An optional extra ``crowd`` object carries the crowd settings page's values (every kind; issue
  29), the rater page's settings included: checked by the same validator as the page and ``PATCH
  /api/studies/<slug>/`` (``annotation.services.crowd_settings``); keys left out take their
  defaults. The export writes all of them when one differs from its default.
- A comparison needs an ``id``; its A/B order is kept as given; (a, b) and (b, a) on one page are
  the same pair and refused as a duplicate; both sides must have rendered.
- A candidate may carry optional ``version_date`` (YYYY-MM-DD) and ``version_note`` (paper B.5:
  when and why this version was made); ``import_study --update`` records them on the new version.
- An optional extra ``gold`` array carries gold trials with known answers (issue 30; docs/protocol.md "Planning the human study"): ``{id, page, a, b, answer}``, ``a`` and ``b`` image paths like a candidate's,
  ``answer`` ``"A"`` or ``"B"`` (the better side); ids unique, the page known. Written back by the
  export only when the study has some.
- This module parses ``kind = "pairwise_reference"`` bundles; the other kinds
(docs/bundle-kinds.md "Study bundles of the other kinds") have
  their own keys and parser (``annotation.services.bundles.questionnaire_format``, docs/bundle-kinds.md).

No Django import: this module is plain data in, plain data out.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from annotation.errors import ArbiterError, ValidationFailed
from annotation.render.page_blocks import BLOCK_TYPES
from annotation.safe_json import refuse_constant
from annotation.services.crowd_settings import CROWD_KEYS, crowd_settings_clean, crowd_settings_to_json

STUDY_JSON = "study.json"
KINDS_SUPPORTED = ("pairwise_reference",)
KINDS_KNOWN = ("pairwise_reference", "pairwise", "checklist", "rating")
AXIS_SCOPES = ("fixed", "conditional")
MEDIA_KINDS = ("photo", "chart")
MAX_BLOCKS = 2_000  # a page's blocks (annotation.render.page_blocks keeps at most as many)
COMPARISON_SETS = ("human", "deployment")
# Slugs that would collide with fixed URL segments (studies/import/, api/studies/import/).
RESERVED_SLUGS = frozenset({"import", "new", "api"})

SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]+$")
# Control characters (C0; DEL too in ids), found in one regex pass instead of a test per character.
CONTROL_RE = re.compile(r"[\x00-\x1f]")
ID_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
DRIVE_RE = re.compile(r"^[A-Za-z]:")
AXIS_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAX_SLUG = 80
MAX_TITLE = 200
MAX_ID = 120
MAX_AXIS_ID = 80
MAX_AXIS_TITLE = 200
MAX_NAME = 200
MAX_ROLE = 200
MAX_NOTE = 2000
MAX_RENDER_REASON = 300  # a failed render's reason (the renderer's one line)

TOP_REQUIRED = ("slug", "title", "kind", "instructions_md", "axes", "systems", "pages", "candidates")
TOP_OPTIONAL = ("comparisons", "judge_prompt", "settings", "crowd", "gold", "render")
GOLD_ANSWERS = ("A", "B")
# The study's scheduling and display settings (not docs/protocol.md "Files" keys): written by the export only
# when one differs from its default (so the protocol example exports unchanged), so an export → import keeps
# them. The defaults are the Study model's (a test holds them equal).
SETTINGS_DEFAULTS: dict[str, Any] = {"seed": 20260830, "hidden_repeats": 6, "min_gap": 20, "neutralize_media": True}
MAX_SEED = 2**63 - 1  # Study.seed is a BigIntegerField
MAX_SETTING = 2**31 - 1  # hidden_repeats, min_gap: PositiveIntegerField


@dataclass(frozen=True)
class AxisSpec:
    id: str
    scope: str
    description: str
    title: str = ""  # docs/protocol.md "The study model": what raters read; optional


@dataclass(frozen=True)
class SystemSpec:
    id: str
    name: str


@dataclass(frozen=True)
class TargetSpec:
    axis: str
    role: str
    bbox_1000: tuple[float, float, float, float]
    description: str

    def to_json(self) -> dict[str, Any]:
        return {"axis": self.axis, "role": self.role, "bbox_1000": list(self.bbox_1000), "description": self.description}


@dataclass(frozen=True)
class MediaRegion:
    kind: str
    bbox_1000: tuple[float, float, float, float]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "bbox_1000": list(self.bbox_1000)}


@dataclass(frozen=True)
class BlockRegion:
    """A block of a rendered page (docs/protocol.md "Blocks from the DOM"): its type and box only."""

    type: str
    bbox_1000: tuple[float, float, float, float]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "bbox_1000": list(self.bbox_1000)}


@dataclass(frozen=True)
class PageSpec:
    id: str
    image: str
    targets: tuple[TargetSpec, ...]
    media: tuple[MediaRegion, ...]
    meta: dict[str, Any]
    # JSON path of this entry, for image errors found later (``$.pages[3]``).
    where: str = ""
    blocks: tuple[BlockRegion, ...] = ()
    # Verifiable requirements, canonical (docs/protocol.md "AesCode's rule score"); {} for none.
    requirements: dict[str, Any] = field(default_factory=dict)
    # Ground truth (docs/protocol.md "Ground truth"): the checked format's JSON, None without.
    truth: dict[str, Any] | None = None


@dataclass(frozen=True)
class CandidateSpec:
    page: str
    system: str
    image: str | None
    rendered: bool
    media: tuple[MediaRegion, ...]
    where: str = ""
    # Optional (paper B.5 candidate versions): when this version was produced, and why.
    version_date: str | None = None  # ISO date, YYYY-MM-DD
    version_note: str = ""
    blocks: tuple[BlockRegion, ...] = ()
    render_reason: str = ""  # a failed render's reason (optional; rendered: false only)
    # The render's rule score against its page's requirements (docs/protocol.md "AesCode's rule score"); {} for none.
    rule: dict[str, Any] = field(default_factory=dict)
    # Its render's blocks in the ground truth's format (studies with ground truth), None without.
    dom_blocks: dict[str, Any] | None = None


@dataclass(frozen=True)
class ComparisonSpec:
    id: str
    page: str
    a: str
    b: str
    set: str


@dataclass(frozen=True)
class GoldSpec:
    id: str
    page: str
    a: str
    b: str
    answer: str
    where: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "page": self.page, "a": self.a, "b": self.b, "answer": self.answer}


@dataclass(frozen=True)
class StudySpec:
    slug: str
    title: str
    kind: str
    instructions_md: str
    axes: tuple[AxisSpec, ...]
    systems: tuple[SystemSpec, ...]
    pages: tuple[PageSpec, ...]
    candidates: tuple[CandidateSpec, ...]
    comparisons: tuple[ComparisonSpec, ...] = ()
    judge_prompt: str = ""
    # Study.seed / hidden_repeats / min_gap / neutralize_media, defaults filled in.
    settings: dict[str, Any] = field(default_factory=lambda: dict(SETTINGS_DEFAULTS))
    # The crowd settings the bundle gives (``$.crowd``; only those keys: the rest keep the model's defaults).
    crowd: dict[str, Any] = field(default_factory=dict)
    # The settings its HTML outputs were rendered with (``$.render``, docs/rendering.md; kept in
    # ``Study.options["render"]``), or None for a study made from images.
    render: dict[str, Any] | None = None
    gold: tuple[GoldSpec, ...] = ()

    def image_paths(self) -> list[str]:
        """Every distinct image path the bundle names, in first-use order."""
        seen: dict[str, None] = {}
        for page in self.pages:
            seen.setdefault(page.image, None)
        for candidate in self.candidates:
            if candidate.image is not None:
                seen.setdefault(candidate.image, None)
        for gold in self.gold:
            seen.setdefault(gold.a, None)
            seen.setdefault(gold.b, None)
        return list(seen)


# --- parsing helpers -------------------------------------------------------------------------


class _Reader:
    """Typed access to JSON values with errors that name ``file $.path``."""

    def __init__(self, filename: str) -> None:
        self.filename = filename

    def fail(self, path: str, message: str) -> NoReturn:
        raise ValidationFailed(message, where=f"{self.filename} {path}")

    def obj(self, value: Any, path: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"expected an object, got {_type_name(value)}")
        for key in required:
            if key not in value:
                self.fail(f"{path}.{key}", "required key is missing")
        allowed = _allowed_keys(tuple(required), tuple(optional))
        if not allowed.issuperset(value):
            for key in value:
                if key not in allowed:
                    self.fail(
                        f"{path}.{key}", f"unknown key (expected: {', '.join(list(required) + list(optional))})"
                    )
        return value

    def array(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            self.fail(path, f"expected an array, got {_type_name(value)}")
        return value

    def string(self, value: Any, path: str, *, max_length: int | None = None, empty: bool = True) -> str:
        if not isinstance(value, str):
            self.fail(path, f"expected a string, got {_type_name(value)}")
        if not empty and not value.strip():
            self.fail(path, "must not be empty")
        if max_length is not None and len(value) > max_length:
            self.fail(path, f"is {len(value)} characters long, over the limit of {max_length}")
        if "\x00" in value:
            self.fail(path, "contains a NUL character")
        return value

    def identifier(self, value: Any, path: str, *, max_length: int = MAX_ID) -> str:
        text = self.string(value, path, max_length=max_length, empty=False)
        if text != text.strip() or ID_CONTROL_RE.search(text):
            self.fail(path, f"id {text!r} has leading/trailing spaces or control characters")
        return text

    def choice(self, value: Any, path: str, choices: Sequence[str]) -> str:
        text = self.string(value, path)
        if text not in choices:
            self.fail(path, f"{text!r} is not one of {', '.join(choices)}")
        return text

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"expected true or false, got {_type_name(value)}")
        return value

    def bbox(self, value: Any, path: str) -> tuple[float, float, float, float]:
        items = self.array(value, path)
        if len(items) != 4:
            self.fail(path, f"expected [x0, y0, x1, y1], got {len(items)} numbers")
        numbers: list[float] = []
        for i, item in enumerate(items):
            if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item):
                self.fail(f"{path}[{i}]", f"expected a number, got {_type_name(item)}")
            if not 0 <= item <= 1000:
                self.fail(f"{path}[{i}]", f"{item} is outside 0…1000")
            numbers.append(item)
        x0, y0, x1, y1 = numbers
        if x0 >= x1:
            self.fail(path, f"x0 ({x0}) must be less than x1 ({x1})")
        if y0 >= y1:
            self.fail(path, f"y0 ({y0}) must be less than y1 ({y1})")
        return (x0, y0, x1, y1)

    def image_path(self, value: Any, path: str) -> str:
        text = self.string(value, path, max_length=1000, empty=False)
        problem = bundle_path_problem(text)
        if problem:
            self.fail(path, f"image path {text!r} {problem}")
        return text

    def media(self, value: Any, path: str) -> tuple[MediaRegion, ...]:
        regions = []
        for i, item in enumerate(self.array(value, path)):
            where = f"{path}[{i}]"
            raw = self.obj(item, where, ("kind", "bbox_1000"))
            regions.append(
                MediaRegion(
                    kind=self.choice(raw["kind"], f"{where}.kind", MEDIA_KINDS),
                    bbox_1000=self.bbox(raw["bbox_1000"], f"{where}.bbox_1000"),
                )
            )
        return tuple(regions)

    def blocks(self, value: Any, path: str) -> tuple[BlockRegion, ...]:
        if value is not None and not isinstance(value, list):
            self.array(value, path)  # the error names the path
        if len(value or []) > MAX_BLOCKS:
            self.fail(path, f"at most {MAX_BLOCKS:,} blocks, got {len(value):,}")
        return tuple(
            BlockRegion(
                type=self.choice(raw["type"], f"{path}[{i}].type", BLOCK_TYPES),
                bbox_1000=self.bbox(raw["bbox_1000"], f"{path}[{i}].bbox_1000"),
            )
            for i, item in enumerate(self.array(value or [], path))
            for raw in (self.obj(item, f"{path}[{i}]", ("type", "bbox_1000")),)
        )


def truth_field(
    r: _Reader, value: Any, path: str, *, prediction: bool = False, page_text: bool = False
) -> dict[str, Any] | None:
    """A page's ``truth`` or a candidate's ``dom_blocks`` (``prediction``: read as the objective
    protocol reads a prediction, a malformed block dropped) (docs/protocol.md "Ground truth"), or
    an item's ``dom_blocks`` (``page_text``: a prediction with its charts, docs/protocol.md "The
    built-in local judge"), checked by the format's own reader; its error names the field under ``path``."""
    if value is None:
        return None
    from annotation.services.ground_truth import TruthError, blocks_checked, page_text_checked, truth_checked

    try:
        if page_text:
            return page_text_checked(value)
        return blocks_checked(value) if prediction else truth_checked(value)
    except TruthError as exc:
        field, sep, message = str(exc).partition(": ")
        if sep and " " not in field:  # "blocks[3].bbox: outside the page …"
            r.fail(f"{path}.{field}", message)
        r.fail(path, str(exc))


@functools.cache
def _allowed_keys(required: tuple[str, ...], optional: tuple[str, ...]) -> frozenset[str]:
    return frozenset(required) | frozenset(optional)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def bundle_path_problem(path: str) -> str:
    """Why a bundle-relative path is unsafe, or ``""``. Used for image paths and ZIP entries."""
    if "\\" in path:
        return "contains a backslash"
    if path.startswith("/") or DRIVE_RE.match(path):
        return "is absolute"
    if ".." in path.split("/"):
        return "contains '..'"
    if CONTROL_RE.search(path):
        return "contains control characters"
    return ""


def _no_duplicate_keys(filename: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise ValidationFailed(f"duplicate key {key!r} in one object", where=filename)
            result[key] = value
        return result

    return hook


JSON_MAX_VALUES = 2_000_000


def load_json(data: bytes, *, filename: str = STUDY_JSON) -> Any:
    """Parse UTF-8 JSON; errors name ``file:line:column``."""
    if not data.strip():
        raise ValidationFailed("the file is empty", where=filename)
    # A JSON bomb ([{},{},...] within the byte cap) would cost gigabytes as Python objects:
    # count the values cheaply before parsing (SECURITY.md row 5).
    values = data.count(b",") + data.count(b"{") + data.count(b"[")
    if values > JSON_MAX_VALUES:
        raise ValidationFailed(f"{values:,} JSON values, over the limit of {JSON_MAX_VALUES:,}", where=filename)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(f"not UTF-8 text (byte {exc.start})", where=filename) from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys(filename), parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise ValidationFailed(f"malformed JSON: {exc.msg}", where=f"{filename}:{exc.lineno}:{exc.colno}") from None
    except ValueError as exc:
        raise ValidationFailed(f"malformed JSON: {exc}", where=filename) from None
    except RecursionError:
        raise ValidationFailed("malformed JSON: nested too deeply", where=filename) from None


# --- the parser ------------------------------------------------------------------------------


def parse_systems(r: _Reader, root: dict[str, Any]) -> list[SystemSpec]:
    """``$.systems[{id, name}]`` of any study kind: unique ids, at least one system."""
    systems: list[SystemSpec] = []
    system_ids: dict[str, str] = {}
    for i, item in enumerate(r.array(root["systems"], "$.systems")):
        where = f"$.systems[{i}]"
        raw = r.obj(item, where, ("id", "name"))
        system_id = r.identifier(raw["id"], f"{where}.id")
        if system_id in system_ids:
            r.fail(f"{where}.id", f"duplicate system id {system_id!r} (first at {system_ids[system_id]})")
        system_ids[system_id] = where
        systems.append(SystemSpec(id=system_id, name=r.string(raw["name"], f"{where}.name", max_length=MAX_NAME)))
    if not systems:
        r.fail("$.systems", "a study needs at least one system")
    return systems


def parse_study_header(r: _Reader, root: dict[str, Any]) -> tuple[str, str, str, str]:
    """``slug, title, kind, instructions_md`` of a ``study.json`` object (every kind)."""
    slug = r.string(root["slug"], "$.slug", max_length=MAX_SLUG, empty=False)
    if not SLUG_RE.match(slug):
        r.fail("$.slug", f"{slug!r} is not a slug (letters, digits, '-' and '_' only)")
    if slug.lower() in RESERVED_SLUGS:
        r.fail("$.slug", f"{slug!r} is reserved; choose another slug")
    title = r.string(root["title"], "$.title", max_length=MAX_TITLE, empty=False)
    kind = r.choice(root["kind"], "$.kind", KINDS_KNOWN)
    instructions = r.string(root["instructions_md"], "$.instructions_md")
    return slug, title, kind, instructions


def parse_settings(r: _Reader, root: dict[str, Any]) -> dict[str, Any]:
    """The optional ``settings`` object: any of seed, hidden_repeats (integers ≥ 0), min_gap (≥ 1)
    and neutralize_media (true/false); the rest take their defaults."""
    settings = dict(SETTINGS_DEFAULTS)
    if "settings" not in root:
        return settings
    raw = r.obj(root["settings"], "$.settings", (), tuple(SETTINGS_DEFAULTS))
    for key, low, high in (("seed", 0, MAX_SEED), ("hidden_repeats", 0, MAX_SETTING), ("min_gap", 1, MAX_SETTING)):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                r.fail(f"$.settings.{key}", f"expected an integer from {low} to {high}, got {json.dumps(value)[:40]}")
            settings[key] = value
    if "neutralize_media" in raw:
        settings["neutralize_media"] = r.boolean(raw["neutralize_media"], "$.settings.neutralize_media")
    return settings


def parse_crowd(r: _Reader, root: dict[str, Any]) -> dict[str, Any]:
    """The optional ``crowd`` object: the crowd settings given, checked by the page's and the API's
    validator (``crowd_settings_clean``); errors name ``study.json $.crowd.<key>``."""
    if "crowd" not in root:
        return {}
    raw = r.obj(root["crowd"], "$.crowd", (), CROWD_KEYS)
    return crowd_settings_clean(raw, json_path="$.crowd", filename=r.filename)


def parse_render(r: _Reader, root: dict[str, Any]) -> dict[str, Any] | None:
    """The optional ``render`` object: the settings the study's HTML outputs were rendered with
    (docs/rendering.md) and the rule failed renders follow in its leaderboards (``failure_rule``),
    checked and with defaults filled in; None when not given."""
    if "render" not in root:
        return None
    from annotation.render.settings import study_render_from_json

    raw = root["render"]
    if not isinstance(raw, dict):
        r.fail("$.render", f"expected an object, got {_type_name(raw)}")
    try:
        return study_render_from_json(raw)
    except (ArbiterError, TypeError) as exc:
        r.fail("$.render", " ".join(str(exc).split())[:200])


def crowd_to_json(crowd: dict[str, Any]) -> dict[str, Any] | None:
    """What the export writes under ``crowd``: all of them when one differs from its default, else nothing."""
    return crowd_settings_to_json(crowd)


def settings_to_json(settings: dict[str, Any]) -> dict[str, Any] | None:
    """What the export writes under ``settings``: all of them when one differs from its default, else nothing."""
    values = {key: settings.get(key, default) for key, default in SETTINGS_DEFAULTS.items()}
    return None if values == SETTINGS_DEFAULTS else values


def document_kind(document: Any) -> str | None:
    """The ``kind`` a parsed ``study.json`` declares when it is one of the known kinds, else None."""
    if isinstance(document, dict) and isinstance(document.get("kind"), str) and document["kind"] in KINDS_KNOWN:
        return str(document["kind"])
    return None


def study_spec_parse(data: bytes, *, filename: str = STUDY_JSON) -> StudySpec:
    """Validate ``study.json`` bytes (docs/protocol.md "Files") whole and return the typed study.

    Raises ValidationFailed on the first problem found, naming ``file $.json.path``.
    """
    return study_spec_from_document(load_json(data, filename=filename), filename=filename)


def study_spec_from_document(document: Any, *, filename: str = STUDY_JSON) -> StudySpec:
    """:func:`study_spec_parse` of an already parsed JSON value (``kind = "pairwise_reference"``)."""
    r = _Reader(filename)
    root = r.obj(document, "$", TOP_REQUIRED, TOP_OPTIONAL)
    slug, title, kind, instructions = parse_study_header(r, root)
    if kind not in KINDS_SUPPORTED:
        r.fail("$.kind", f"kind {kind!r} has its own bundle keys (docs/bundle-kinds.md), not these")
    judge_prompt = r.string(root.get("judge_prompt", ""), "$.judge_prompt")
    settings = parse_settings(r, root)
    crowd = parse_crowd(r, root)
    render = parse_render(r, root)

    axes: list[AxisSpec] = []
    axis_ids: dict[str, str] = {}
    for i, item in enumerate(r.array(root["axes"], "$.axes")):
        where = f"$.axes[{i}]"
        raw = r.obj(item, where, ("id", "scope"), ("description", "title"))
        axis_id = r.identifier(raw["id"], f"{where}.id", max_length=MAX_AXIS_ID)
        if not AXIS_ID_RE.match(axis_id):
            r.fail(f"{where}.id", f"axis id {axis_id!r} may hold only letters, digits, '_', '.' and '-'")
        if axis_id in axis_ids:
            r.fail(f"{where}.id", f"duplicate axis id {axis_id!r} (first at {axis_ids[axis_id]})")
        axis_ids[axis_id] = where
        axes.append(
            AxisSpec(
                id=axis_id,
                scope=r.choice(raw["scope"], f"{where}.scope", AXIS_SCOPES),
                description=r.string(raw.get("description", ""), f"{where}.description"),
                title=r.string(raw.get("title", ""), f"{where}.title", max_length=MAX_AXIS_TITLE).strip(),
            )
        )

    systems = parse_systems(r, root)
    system_ids = {system.id: f"$.systems[{i}]" for i, system in enumerate(systems)}

    pages: list[PageSpec] = []
    page_ids: dict[str, str] = {}
    for i, item in enumerate(r.array(root["pages"], "$.pages")):
        where = f"$.pages[{i}]"
        raw = r.obj(item, where, ("id", "image"), ("targets", "media", "meta", "blocks", "requirements", "truth"))
        page_id = r.identifier(raw["id"], f"{where}.id")
        if page_id in page_ids:
            r.fail(f"{where}.id", f"duplicate page id {page_id!r} (first at {page_ids[page_id]})")
        page_ids[page_id] = where
        image = r.image_path(raw["image"], f"{where}.image")
        targets = []
        for j, target in enumerate(r.array(raw.get("targets", []), f"{where}.targets")):
            twhere = f"{where}.targets[{j}]"
            traw = r.obj(target, twhere, ("axis", "bbox_1000"), ("role", "description"))
            axis = r.string(traw["axis"], f"{twhere}.axis", empty=False)
            if axis not in axis_ids:
                r.fail(f"{twhere}.axis", f"unknown axis {axis!r}")
            targets.append(
                TargetSpec(
                    axis=axis,
                    role=r.string(traw.get("role", ""), f"{twhere}.role", max_length=MAX_ROLE),
                    bbox_1000=r.bbox(traw["bbox_1000"], f"{twhere}.bbox_1000"),
                    description=r.string(traw.get("description", ""), f"{twhere}.description"),
                )
            )
        media = r.media(raw.get("media", []), f"{where}.media")
        meta = raw.get("meta", {})
        if not isinstance(meta, dict):
            r.fail(f"{where}.meta", f"expected an object, got {_type_name(meta)}")
        requirements = _requirements(r, raw["requirements"], f"{where}.requirements") if "requirements" in raw else {}
        pages.append(PageSpec(id=page_id, image=image, targets=tuple(targets), media=media, meta=meta, where=where,
                              blocks=r.blocks(raw.get("blocks"), f"{where}.blocks"), requirements=requirements,
                              truth=truth_field(r, raw.get("truth"), f"{where}.truth")))
    if not pages:
        r.fail("$.pages", "a study needs at least one page")

    candidates: list[CandidateSpec] = []
    candidate_at: dict[tuple[str, str], CandidateSpec] = {}
    candidate_where: dict[tuple[str, str], str] = {}
    for i, item in enumerate(r.array(root["candidates"], "$.candidates")):
        where = f"$.candidates[{i}]"
        raw = r.obj(item, where, ("page", "system", "image", "rendered"),
                    ("media", "version_date", "version_note", "blocks", "render_reason", "rule", "dom_blocks"))
        page_id = r.string(raw["page"], f"{where}.page", empty=False)
        if page_id not in page_ids:
            r.fail(f"{where}.page", f"unknown page {page_id!r}")
        system_id = r.string(raw["system"], f"{where}.system", empty=False)
        if system_id not in system_ids:
            r.fail(f"{where}.system", f"unknown system {system_id!r}")
        key = (page_id, system_id)
        if key in candidate_at:
            r.fail(where, f"duplicate candidate for page {page_id!r} and system {system_id!r} (first at {candidate_where[key]})")
        rendered = r.boolean(raw["rendered"], f"{where}.rendered")
        candidate_image: str | None = None
        if rendered:
            candidate_image = r.image_path(raw["image"], f"{where}.image")
        elif raw["image"] is not None:
            r.fail(f"{where}.image", "a failed render (rendered: false) must have image null")
        media = r.media(raw.get("media", []), f"{where}.media")
        if not rendered and media:
            r.fail(f"{where}.media", "a failed render (rendered: false) has no media regions")
        version_date = None
        if raw.get("version_date") is not None:
            version_date = r.string(raw["version_date"], f"{where}.version_date", empty=False)
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", version_date) or not _is_date(version_date):
                r.fail(f"{where}.version_date", f"{version_date!r} is not a date (YYYY-MM-DD)")
        version_note = r.string(raw.get("version_note", ""), f"{where}.version_note", max_length=MAX_NOTE)
        render_reason = r.string(raw.get("render_reason", ""), f"{where}.render_reason", max_length=MAX_RENDER_REASON)
        if rendered and render_reason:
            r.fail(f"{where}.render_reason", "only a failed render (rendered: false) has a reason")
        spec = CandidateSpec(
            page=page_id, system=system_id, image=candidate_image, rendered=rendered, media=media, where=where,
            version_date=version_date, version_note=version_note, render_reason=render_reason,
            blocks=r.blocks(raw.get("blocks"), f"{where}.blocks"),
            rule=_rule(r, raw["rule"], f"{where}.rule") if raw.get("rule") else {},
            dom_blocks=truth_field(r, raw.get("dom_blocks"), f"{where}.dom_blocks", prediction=True),
        )
        if spec.dom_blocks is not None and not rendered:
            r.fail(f"{where}.dom_blocks", "a failed render (rendered: false) has no blocks")
        candidate_at[key] = spec
        candidate_where[key] = where
        candidates.append(spec)

    comparisons: list[ComparisonSpec] = []
    comparison_ids: dict[str, str] = {}
    pairs: dict[tuple[str, frozenset[str]], str] = {}
    for i, item in enumerate(r.array(root.get("comparisons", []), "$.comparisons")):
        where = f"$.comparisons[{i}]"
        raw = r.obj(item, where, ("id", "page", "a", "b", "set"))
        comparison_id = r.identifier(raw["id"], f"{where}.id")
        if comparison_id in comparison_ids:
            r.fail(f"{where}.id", f"duplicate comparison id {comparison_id!r} (first at {comparison_ids[comparison_id]})")
        comparison_ids[comparison_id] = where
        page_id = r.string(raw["page"], f"{where}.page", empty=False)
        if page_id not in page_ids:
            r.fail(f"{where}.page", f"unknown page {page_id!r}")
        sides = {}
        for side in ("a", "b"):
            system_id = r.string(raw[side], f"{where}.{side}", empty=False)
            if system_id not in system_ids:
                r.fail(f"{where}.{side}", f"unknown system {system_id!r}")
            candidate = candidate_at.get((page_id, system_id))
            if candidate is None:
                r.fail(f"{where}.{side}", f"system {system_id!r} has no candidate for page {page_id!r}")
            if not candidate.rendered:
                r.fail(
                    f"{where}.{side}",
                    f"system {system_id!r} failed to render page {page_id!r} (rendered: false); it cannot be compared",
                )
            sides[side] = system_id
        if sides["a"] == sides["b"]:
            r.fail(f"{where}.b", f"a comparison needs two different systems, got {sides['a']!r} twice")
        pair = (page_id, frozenset(sides.values()))
        if pair in pairs:
            r.fail(
                where,
                f"duplicate pair {sides['a']!r}/{sides['b']!r} on page {page_id!r} (first at {pairs[pair]}; "
                "A/B order does not make a new pair)",
            )
        pairs[pair] = where
        comparisons.append(
            ComparisonSpec(
                id=comparison_id,
                page=page_id,
                a=sides["a"],
                b=sides["b"],
                set=r.choice(raw["set"], f"{where}.set", COMPARISON_SETS),
            )
        )

    return StudySpec(
        slug=slug,
        title=title,
        kind=kind,
        instructions_md=instructions,
        axes=tuple(axes),
        systems=tuple(systems),
        pages=tuple(pages),
        candidates=tuple(candidates),
        comparisons=tuple(comparisons),
        judge_prompt=judge_prompt,
        settings=settings,
        crowd=crowd,
        gold=parse_gold(r, root, page_ids),
        render=render,
    )


def parse_gold(r: _Reader, root: dict[str, Any], page_ids: dict[str, str]) -> tuple[GoldSpec, ...]:
    """``$.gold``: gold trials supplied with known answers (module docstring)."""
    out: list[GoldSpec] = []
    seen: dict[str, str] = {}
    for i, item in enumerate(r.array(root.get("gold", []), "$.gold")):
        where = f"$.gold[{i}]"
        raw = r.obj(item, where, ("id", "page", "a", "b", "answer"))
        gold_id = r.identifier(raw["id"], f"{where}.id")
        if gold_id in seen:
            r.fail(f"{where}.id", f"duplicate gold id {gold_id!r} (first at {seen[gold_id]})")
        seen[gold_id] = where
        page_id = r.string(raw["page"], f"{where}.page", empty=False)
        if page_id not in page_ids:
            r.fail(f"{where}.page", f"unknown page {page_id!r}")
        out.append(GoldSpec(
            id=gold_id, page=page_id, a=r.image_path(raw["a"], f"{where}.a"), b=r.image_path(raw["b"], f"{where}.b"),
            answer=r.choice(raw["answer"], f"{where}.answer", GOLD_ANSWERS), where=where,
        ))
    return tuple(out)


def _requirements(r: _Reader, value: Any, path: str) -> dict[str, Any]:
    """A brief's requirements (rule_score.requirements), canonical; an error names the field."""
    from rule_score.requirements import RequirementsError, parse_requirements

    try:
        return parse_requirements(value).to_json()
    except RequirementsError as error:
        r.fail(f"{path}{error.path}", error.reason)


def _rule(r: _Reader, value: Any, path: str) -> dict[str, Any]:
    """An item's rule score (rule_score.verifiers), checked; an error names the field."""
    from rule_score.requirements import RequirementsError
    from rule_score.verifiers import rule_result_from_json

    try:
        return rule_result_from_json(value).to_json()
    except RequirementsError as error:
        r.fail(f"{path}{error.path}", error.reason)


def _candidate_json(c: CandidateSpec) -> dict[str, Any]:
    document: dict[str, Any] = {
        "page": c.page,
        "system": c.system,
        "image": c.image,
        "rendered": c.rendered,
        "media": [m.to_json() for m in c.media],
    }
    if c.version_date is not None:
        document["version_date"] = c.version_date
    if c.version_note:
        document["version_note"] = c.version_note
    if c.blocks:
        document["blocks"] = [b.to_json() for b in c.blocks]
    if c.render_reason:
        document["render_reason"] = c.render_reason
    if c.rule:
        document["rule"] = c.rule
    if c.dom_blocks is not None:
        document["dom_blocks"] = c.dom_blocks
    return document


def study_spec_to_json(spec: StudySpec) -> dict[str, Any]:
    """The ``study.json`` object of a study (docs/protocol.md "Files" keys only); the inverse of
    :func:`study_spec_parse`."""
    document: dict[str, Any] = {
        "slug": spec.slug,
        "title": spec.title,
        "kind": spec.kind,
        "instructions_md": spec.instructions_md,
        "axes": [
            {"id": a.id, **({"title": a.title} if a.title else {}), "scope": a.scope, "description": a.description}
            for a in spec.axes
        ],
        "systems": [{"id": s.id, "name": s.name} for s in spec.systems],
        "pages": [
            {
                "id": p.id,
                "image": p.image,
                "targets": [t.to_json() for t in p.targets],
                "media": [m.to_json() for m in p.media],
                "meta": p.meta,
                **({"blocks": [b.to_json() for b in p.blocks]} if p.blocks else {}),
                **({"requirements": p.requirements} if p.requirements else {}),
                **({"truth": p.truth} if p.truth is not None else {}),
            }
            for p in spec.pages
        ],
        "candidates": [_candidate_json(c) for c in spec.candidates],
        "comparisons": [
            {"id": c.id, "page": c.page, "a": c.a, "b": c.b, "set": c.set} for c in spec.comparisons
        ],
    }
    if spec.judge_prompt:
        document["judge_prompt"] = spec.judge_prompt
    settings = settings_to_json(spec.settings)
    if settings is not None:
        document["settings"] = settings
    crowd = crowd_to_json(spec.crowd)
    if crowd is not None:
        document["crowd"] = crowd
    if spec.gold:
        document["gold"] = [g.to_json() for g in spec.gold]
    if spec.render is not None:
        document["render"] = spec.render
    return document
