"""``study.json`` of the other study kinds (docs/bundle-kinds.md "Study bundles of the other kinds":
``pairwise``, ``checklist``, ``rating``).

:func:`questionnaire_spec_from_document` validates a parsed ``study.json`` whole into a
:class:`QuestionnaireStudySpec` or raises :class:`~annotation.errors.ValidationFailed` with one line
naming the file, the JSON path and the field (``study.json $.items[3].brief: unknown brief 'b9'``).
:func:`questionnaire_spec_to_json` is its inverse (the export). The exact schema, the defaults and one
example per kind are in docs/bundle-kinds.md.

Decisions (docs/bundle-kinds.md "Study bundles of the other kinds" is silent on them):
- ``systems[{id, name}]`` is required as in docs/protocol.md "Files": an item's system is named by id and its
name
  is never shown. Every item has a brief, a system and an image; one item per (brief, system).
- Item ids are unique across the study (predicates and comparisons name items, not briefs).
- ``checklist`` and ``rating`` may leave ``briefs`` out and an item's ``brief`` out (or null):
  docs/bundle-kinds.md "Study bundles of the other kinds" rates "one image (optionally its brief)"; such an
  image is its own brief (the item's id, no text), which the export writes out. A predicate box may be
  docs/protocol.md "The study model"'s ``{bbox_1000, ...}``.
- A brief's text may be empty for ``checklist`` and ``rating`` (the image is shown alone), not for
  ``pairwise``, where it is the task both images answer.
- ``pairwise``: when ``comparisons`` is left out, every pair of items of each brief is compared,
  in item order, with ids ``<brief>-1``, ``<brief>-2``, …; ``comparisons: []`` means none yet.
  A/B order is kept as given; (a, b) and (b, a) are the same pair.
- ``checklist``: ``predicates`` is required and not empty; ``automatic`` may be left out, null or
  ``""`` (no automatic answer); it is read case-insensitively, ``true`` is YES and ``false`` NO,
  and stored upper case. ``options.k`` is the raters per predicate (default 3).
- ``rating``: ``options.dimensions`` defaults to ``["overall"]`` (one overall rating);
  ``options.scale`` defaults to [1, 5] (integers, low < high, at most 101 points),
  ``options.margin`` to 0.5 (> 0).
- The options may also be given at the top level (``dimensions``, ``scale``, ``margin``, ``k``),
  as a reader of docs/bundle-kinds.md "Study bundles of the other kinds" alone may write them; the same key in
  both places is refused.
- ``pairwise`` comparisons may be written in docs/protocol.md "Files"'s shape: ``page`` for ``brief``, ``set``
  (``human`` only: these kinds have no deployment set), ``a``/``b`` naming a system that has an
  item in the brief instead of the item (an item id wins when a value is both). ``brief`` may be
  left out when ``a`` and ``b`` are items of one brief.
- Keys a kind does not use (``predicates`` in a rating bundle) are refused. docs/protocol.md "Files"'s
``axes``,
  ``pages`` and ``candidates`` are accepted only empty, and ignored; ``judge_prompt`` is kept
  (Study.judge_prompt) though no judge reads it for these kinds.
- Export writes every key in one canonical form with its default filled in (``judge_prompt`` only
  when not empty), so export → import → export is identical.

No Django import: plain data in, plain data out.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from annotation.kinds import DESIGNS, design_of
from annotation.kinds.checklist import DESIGN as CHECKLIST
from annotation.kinds.rating import DESIGN as RATING
from annotation.services.bundles.reference_format import (
    MAX_ID,
    SETTINGS_DEFAULTS,
    STUDY_JSON,
    SystemSpec,
    _Reader,
    _requirements,
    _rule,
    _type_name,
    crowd_to_json,
    parse_crowd,
    parse_render,
    parse_settings,
    parse_study_header,
    parse_systems,
    settings_to_json,
    truth_field,
)

KINDS = tuple(d.kind for d in DESIGNS.values() if not d.has_reference)
CHECKLIST_ANSWERS = ("YES", "NO", "UNCLEAR")
MAX_METRIC = 80
MAX_QUESTION_TYPE = 80
MAX_DIMENSION = 80
MAX_SCALE_POINTS = 101
DEFAULT_K = CHECKLIST.bundle_option_defaults["k"]
DEFAULT_SCALE = tuple(RATING.bundle_option_defaults["scale"])
DEFAULT_MARGIN = RATING.bundle_option_defaults["margin"]
DEFAULT_DIMENSIONS = ("overall",)
# docs/protocol.md "Files" keys of pairwise_reference bundles, accepted empty in these kinds and ignored.
REFERENCE_KEYS = ("axes", "pages", "candidates")
COMPARISON_SETS = ("human", "deployment")

# Box keys of a predicate box written as an object (docs/protocol.md "The study model"'s target shape); only
# the coordinates are kept.
BOX_KEYS = ("bbox_1000",)
BOX_OPTIONAL = ("role", "label", "description")


@dataclass(frozen=True)
class BriefSpec:
    id: str
    text: str
    # Verifiable requirements, canonical (docs/protocol.md "AesCode's rule score"); {} for none.
    requirements: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ItemSpec:
    id: str
    image: str
    brief: str
    system: str
    metrics: dict[str, float]
    # JSON path of this entry, for image errors found later (``$.items[3]``).
    where: str = ""
    # The output's rule score against its brief's requirements (docs/protocol.md "AesCode's rule score"); {} for none.
    rule: dict[str, Any] = field(default_factory=dict)
    # A rendered HTML output's page text and element boxes, as its render's DOM gave them (a kind that
    # keeps them: docs/protocol.md "The built-in local judge"); None for an image output.
    dom_blocks: dict[str, Any] | None = None


@dataclass(frozen=True)
class PredicateSpec:
    id: str
    item: str
    question: str
    boxes: tuple[tuple[float, float, float, float], ...]
    automatic: str | None
    type: str | None


@dataclass(frozen=True)
class PairSpec:
    """A ``pairwise`` comparison: two items of one brief, canonical A and B."""

    id: str
    brief: str
    a: str
    b: str


@dataclass(frozen=True)
class QuestionnaireStudySpec:
    slug: str
    title: str
    kind: str
    instructions_md: str
    systems: tuple[SystemSpec, ...]
    briefs: tuple[BriefSpec, ...]
    items: tuple[ItemSpec, ...]
    predicates: tuple[PredicateSpec, ...] = ()
    comparisons: tuple[PairSpec, ...] = ()
    # The kind's options with defaults filled in (stored in Study.options).
    options: dict[str, Any] = field(default_factory=dict)
    # Stored in Study.judge_prompt; no judge reads it for these kinds (judges need axes,
    # docs/protocol.md "Judges and calibration").
    judge_prompt: str = ""
    # Study.seed / hidden_repeats / min_gap / neutralize_media, defaults filled in.
    settings: dict[str, Any] = field(default_factory=lambda: dict(SETTINGS_DEFAULTS))
    # The crowd settings the bundle gives (``$.crowd``; the rest keep the model's defaults).
    crowd: dict[str, Any] = field(default_factory=dict)
    render: dict[str, Any] | None = None  # ``$.render``: as in a pairwise_reference bundle

    def image_paths(self) -> list[str]:
        """Every distinct image path the bundle names, in first-use order."""
        return list(dict.fromkeys(item.image for item in self.items))


def _number(r: _Reader, value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        r.fail(path, f"expected a number, got {_type_name(value)}")
    return value


def _integer(r: _Reader, value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        r.fail(path, f"expected an integer, got {_type_name(value)}")
    return value


def _top_level(r: _Reader, document: Any, kind: str) -> dict[str, Any]:
    if not isinstance(document, dict):
        r.fail("$", f"expected an object, got {_type_name(document)}")
    required, optional = design_of(kind).bundle_required, design_of(kind).bundle_optional
    for key in document:
        if key in REFERENCE_KEYS:
            if r.array(document[key], f"$.{key}"):
                r.fail(
                    f"$.{key}",
                    f"unknown key for kind {kind!r} unless empty ([]): {key!r} is for pairwise_reference bundles (docs/protocol.md \"Files\")",
                )
        elif key not in required and key not in optional and key != "render":
            r.fail(f"$.{key}", f"unknown key for kind {kind!r} (expected: {', '.join(required + optional)})")
    for key in required:
        if key not in document:
            r.fail(f"$.{key}", f"required key is missing (kind {kind!r})")
    return document


def _options(r: _Reader, kind: str, root: dict[str, Any]) -> dict[str, Any]:
    """The kind's options from ``$.options`` and the top level, merged, with defaults filled in."""
    keys = design_of(kind).bundle_options
    raw: dict[str, Any] = {}
    path: dict[str, str] = {}
    if "options" in root:
        for key, value in r.obj(root["options"], "$.options", (), keys).items():
            raw[key], path[key] = value, f"$.options.{key}"
    for key in keys:
        if key in root:
            if key in raw:
                r.fail(f"$.{key}", f"given both here and in $.options; give {key!r} once")
            raw[key], path[key] = root[key], f"$.{key}"
    if "k" in keys:
        k = _integer(r, raw.get("k", DEFAULT_K), path.get("k", "$.options.k"))
        if k < 1:
            r.fail(path["k"], f"raters per predicate must be at least 1, got {k}")
        # The pairwise study whose choices the checklist judges' Visual scores are set against
        # (docs/protocol.md "Judge reliability against people"): its slug.
        linked = raw.get("preference_study")
        if linked is None or linked == "":
            return {"k": k}
        slug = r.identifier(linked, path.get("preference_study", "$.options.preference_study"), max_length=80)
        return {"k": k, "preference_study": slug}
    if "scale" not in keys:
        return {}
    where = path.get("scale", "$.options.scale")
    ends = r.array(raw.get("scale", list(DEFAULT_SCALE)), where)
    if len(ends) != 2:
        r.fail(where, f"expected [low, high], got {len(ends)} values")
    low = _integer(r, ends[0], f"{where}[0]")
    high = _integer(r, ends[1], f"{where}[1]")
    if low >= high:
        r.fail(where, f"low ({low}) must be less than high ({high})")
    if high - low + 1 > MAX_SCALE_POINTS:
        r.fail(where, f"{high - low + 1} points, over the limit of {MAX_SCALE_POINTS}")
    where = path.get("dimensions", "$.options.dimensions")
    dimensions: list[str] = []
    for i, item in enumerate(r.array(raw.get("dimensions", list(DEFAULT_DIMENSIONS)), where)):
        name = r.identifier(item, f"{where}[{i}]", max_length=MAX_DIMENSION)
        if name in dimensions:
            r.fail(f"{where}[{i}]", f"duplicate dimension {name!r}")
        dimensions.append(name)
    if not dimensions:
        r.fail(where, "a rating study needs at least one dimension (leave it out for one 'overall')")
    where = path.get("margin", "$.options.margin")
    margin = _number(r, raw.get("margin", DEFAULT_MARGIN), where)
    if margin <= 0:
        r.fail(where, f"the equivalence margin must be positive, got {margin}")
    return {"scale": [low, high], "dimensions": dimensions, "margin": margin}


def _automatic(r: _Reader, value: Any, path: str) -> str | None:
    """An imported automatic answer: YES / NO / UNCLEAR in any case, true (YES), false (NO);
    null, left out or ``""`` for none. Stored upper case."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if not isinstance(value, str):
        r.fail(path, f'expected "YES", "NO", "UNCLEAR", true, false or null, got {_type_name(value)}')
    text = r.string(value, path).strip()
    if not text:
        return None
    if text.upper() not in CHECKLIST_ANSWERS:
        answers = ", ".join(CHECKLIST_ANSWERS)
        r.fail(path, f"{value!r} is not one of {answers} (any case), true, false or null")
    return text.upper()


def _box(r: _Reader, value: Any, path: str) -> Any:
    """``[x0, y0, x1, y1]`` in 0…1000, or docs/protocol.md "The study model"'s ``{bbox_1000: [...], role?,
    label?, description?}``."""
    if isinstance(value, dict):
        raw = r.obj(value, path, BOX_KEYS, BOX_OPTIONAL)
        for key in BOX_OPTIONAL:
            if key in raw:
                r.string(raw[key], f"{path}.{key}")
        return r.bbox(raw["bbox_1000"], f"{path}.bbox_1000")
    return r.bbox(value, path)


def questionnaire_spec_from_document(document: Any, *, filename: str = STUDY_JSON) -> QuestionnaireStudySpec:
    """Validate a parsed ``study.json`` of kind ``pairwise``, ``checklist`` or ``rating``
    (docs/bundle-kinds.md "Study bundles of the other kinds").

    Raises ValidationFailed on the first problem found, naming ``file $.json.path``.
    """
    r = _Reader(filename)
    kind = r.choice(document.get("kind") if isinstance(document, dict) else None, "$.kind", KINDS)
    design = design_of(kind)
    root = _top_level(r, document, kind)
    slug, title, kind, instructions = parse_study_header(r, root)
    options = _options(r, kind, root)
    judge_prompt = r.string(root.get("judge_prompt", ""), "$.judge_prompt")
    settings = parse_settings(r, root)
    crowd = parse_crowd(r, root)
    render = parse_render(r, root)

    systems = parse_systems(r, root)
    system_ids = {system.id: f"$.systems[{i}]" for i, system in enumerate(systems)}

    briefs: list[BriefSpec] = []
    brief_ids: dict[str, str] = {}
    for i, value in enumerate(r.array(root.get("briefs", []), "$.briefs")):
        where = f"$.briefs[{i}]"
        raw = r.obj(value, where, ("id", "text"), ("requirements",))
        brief_id = r.identifier(raw["id"], f"{where}.id")
        if brief_id in brief_ids:
            r.fail(f"{where}.id", f"duplicate brief id {brief_id!r} (first at {brief_ids[brief_id]})")
        brief_ids[brief_id] = where
        text = r.string(raw["text"], f"{where}.text", empty=not design.pairwise)
        requirements = _requirements(r, raw["requirements"], f"{where}.requirements") if "requirements" in raw else {}
        briefs.append(BriefSpec(id=brief_id, text=text, requirements=requirements))
    if not briefs and design.pairwise:
        r.fail("$.briefs", "a study needs at least one brief")

    items: list[ItemSpec] = []
    own_briefs: set[str] = set()  # briefs made for images given without one: no other item joins them
    item_at: dict[str, ItemSpec] = {}
    item_of: dict[tuple[str, str], ItemSpec] = {}  # (brief, system) → its item
    for i, value in enumerate(r.array(root["items"], "$.items")):
        where = f"$.items[{i}]"
        if design.pairwise:
            raw = r.obj(value, where, ("id", "image", "brief", "system"), ("metrics", "rule", "dom_blocks"))
        else:
            raw = r.obj(value, where, ("id", "image", "system"), ("brief", "metrics", "rule", "dom_blocks"))
        item_id = r.identifier(raw["id"], f"{where}.id")
        if item_id in item_at:
            r.fail(f"{where}.id", f"duplicate item id {item_id!r} (first at {item_at[item_id].where})")
        image = r.image_path(raw["image"], f"{where}.image")
        if raw.get("brief") is None and not design.pairwise:
            # A checklist or rating image without a brief is shown alone: it is its own brief
            # (id = the item id, no text), written out explicitly by the export.
            if item_id in brief_ids:
                r.fail(f"{where}.brief", f"left out, but brief {item_id!r} (the item's own id) is taken ({brief_ids[item_id]})")
            brief_ids[item_id] = where
            own_briefs.add(item_id)
            briefs.append(BriefSpec(id=item_id, text=""))
            brief_id = item_id
        else:
            brief_id = r.string(raw["brief"], f"{where}.brief", empty=False)
            if brief_id in own_briefs:
                r.fail(f"{where}.brief", f"{brief_id!r} is not a brief: item {brief_id!r} has no brief (declare it in $.briefs)")
        if brief_id not in brief_ids:
            r.fail(f"{where}.brief", f"unknown brief {brief_id!r}")
        system_id = r.string(raw["system"], f"{where}.system", empty=False)
        if system_id not in system_ids:
            r.fail(f"{where}.system", f"unknown system {system_id!r}")
        if (brief_id, system_id) in item_of:
            r.fail(
                f"{where}.system",
                f"brief {brief_id!r} already has an item of system {system_id!r} ({item_of[(brief_id, system_id)].where})",
            )
        metrics_raw = raw.get("metrics", {})
        if not isinstance(metrics_raw, dict):
            r.fail(f"{where}.metrics", f"expected an object {{name: score}}, got {_type_name(metrics_raw)}")
        metrics: dict[str, float] = {}
        for name, score in metrics_raw.items():
            r.identifier(name, f"{where}.metrics", max_length=MAX_METRIC)
            metrics[name] = _number(r, score, f"{where}.metrics.{name}")
        rule = _rule(r, raw["rule"], f"{where}.rule") if raw.get("rule") else {}
        dom_blocks = truth_field(r, raw.get("dom_blocks"), f"{where}.dom_blocks", page_text=True)
        item = ItemSpec(
            id=item_id, image=image, brief=brief_id, system=system_id, metrics=metrics, where=where, rule=rule,
            dom_blocks=dom_blocks,
        )
        item_at[item_id] = item
        item_of[(brief_id, system_id)] = item
        items.append(item)
    if not items:
        r.fail("$.items", "a study needs at least one item")

    predicates: list[PredicateSpec] = []
    predicate_ids: dict[str, str] = {}
    for i, value in enumerate(r.array(root.get("predicates", []), "$.predicates")):
        where = f"$.predicates[{i}]"
        raw = r.obj(value, where, ("id", "item", "question"), ("boxes", "automatic", "type"))
        predicate_id = r.identifier(raw["id"], f"{where}.id")
        if predicate_id in predicate_ids:
            r.fail(f"{where}.id", f"duplicate predicate id {predicate_id!r} (first at {predicate_ids[predicate_id]})")
        predicate_ids[predicate_id] = where
        item_id = r.string(raw["item"], f"{where}.item", empty=False)
        if item_id not in item_at:
            r.fail(f"{where}.item", f"unknown item {item_id!r}")
        boxes = tuple(
            _box(r, box, f"{where}.boxes[{j}]") for j, box in enumerate(r.array(raw.get("boxes", []), f"{where}.boxes"))
        )
        automatic = _automatic(r, raw.get("automatic"), f"{where}.automatic")
        question_type = raw.get("type")
        if question_type is not None:
            question_type = r.string(question_type, f"{where}.type", max_length=MAX_QUESTION_TYPE, empty=False)
        predicates.append(
            PredicateSpec(
                id=predicate_id,
                item=item_id,
                question=r.string(raw["question"], f"{where}.question", empty=False),
                boxes=boxes,
                automatic=automatic,
                type=question_type,
            )
        )
    if "predicates" in design.bundle_required and not predicates:
        r.fail("$.predicates", "a checklist study needs at least one predicate")

    comparisons: list[PairSpec] = []
    if design.pairwise and "comparisons" not in root:
        comparisons = _all_pairs(r, briefs, items)
    comparison_ids: dict[str, str] = {}
    pairs: dict[frozenset[str], str] = {}
    for i, value in enumerate(r.array(root.get("comparisons", []), "$.comparisons")):
        where = f"$.comparisons[{i}]"
        raw = r.obj(value, where, ("id", "a", "b"), ("brief", "page", "set"))
        comparison_id = r.identifier(raw["id"], f"{where}.id")
        if comparison_id in comparison_ids:
            r.fail(f"{where}.id", f"duplicate comparison id {comparison_id!r} (first at {comparison_ids[comparison_id]})")
        comparison_ids[comparison_id] = where
        if "set" in raw:
            comparison_set = r.choice(raw["set"], f"{where}.set", COMPARISON_SETS)
            if comparison_set != "human":
                r.fail(
                    f"{where}.set",
                    f"{comparison_set!r}: a {kind} study has no deployment set; its comparisons are all 'human'",
                )
        if "brief" in raw and "page" in raw:
            r.fail(f"{where}.page", "give the brief once, as 'brief' or as 'page' (the name in docs/protocol.md \"Files\"), not both")
        brief_key = "page" if "page" in raw else "brief"
        if brief_key in raw:
            brief_id = r.string(raw[brief_key], f"{where}.{brief_key}", empty=False)
            if brief_id not in brief_ids:
                r.fail(f"{where}.{brief_key}", f"unknown brief {brief_id!r}")
            sides = {
                side: _side(r, raw[side], f"{where}.{side}", brief_id, item_at, item_of, system_ids)
                for side in ("a", "b")
            }
        else:
            sides = {}
            for side in ("a", "b"):
                item_id = r.string(raw[side], f"{where}.{side}", empty=False)
                if item_id not in item_at:
                    r.fail(
                        f"{where}.{side}",
                        f"unknown item {item_id!r} (a system id needs the comparison's 'brief' or 'page')",
                    )
                sides[side] = item_id
            brief_id = item_at[sides["a"]].brief
            if item_at[sides["b"]].brief != brief_id:
                r.fail(
                    f"{where}.b",
                    f"item {sides['b']!r} belongs to brief {item_at[sides['b']].brief!r}, not {brief_id!r} (the brief of "
                    f"item {sides['a']!r}); a comparison pairs two items of one brief",
                )
        if sides["a"] == sides["b"]:
            r.fail(f"{where}.b", f"a comparison needs two different items, got {sides['a']!r} twice")
        pair = frozenset(sides.values())
        if pair in pairs:
            r.fail(where, f"duplicate pair {sides['a']!r}/{sides['b']!r} (first at {pairs[pair]}; A/B order does not make a new pair)")
        pairs[pair] = where
        comparisons.append(PairSpec(id=comparison_id, brief=brief_id, a=sides["a"], b=sides["b"]))

    return QuestionnaireStudySpec(
        slug=slug,
        title=title,
        kind=kind,
        instructions_md=instructions,
        systems=tuple(systems),
        briefs=tuple(briefs),
        items=tuple(items),
        predicates=tuple(predicates),
        comparisons=tuple(comparisons),
        options=options,
        judge_prompt=judge_prompt,
        settings=settings,
        crowd=crowd,
        render=render,
    )


def _side(
    r: _Reader,
    value: Any,
    path: str,
    brief_id: str,
    item_at: dict[str, ItemSpec],
    item_of: dict[tuple[str, str], ItemSpec],
    system_ids: Collection[str],
) -> str:
    """The item a comparison's ``a`` or ``b`` names in a known brief: an item id, or
    (docs/protocol.md "Files"'s shape) a system id with an item in that brief. An item id wins when the value
    is both."""
    name = r.string(value, path, empty=False)
    if name in item_at:
        if item_at[name].brief != brief_id:
            r.fail(
                path,
                f"item {name!r} belongs to brief {item_at[name].brief!r}, not {brief_id!r}; "
                "a comparison pairs two items of one brief",
            )
        return name
    if (brief_id, name) in item_of:
        return item_of[(brief_id, name)].id
    if name in system_ids:
        r.fail(path, f"system {name!r} has no item in brief {brief_id!r}")
    r.fail(path, f"unknown item {name!r} (nor a system with an item in brief {brief_id!r})")


def _all_pairs(r: _Reader, briefs: list[BriefSpec], items: list[ItemSpec]) -> list[PairSpec]:
    """Every pair of items of each brief, in item order (``comparisons`` left out of a pairwise bundle)."""
    pairs: list[PairSpec] = []
    for brief in briefs:
        members = [item.id for item in items if item.brief == brief.id]
        n = 0
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                n += 1
                # Unique: the suffix after the last '-' is a number, so "<brief>-<n>" names one brief.
                pair_id = f"{brief.id}-{n}"
                if len(pair_id) > MAX_ID:
                    r.fail("$.comparisons", f"brief id {brief.id!r} is too long to name its comparisons; list them")
                pairs.append(PairSpec(id=pair_id, brief=brief.id, a=a, b=b))
    return pairs


def questionnaire_spec_to_json(spec: QuestionnaireStudySpec) -> dict[str, Any]:
    """The ``study.json`` object of a study of another kind; the inverse of :func:`questionnaire_spec_from_document`."""
    document: dict[str, Any] = {
        "slug": spec.slug,
        "title": spec.title,
        "kind": spec.kind,
        "instructions_md": spec.instructions_md,
        "systems": [{"id": s.id, "name": s.name} for s in spec.systems],
        "briefs": [
            {"id": b.id, "text": b.text, **({"requirements": b.requirements} if b.requirements else {})}
            for b in spec.briefs
        ],
        "items": [
            {
                "id": i.id, "image": i.image, "brief": i.brief, "system": i.system, "metrics": dict(i.metrics),
                **({"rule": i.rule} if i.rule else {}),
                **({"dom_blocks": i.dom_blocks} if i.dom_blocks is not None else {}),
            }
            for i in spec.items
        ],
    }
    design = design_of(spec.kind)
    if "predicates" in design.bundle_required:
        predicates = []
        for p in spec.predicates:
            entry: dict[str, Any] = {
                "id": p.id,
                "item": p.item,
                "question": p.question,
                "boxes": [list(box) for box in p.boxes],
                "automatic": p.automatic,
            }
            if p.type is not None:
                entry["type"] = p.type
            predicates.append(entry)
        document["predicates"] = predicates
    if design.pairwise:
        document["comparisons"] = [{"id": c.id, "brief": c.brief, "a": c.a, "b": c.b} for c in spec.comparisons]
    if "options" in design.bundle_optional:
        document["options"] = dict(spec.options)
    if spec.judge_prompt:
        document["judge_prompt"] = spec.judge_prompt
    settings = settings_to_json(spec.settings)
    if settings is not None:
        document["settings"] = settings
    crowd = crowd_to_json(spec.crowd)
    if crowd is not None:
        document["crowd"] = crowd
    if spec.render is not None:
        document["render"] = spec.render
    return document
