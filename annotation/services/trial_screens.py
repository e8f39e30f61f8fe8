"""What a trial's screen reads, stored on the trial row (``Trial.screen``), so showing or answering
a trial joins nothing (decision 0079; the Django docs' performance advice: denormalize what every
request reads).

A trial's screen needs its unit's images, the page's active axes with their targets, the pages'
block geometry, the reference's size and, for the other kinds, the brief, the predicate's question
and boxes. They are read once, in one query over the trials' units, when the trials are made
(``trial_screens_fill``), and kept on the row as one JSON value. A trial made without them (a
serve-time trial before its comparison is chosen, a trial whose screen was forgotten) gets them
the first time it is shown (``trial_screen_ensure``). What the rater already saw is never
rewritten: when a study's images or axes change (a bundle update, the display-image pass), the
screens of the trials not shown yet are forgotten (``trial_screens_forget``) and made again when
shown.

The value is the server's: it holds the stored file names of the trial's images (for the image
pass, never sent to the rater) and only what the rater is shown besides. It names no system,
candidate or page, and a gold trial's or a hidden repeat's value has the same keys as a data
trial's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Q

from annotation.kinds import design_of
from annotation.models import Axis, AxisScope, Trial, axis_title

# Bumped when the value's shape changes: a stored value of another shape is made again when shown.
SCREEN_VERSION = 1
FILL_BATCH = 500
UPDATE_IDS = 5000  # ids in one UPDATE's IN list (SQLite's bound on a statement's parameters)

# What a trial's screen is made of besides its study's axes and design (``screen_of``): trials
# equal in these have equal screens. The trial's own id first.
_SCREEN_INPUTS = (
    "pk",
    "assignment__block__study_id",
    "comparison_id",
    "candidate_id",
    "predicate_id",
    "swapped",
    "gold_image_id",
    "gold_match_image_id",
)

# What building a screen joins of a trial's unit (every shape: a trial has one unit).
_UNIT_RELATED = (
    "assignment__block__study",
    "comparison__page__image",
    "comparison__page__neutralized_image",
    "comparison__candidate_a__image",
    "comparison__candidate_a__neutralized_image",
    "comparison__candidate_b__image",
    "comparison__candidate_b__neutralized_image",
    "candidate__page",
    "candidate__image",
    "candidate__neutralized_image",
    "predicate__candidate__page",
    "predicate__candidate__image",
    "predicate__candidate__neutralized_image",
    "gold_image",
    "gold_match_image",
)
BLOCK_TYPES = frozenset({"title", "text", "list", "table", "formula", "figure"})


def blocks_attribute(blocks: Any) -> str:
    """A page's blocks as the trial page reads them (``data-blocks``, static/annotation/trial.js):
    ``[[type, y0, y1], ...]`` in thousandths of the page's height, geometry only (never a block's
    text); empty when the page has none."""
    out = []
    for block in blocks if isinstance(blocks, list) else []:
        box = block.get("bbox_1000") if isinstance(block, dict) else None
        if block.get("type") in BLOCK_TYPES and isinstance(box, list) and len(box) == 4:
            try:
                out.append([block["type"], round(float(box[1]), 1), round(float(box[3]), 1)])
            except (TypeError, ValueError):
                continue
    return json.dumps(out, separators=(",", ":")) if out else ""


def _file(holder: Any, neutralized: bool) -> str | None:
    """A page's or candidate's display file; ``neutralized``: its media-neutralized variant when it has one."""
    if holder is None:
        return None
    image = (holder.neutralized_image if neutralized else None) or holder.image
    return _name(image)


def _name(image: Any) -> str | None:
    """A stored image's file name (its content hash), as the image view opens it."""
    return (image.file.name or None) if image is not None else None


def _slot_files(trial: Any, *, neutralized: bool) -> dict[str, str]:
    """slot → stored file: ``ref`` / ``left`` / ``right``, or ``item``. ``left`` is what the rater
    sees as "A": canonical B when the trial is swapped (docs/protocol.md "Canonical answers"). A
    gold trial's canonical A is the reference's copy (older trials: the reference), B the degraded
    copy."""
    if trial.comparison_id is None:
        candidate = trial.predicate.candidate if trial.predicate_id else trial.candidate
        item = _file(candidate, neutralized)
        return {"item": item} if item else {}
    comparison = trial.comparison
    ref = _file(comparison.page, neutralized)
    if trial.gold_image_id:
        a = _name(trial.gold_match_image) or ref
        b = _name(trial.gold_image)
    else:
        a, b = _file(comparison.candidate_a, neutralized), _file(comparison.candidate_b, neutralized)
    left, right = (b, a) if trial.swapped else (a, b)
    return {k: v for k, v in (("ref", ref), ("left", left), ("right", right)) if v}


def _active_axes(page: Any, axes: list[Axis]) -> list[dict[str, Any]]:
    """The page's active axes (docs/protocol.md "The study model"): fixed ones always, conditional
    ones when the page has a target for them; each with its description and its targets."""
    targeted = {t.get("axis") for t in page.targets or []}
    out = []
    for axis in axes:
        if axis.scope != AxisScope.FIXED and axis.axis_id not in targeted:
            continue
        targets = [
            {
                "role": str(t.get("role", "")),
                "description": str(t.get("description", "")),
                "bbox_1000": [float(v) for v in t.get("bbox_1000", [])][:4],
            }
            for t in page.targets or []
            if t.get("axis") == axis.axis_id and len(t.get("bbox_1000") or []) == 4
        ]
        out.append(
            {
                "id": axis.axis_id,
                "title": axis_title(axis.axis_id, axis.title),
                "scope": axis.scope,
                "description": axis.description,
                "targets": targets,
            }
        )
    return out


def screen_of(trial: Trial, axes: list[Axis]) -> dict[str, Any]:
    """A trial's stored screen, from the trial read with its unit (``_UNIT_RELATED``) and its
    study's axes in order."""
    design = design_of(trial.assignment.block.study)
    comparison = trial.comparison
    if comparison is not None:
        page = comparison.page
    else:
        page = (trial.predicate.candidate if trial.predicate_id else trial.candidate).page  # type: ignore[union-attr]
    blocks: dict[str, str] = {}
    ref_size = None
    if comparison is not None:
        a, b = comparison.candidate_a.blocks, comparison.candidate_b.blocks
        left, right = (b, a) if trial.swapped else (a, b)
        blocks = {
            "ref": blocks_attribute(page.blocks),
            "left": blocks_attribute(left),
            "right": blocks_attribute(right),
        }
        if design.has_reference and page.image is not None:
            ref_size = [page.image.width, page.image.height]
    predicate = trial.predicate
    return {
        "v": SCREEN_VERSION,
        "files": _slot_files(trial, neutralized=False),
        "neutralized_files": _slot_files(trial, neutralized=True),
        "axes": _active_axes(page, axes) if design.has_axes else [],
        "blocks": blocks,
        "ref_size": ref_size,
        "brief": "" if design.has_reference else (page.text or ""),
        "question": predicate.question if predicate else "",
        "boxes": [[float(v) for v in box] for box in (predicate.boxes if predicate else []) if len(box) == 4],
    }


def _axes_by_study(study_ids: Iterable[int], axis_model: Any = Axis) -> dict[int, list[Axis]]:
    found: dict[int, list[Axis]] = defaultdict(list)
    for axis in axis_model.objects.filter(study_id__in=set(study_ids)).order_by("study_id", "position"):
        found[axis.study_id].append(axis)
    return found


def trial_screens_fill(
    trial_ids: Iterable[int] | None = None,
    *,
    block_id: int | None = None,
    study_id: int | None = None,
    trial_model: Any = Trial,
    axis_model: Any = Axis,
) -> int:
    """Store the screen of each trial given, or of every trial without one (of a block, of a study,
    or of all). Returns how many were stored. ``trial_model``, ``axis_model``: a migration's
    historical models.

    A screen depends on the trial's study, unit, side and gold images only, never on its rater, so
    the trials that share those (every rater's copy of a comparison, on each side) share one screen:
    it is built once, from one read of one of them, and stored on all of them by one UPDATE.
    """
    trials = trial_model.objects.filter(
        Q(comparison__isnull=False) | Q(candidate__isnull=False) | Q(predicate__isnull=False)
    )
    if trial_ids is not None:
        trials = trials.filter(pk__in=list(trial_ids))
    else:
        trials = trials.filter(screen__isnull=True)
        if block_id is not None:
            trials = trials.filter(assignment__block_id=block_id)
        if study_id is not None:
            trials = trials.filter(assignment__block__study_id=study_id)
    shared: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for pk, *key in trials.order_by("pk").values_list(*_SCREEN_INPUTS):
        shared[tuple(key)].append(pk)
    groups = list(shared.values())
    stored = 0
    for start in range(0, len(groups), FILL_BATCH):
        chunk = groups[start : start + FILL_BATCH]
        firsts = {
            trial.pk: trial
            for trial in trial_model.objects.filter(pk__in=[pks[0] for pks in chunk])
            .select_related(*_UNIT_RELATED)
            .order_by()
        }
        axes = _axes_by_study((t.assignment.block.study_id for t in firsts.values()), axis_model)
        for pks in chunk:
            first = firsts[pks[0]]
            screen = screen_of(first, axes[first.assignment.block.study_id])
            for at in range(0, len(pks), UPDATE_IDS):
                trial_model.objects.filter(pk__in=pks[at : at + UPDATE_IDS]).update(screen=screen)
            stored += len(pks)
    return stored


def trial_screen_ensure(trial_id: int, stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A trial's screen: ``stored`` when it is current, else built now and stored
    (``trial_screen_build``). None: the trial has no unit (an unserved serve-time trial)."""
    if stored is not None and stored.get("v") == SCREEN_VERSION:
        return dict(stored)
    return trial_screen_build(trial_id)[1]


def trial_screen_build(trial_id: int) -> tuple[Trial | None, dict[str, Any] | None]:
    """Build a trial's screen now and store it (a serve-time trial reached, a forgotten screen): the
    trial as read with its unit (its row as it now stands), and the screen (None without a unit)."""
    trial = Trial.objects.filter(pk=trial_id).select_related(*_UNIT_RELATED).order_by().first()
    if trial is None or (
        trial.comparison_id is None and trial.candidate_id is None and trial.predicate_id is None
    ):
        return trial, None
    screen = screen_of(
        trial, _axes_by_study([trial.assignment.block.study_id])[trial.assignment.block.study_id]
    )
    Trial.objects.filter(pk=trial_id).update(screen=screen)
    return trial, screen


def trial_screens_forget(study_id: int) -> int:
    """Forget the stored screens of a study's trials not shown yet (its images or axes changed):
    each is made again when it is shown. What a rater already saw is kept."""
    return Trial.objects.filter(
        assignment__block__study_id=study_id, shown_at__isnull=True, screen__isnull=False
    ).update(screen=None)
