"""Human votes CSV of the other study kinds (SPEC §11 "votes exports gain the kind's answer columns").

The ``pairwise``, ``checklist`` and ``rating`` kinds run on the same blocks, assignments and
trials as ``pairwise_reference`` (docs/study-kinds.md), so their votes CSV follows the SPEC §8
rules of ``annotation.services.votes`` (whose helpers it uses): the whole file is validated before
anything is written, the import is all-or-nothing, an error is one line naming the file, the line
and the field, and an export imports again unchanged into a study without those votes. Only the
columns differ (``kind_votes_columns``):

- ``pairwise``: ``comparison, brief, item_a, item_b, system_a, system_b, block, rater, position,
  swapped, repeat, attention, label, confidence, rationale, response_ms``; the label is canonical
  (``A``/``B``/``TIE``/``CANNOT_JUDGE``), confidence 1–5 (may be empty for ``CANNOT_JUDGE``).
- ``checklist``: ``predicate, item, brief, system, block, rater, position, repeat, attention,
  label, evidence, response_ms``; label ``YES``/``NO``/``UNCLEAR``, a non-blank evidence note
  (stored in ``Vote.rationale``).
- ``rating``: ``item, brief, system, block, rater, position, repeat, attention, response_ms``, then
  one ``rating:<dimension>`` column per dimension of ``Study.options["dimensions"]`` in that
  order, each an integer on the study's scale (``Vote.answers = {"ratings": {...}}``).

Decisions where the SPEC is silent (beside those of ``annotation.services.votes``, which hold
unchanged: what a file creates, reuse of a rater's planned live assignment, slots, one main vote
and at most one hidden repeat per rater × unit, a repeat needs its main vote, stored votes never
overwritten, voided assignments not exported):

- The unit column (``comparison`` / ``predicate`` / ``item``) names the unit by its bundle id;
  the other identity columns (``brief``, ``item``, ``item_a``/``item_b``, ``system``,
  ``system_a``/``system_b``) repeat what the study says about it, so a file read by a person or
  another tool carries its context; on import they must agree with the study.
- A unit belongs to one block of the study, as SPEC §2's blocks are disjoint for every kind (the
  kinds scheduler draws disjoint blocks too).
- ``attention`` is the trial's ``attention_expected``: empty for a data trial, otherwise the
  answer the instructed-response attention check told the rater to give, as displayed
  (``A``/``B``/``TIE``; ``YES``/``NO``/``UNCLEAR``; one value of the scale for ``rating``).
  Attention-check rows are exported and imported, so the hygiene rules (SPEC §11) see the same
  checks after a round trip. A check row is never a hidden repeat (``repeat`` must be 0), does not
  count as the rater's main vote on its unit (a rater may also have a data vote on that unit),
  and its answer is checked like any answer of the kind (a failed check is still an answer).
- ``swapped`` exists only for ``pairwise`` (the other kinds show one image); their trials are
  never swapped.
- Column order in a file is free (the header names the columns); an export writes the order
  above. Labels are case-sensitive canonical values, as in SPEC §8.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.models import (
    PAIRWISE_LABELS,
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Candidate,
    ChecklistAnswer,
    Comparison,
    Label,
    Predicate,
    Rater,
    Study,
    StudyKind,
    Trial,
    Vote,
)
from annotation.services.audit import audit_record
from annotation.services.votes import (
    _MAX_DB_INT,
    VOTES_BASE_COLUMNS,
    VotesImportResult,
    _flag,
    _int,
    _Problems,
    _read_csv,
    _uint,
    _write_csv,
)

PAIRWISE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "brief",
    "item_a",
    "item_b",
    "system_a",
    "system_b",
    "block",
    "rater",
    "position",
    "swapped",
    "repeat",
    "attention",
    "label",
    "confidence",
    "rationale",
    "response_ms",
)
CHECKLIST_COLUMNS: tuple[str, ...] = (
    "predicate",
    "item",
    "brief",
    "system",
    "block",
    "rater",
    "position",
    "repeat",
    "attention",
    "label",
    "evidence",
    "response_ms",
)
RATING_BASE_COLUMNS: tuple[str, ...] = (
    "item",
    "brief",
    "system",
    "block",
    "rater",
    "position",
    "repeat",
    "attention",
    "response_ms",
)
RATING_PREFIX = "rating:"
CHECKLIST_LABELS: tuple[str, ...] = (ChecklistAnswer.YES, ChecklistAnswer.NO, ChecklistAnswer.UNCLEAR)
# The answers an attention check may ask for, as displayed (docs/study-kinds.md); rating: the scale.
PAIRWISE_ATTENTION: tuple[str, ...] = (Label.A, Label.B, Label.TIE)
_TEXT_COLUMNS = ("rationale", "evidence")  # free text, kept exactly as written
_DEFAULT_SCALE = (1, 5)
_UNIT_COLUMN = {StudyKind.PAIRWISE: "comparison", StudyKind.CHECKLIST: "predicate", StudyKind.RATING: "item"}
# The Trial / BlockItem foreign key naming the unit of each kind.
_UNIT_FIELD = {
    StudyKind.PAIRWISE: "comparison",
    StudyKind.CHECKLIST: "predicate",
    StudyKind.RATING: "candidate",
}


def rating_dimensions(study: Study) -> list[str]:
    return [str(d) for d in (study.options or {}).get("dimensions") or []]


def rating_scale(study: Study) -> tuple[int, int]:
    scale = (study.options or {}).get("scale") or _DEFAULT_SCALE
    return int(scale[0]), int(scale[1])


def kind_votes_columns(study: Study) -> list[str]:
    """The votes CSV columns of ``study``'s kind, in export order."""
    if study.kind == StudyKind.PAIRWISE:
        return list(PAIRWISE_COLUMNS)
    if study.kind == StudyKind.CHECKLIST:
        return list(CHECKLIST_COLUMNS)
    if study.kind == StudyKind.RATING:
        return [*RATING_BASE_COLUMNS, *(RATING_PREFIX + d for d in rating_dimensions(study))]
    raise ArbiterError(
        f"study '{study.slug}' is a {study.kind} study; its votes CSV is the SPEC §8 one (votes_import_csv)"
    )


@dataclass(frozen=True)
class _Unit:
    """What a trial shows: its primary key, bundle id and the identity columns that describe it."""

    pk: int
    external_id: str
    identity: dict[str, str]


@dataclass
class _Row:
    """One parsed CSV row, checked against itself (not yet against the other rows or the DB)."""

    line: int
    unit: _Unit
    block: str
    rater: str
    position: int
    swapped: bool
    is_repeat: bool
    attention: str
    label: str
    confidence: int | None
    rationale: str
    answers: dict[str, Any]
    response_ms: int | None
    trial: Trial | None = None  # an existing unanswered trial this row answers
    new_trial: Trial | None = None

    @property
    def is_check(self) -> bool:
        return self.attention != ""


@dataclass
class _Kind:
    """The study's kind as the importer sees it."""

    study: Study
    unit_column: str = field(init=False)
    unit_field: str = field(init=False)
    columns: list[str] = field(init=False)
    dimensions: list[str] = field(init=False)
    scale: tuple[int, int] = field(init=False)

    def __post_init__(self) -> None:
        kind = StudyKind(self.study.kind)
        self.columns = kind_votes_columns(self.study)
        self.unit_column = _UNIT_COLUMN[kind]
        self.unit_field = _UNIT_FIELD[kind]
        self.dimensions = rating_dimensions(self.study) if kind == StudyKind.RATING else []
        self.scale = rating_scale(self.study) if kind == StudyKind.RATING else _DEFAULT_SCALE

    @property
    def pairwise(self) -> bool:
        return self.study.kind == StudyKind.PAIRWISE

    def attention_answers(self) -> tuple[str, ...]:
        if self.study.kind == StudyKind.PAIRWISE:
            return PAIRWISE_ATTENTION
        if self.study.kind == StudyKind.CHECKLIST:
            return CHECKLIST_LABELS
        low, high = self.scale
        return tuple(str(v) for v in range(low, high + 1))

    def units(self) -> dict[str, _Unit]:
        """The study's units by bundle id, with their identity columns."""
        study = self.study
        if study.kind == StudyKind.PAIRWISE:
            return {
                c.external_id: _Unit(
                    c.pk,
                    c.external_id,
                    {
                        "brief": c.page.external_id,
                        "item_a": c.candidate_a.external_id,
                        "item_b": c.candidate_b.external_id,
                        "system_a": c.candidate_a.system.external_id,
                        "system_b": c.candidate_b.system.external_id,
                    },
                )
                for c in Comparison.objects.filter(study=study).select_related(
                    "page", "candidate_a__system", "candidate_b__system"
                )
            }
        if study.kind == StudyKind.CHECKLIST:
            return {
                p.external_id: _Unit(
                    p.pk,
                    p.external_id,
                    {
                        "item": p.candidate.external_id,
                        "brief": p.candidate.page.external_id,
                        "system": p.candidate.system.external_id,
                    },
                )
                for p in Predicate.objects.filter(study=study).select_related(
                    "candidate__page", "candidate__system"
                )
            }
        return {
            c.external_id: _Unit(
                c.pk, c.external_id, {"brief": c.page.external_id, "system": c.system.external_id}
            )
            for c in Candidate.objects.filter(page__study=study)
            .exclude(external_id="")
            .select_related("page", "system")
        }


# --------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------


def kind_votes_import_csv(*, study: Study, path: Path, user: Any = None) -> VotesImportResult:
    """Import a votes CSV of a ``pairwise``, ``checklist`` or ``rating`` study: all rows or nothing.

    Raises ``ValidationFailed`` (one line: file, line, field) on the first problem found after
    checking every row, and writes nothing in that case. Records an ``AuditEvent``
    (``votes.import``) on success.
    """
    path = Path(path)
    name = path.name or "votes.csv"
    kind = _Kind(study)
    header, records = _read_csv(path, name)
    _check_header(header, kind, name)
    try:
        with transaction.atomic():
            # Serializes concurrent imports into one study (slots, block items, positions).
            list(Study.objects.select_for_update().filter(pk=study.pk).values_list("pk", flat=True))
            result = _import(kind=kind, header=header, records=records, name=name)
            audit_record(action="votes.import", user=user, study=study, target=name, **result.as_dict())
    except IntegrityError as exc:  # a concurrent writer took a slot / position first
        raise Conflict(f"{name}: the study changed while importing ({exc}); run the import again") from None
    return result


def _column_owner(col: str) -> str | None:
    """The votes CSV (by study kind) a column belongs to, for a header of another kind."""
    if col.startswith(RATING_PREFIX):
        return StudyKind.RATING
    for kind, columns in ((StudyKind.CHECKLIST, CHECKLIST_COLUMNS), (StudyKind.PAIRWISE, PAIRWISE_COLUMNS)):
        if col in columns:
            return kind
    if col.startswith("axis:") or col in VOTES_BASE_COLUMNS:
        return StudyKind.PAIRWISE_REFERENCE
    return None


def _check_header(header: list[str], kind: _Kind, name: str) -> None:
    study = kind.study
    expected = kind.columns
    seen: set[str] = set()
    for col in header:
        if col in seen:
            raise ValidationFailed(f"{name} line 1, field '{col}': the column appears twice")
        seen.add(col)
        if col in expected:
            continue
        if col.startswith(RATING_PREFIX) and study.kind == StudyKind.RATING:
            known = ", ".join(kind.dimensions) or "none"
            raise ValidationFailed(
                f"{name} line 1, field '{col}': unknown rating column (the study's dimensions: {known})"
            )
        owner = _column_owner(col)
        where = (
            f"a column of the {owner} votes CSV, but study '{study.slug}' is a {study.kind} study"
            if owner
            else ("unknown column")
        )
        raise ValidationFailed(f"{name} line 1, field '{col}': {where} (expected {', '.join(expected)})")
    for col in expected:
        if col not in seen:
            raise ValidationFailed(f"{name} line 1, field '{col}': missing required column")


def _parse_rows(
    *, kind: _Kind, header: list[str], records: list[tuple[int, list[str]]], problems: _Problems
) -> list[_Row]:
    """Row-local checks: identities, values, answers of the kind. Returns the rows that passed."""
    study = kind.study
    units = kind.units()
    attention_answers = kind.attention_answers()
    low, high = kind.scale
    rows: list[_Row] = []
    width = len(header)
    for line, fields in records:
        if len(fields) != width:
            problems.add_line(line, f"expected {width} fields as in the header, got {len(fields)}")
            continue
        raw = dict(zip(header, fields, strict=True))
        value = {k: (v if k in _TEXT_COLUMNS else v.strip()) for k, v in raw.items()}
        n_before = len(problems.items)

        shown = value[kind.unit_column]
        unit = units.get(shown)
        if unit is None:
            problems.add(
                line,
                kind.unit_column,
                f"unknown {kind.unit_column} {shown!r} in study '{study.slug}'"
                if shown
                else f"empty; expected a {kind.unit_column} id",
            )
        else:
            for col, want in unit.identity.items():
                if value[col] != want:
                    problems.add(
                        line,
                        col,
                        f"{kind.unit_column} '{unit.external_id}' has {col} {want!r}, got {value[col]!r}",
                    )
        if not value["block"]:
            problems.add(line, "block", "empty; expected a block name")
        elif len(value["block"]) > Block._meta.get_field("name").max_length:  # type: ignore[operator]
            problems.add(line, "block", "longer than 80 characters")
        if not value["rater"]:
            problems.add(line, "rater", "empty; expected a rater id")
        elif len(value["rater"]) > Rater._meta.get_field("external_id").max_length:  # type: ignore[operator]
            problems.add(line, "rater", "longer than 200 characters")
        position = _uint(value["position"])
        if position is None or position > _MAX_DB_INT:
            problems.add(line, "position", f"expected a non-negative integer, got {value['position']!r}")
        swapped: bool | None = False
        if kind.pairwise:
            swapped = _flag(value["swapped"])
            if swapped is None:
                problems.add(line, "swapped", f"expected 0 or 1, got {value['swapped']!r}")
        is_repeat = _flag(value["repeat"])
        if is_repeat is None:
            problems.add(line, "repeat", f"expected 0 or 1, got {value['repeat']!r}")
        attention = value["attention"]
        if attention and study.kind == StudyKind.RATING and _int(attention) is not None:
            attention = str(_int(attention))  # "+3" / "03" → "3", as the scheduler writes it
        if attention and attention not in attention_answers:
            what = (
                f"an integer {low}–{high}"
                if study.kind == StudyKind.RATING
                else f"one of {', '.join(attention_answers)}"
            )
            problems.add(
                line,
                "attention",
                f"expected empty (a data trial) or {what} (the answer an attention check asks for), got {attention!r}",
            )
        elif attention and is_repeat:
            problems.add(
                line,
                "repeat",
                f"an attention check (attention {attention!r}) is never a hidden repeat; expected 0",
            )
        response_ms: int | None = None
        if value["response_ms"] != "":
            response_ms = _uint(value["response_ms"])
            if response_ms is None or response_ms > _MAX_DB_INT:
                problems.add(
                    line,
                    "response_ms",
                    f"expected a non-negative integer or empty, got {value['response_ms']!r}",
                )

        label, rationale = "", ""
        confidence: int | None = None
        answers: dict[str, Any] = {}
        if study.kind == StudyKind.PAIRWISE:
            label = value["label"]
            if label not in PAIRWISE_LABELS:
                problems.add(line, "label", f"expected one of {', '.join(PAIRWISE_LABELS)}, got {label!r}")
            if not (value["confidence"] == "" and label == Label.CANNOT_JUDGE):
                conf = _int(value["confidence"])
                if conf is None or not 1 <= conf <= 5:
                    problems.add(line, "confidence", f"expected an integer 1–5, got {value['confidence']!r}")
                else:
                    confidence = conf
            rationale = raw["rationale"]
        elif study.kind == StudyKind.CHECKLIST:
            label = value["label"]
            if label not in CHECKLIST_LABELS:
                problems.add(line, "label", f"expected one of {', '.join(CHECKLIST_LABELS)}, got {label!r}")
            rationale = raw["evidence"]
            if not rationale.strip():
                problems.add(line, "evidence", "empty; a checklist answer needs an evidence note")
        else:
            ratings: dict[str, int] = {}
            for dimension in kind.dimensions:
                col = RATING_PREFIX + dimension
                score = _int(value[col])
                if score is None or not low <= score <= high:
                    got = "empty" if value[col] == "" else repr(value[col])
                    problems.add(
                        line, col, f"expected an integer {low}–{high} (the study's scale), got {got}"
                    )
                else:
                    ratings[dimension] = score
            answers = {"ratings": ratings}

        if len(problems.items) > n_before or unit is None:
            continue
        assert position is not None and swapped is not None and is_repeat is not None
        rows.append(
            _Row(
                line=line,
                unit=unit,
                block=value["block"],
                rater=value["rater"],
                position=position,
                swapped=swapped,
                is_repeat=is_repeat,
                attention=attention,
                label=label,
                confidence=confidence,
                rationale=rationale,
                answers=answers,
                response_ms=response_ms,
            )
        )
    return rows


def _check_file_consistency(rows: list[_Row], kind: _Kind, problems: _Problems) -> None:
    """Checks across rows: block membership, positions, main/repeat multiplicity."""
    noun = kind.unit_column
    block_of: dict[int, tuple[str, int]] = {}
    positions: dict[tuple[str, str, int], int] = {}
    mains: dict[tuple[str, int], int] = {}
    repeats: dict[tuple[str, int], int] = {}
    for row in rows:
        uid = row.unit.pk
        first = block_of.setdefault(uid, (row.block, row.line))
        if first[0] != row.block:
            problems.add(
                row.line,
                "block",
                f"{noun} '{row.unit.external_id}' is in block {first[0]!r} (line {first[1]}), got {row.block!r}",
            )
        key = (row.block, row.rater, row.position)
        if key in positions:
            problems.add(
                row.line,
                "position",
                f"rater {row.rater!r} already has position {row.position} in block {row.block!r} (line {positions[key]})",
            )
        else:
            positions[key] = row.line
        if row.is_check:
            continue  # an attention check is neither a main vote nor a repeat
        seen = repeats if row.is_repeat else mains
        pair = (row.rater, uid)
        if pair in seen:
            what = f"a hidden repeat (at most one per rater and {noun})" if row.is_repeat else "a main vote"
            problems.add(
                row.line,
                "repeat",
                f"rater {row.rater!r} already has {what} on {noun} '{row.unit.external_id}' (line {seen[pair]})",
            )
        else:
            seen[pair] = row.line


def _import(
    *, kind: _Kind, header: list[str], records: list[tuple[int, list[str]]], name: str
) -> VotesImportResult:
    study = kind.study
    noun = kind.unit_column
    unit_id = f"{kind.unit_field}_id"
    problems = _Problems(name)
    rows = _parse_rows(kind=kind, header=header, records=records, problems=problems)
    _check_file_consistency(rows, kind, problems)
    problems.raise_if_any()

    # ---- What is stored already (read once) ----------------------------------------------
    blocks = {b.name: b for b in Block.objects.filter(study=study)}
    blocks_of_unit: dict[int, dict[str, Block]] = defaultdict(dict)
    for item in BlockItem.objects.filter(
        block__study=study, **{f"{unit_id}__in": {r.unit.pk for r in rows}}
    ).select_related("block"):
        blocks_of_unit[getattr(item, unit_id)][item.block.name] = item.block
    raters = {
        r.external_id: r for r in Rater.objects.filter(study=study, external_id__in={r.rater for r in rows})
    }
    live = Assignment.objects.filter(block__study=study).exclude(state=AssignmentState.VOIDED)
    live_slots: dict[int, set[int]] = defaultdict(set)
    live_by_block_rater: dict[tuple[int, int], Assignment] = {}
    for a in live.filter(block__name__in={row.block for row in rows}):
        live_slots[a.block_id].add(a.slot)
        if a.rater_id is not None:
            live_by_block_rater[a.block_id, a.rater_id] = a
    reused: dict[int, Assignment] = {}
    for row in rows:
        block = blocks.get(row.block)
        rater = raters.get(row.rater)
        if block is not None and rater is not None and (block.pk, rater.pk) in live_by_block_rater:
            a = live_by_block_rater[block.pk, rater.pk]
            reused[a.pk] = a
    # Trials of reused assignments: by position; data trials by unit (main, repeats).
    trial_at: dict[tuple[int, int], Trial] = {}
    main_trial: dict[tuple[int, int], Trial] = {}
    repeat_trials: dict[tuple[int, int], list[Trial]] = defaultdict(list)
    answered: set[int] = set()
    if reused:
        trials = list(Trial.objects.filter(assignment_id__in=reused, **{f"{unit_id}__isnull": False}))
        answered = set(Vote.objects.filter(trial__in=trials).values_list("trial_id", flat=True))
        for t in trials:
            trial_at[t.assignment_id, t.position] = t
            if t.attention_expected:
                continue
            if t.is_repeat:
                repeat_trials[t.assignment_id, getattr(t, unit_id)].append(t)
            else:
                main_trial[t.assignment_id, getattr(t, unit_id)] = t

    # ---- Checks against stored state -----------------------------------------------------
    file_mains = {(row.rater, row.unit.pk) for row in rows if not row.is_repeat and not row.is_check}
    for row in rows:
        uid = row.unit.pk
        stored_blocks = blocks_of_unit.get(uid)
        if stored_blocks and row.block not in stored_blocks:
            problems.add(
                row.line,
                "block",
                f"{noun} '{row.unit.external_id}' belongs to block {', '.join(map(repr, stored_blocks))}, "
                f"got {row.block!r}",
            )
            continue
        block = blocks.get(row.block)
        rater = raters.get(row.rater)
        live_a = live_by_block_rater.get((block.pk, rater.pk)) if block and rater else None
        if live_a is None:
            if row.is_repeat and (row.rater, uid) not in file_mains:
                problems.add(
                    row.line,
                    "repeat",
                    f"a hidden repeat needs a main vote of rater {row.rater!r} on {noun} "
                    f"'{row.unit.external_id}' (neither in the file nor stored)",
                )
            continue
        existing = trial_at.get((live_a.pk, row.position))
        if existing is not None:
            if existing.pk in answered:
                problems.add(
                    row.line,
                    "position",
                    f"rater {row.rater!r} already answered position {row.position} in block {row.block!r}",
                )
                continue
            planned = (
                getattr(existing, unit_id),
                existing.swapped,
                existing.is_repeat,
                existing.attention_expected,
            )
            if planned != (uid, row.swapped, row.is_repeat, row.attention):
                orientation = "orientation, " if kind.pairwise else ""
                problems.add(
                    row.line,
                    "position",
                    f"position {row.position} of rater {row.rater!r} in block {row.block!r} is a planned trial of "
                    f"another {noun}, {orientation}repeat flag or attention check",
                )
                continue
            row.trial = existing
        elif row.is_check:
            pass  # a new attention check: any number per unit, none of them a main vote
        elif not row.is_repeat and (live_a.pk, uid) in main_trial:
            t = main_trial[live_a.pk, uid]
            problems.add(
                row.line,
                "position",
                f"rater {row.rater!r} already has {noun} '{row.unit.external_id}' at position "
                f"{t.position} in block {row.block!r}",
            )
            continue
        elif row.is_repeat and repeat_trials.get((live_a.pk, uid)):
            problems.add(
                row.line,
                "repeat",
                f"rater {row.rater!r} already has a hidden repeat of {noun} '{row.unit.external_id}' "
                f"(at most one per rater and {noun})",
            )
            continue
        if row.is_repeat and (row.rater, uid) not in file_mains:
            original = main_trial.get((live_a.pk, uid))
            if original is None or original.pk not in answered:
                problems.add(
                    row.line,
                    "repeat",
                    f"a hidden repeat needs a main vote of rater {row.rater!r} on {noun} "
                    f"'{row.unit.external_id}' (neither in the file nor stored)",
                )
    problems.raise_if_any()

    # ---- Writes (everything checked) -----------------------------------------------------
    now = timezone.now()
    counts: dict[str, int] = defaultdict(int)
    next_block_position = max((b.position for b in blocks.values()), default=-1) + 1
    raters_in_block: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        if row.rater not in raters_in_block[row.block]:
            raters_in_block[row.block].append(row.rater)
    for block_name, block_raters in raters_in_block.items():
        if block_name not in blocks:
            blocks[block_name] = Block.objects.create(
                study=study,
                name=block_name,
                position=next_block_position,
                target_raters=max(1, len(block_raters)),
            )
            next_block_position += 1
            counts["blocks_created"] += 1

    # Block items for units new to their block, in order of first appearance.
    new_items: list[BlockItem] = []
    next_item_position: dict[int, int] = {}
    for row in rows:
        if row.unit.pk in blocks_of_unit:
            continue
        block = blocks[row.block]
        if block.pk not in next_item_position:
            last = (
                BlockItem.objects.filter(block=block)
                .order_by("-position")
                .values_list("position", flat=True)
                .first()
            )
            next_item_position[block.pk] = 0 if last is None else last + 1
        new_items.append(
            BlockItem(block=block, position=next_item_position[block.pk], **{unit_id: row.unit.pk})
        )
        next_item_position[block.pk] += 1
        blocks_of_unit[row.unit.pk][row.block] = block
    BlockItem.objects.bulk_create(new_items)
    counts["block_items_created"] = len(new_items)

    new_raters = [
        Rater(study=study, external_id=rid, source=Rater.Source.IMPORT)
        for rid in dict.fromkeys(row.rater for row in rows)
        if rid not in raters
    ]
    for rater in Rater.objects.bulk_create(new_raters):
        raters[rater.external_id] = rater
    counts["raters_created"] = len(new_raters)

    # Assignments: reuse the rater's live one in the block, else the lowest free live slot.
    assignment_of: dict[tuple[str, str], Assignment] = {}
    for block_name, block_raters in raters_in_block.items():
        block = blocks[block_name]
        used = live_slots[block.pk]
        for rid in block_raters:
            held = live_by_block_rater.get((block.pk, raters[rid].pk))
            if held is None:
                slot = 0
                while slot in used:
                    slot += 1
                used.add(slot)
                assignment_of[block_name, rid] = Assignment.objects.create(
                    block=block,
                    slot=slot,
                    rater=raters[rid],
                    state=AssignmentState.FINISHED,
                    claimed_at=now,
                    started_at=now,
                    finished_at=now,
                )
                counts["assignments_created"] += 1
            else:
                assignment_of[block_name, rid] = held
                counts["assignments_reused"] += 1

    # Trials: main ones and attention checks first (repeats point at the main ones), then repeats.
    main_of: dict[tuple[int, int], Trial] = dict(main_trial)
    for is_repeat in (False, True):
        batch: list[Trial] = []
        for row in rows:
            if row.is_repeat != is_repeat or row.trial is not None:
                continue
            a = assignment_of[row.block, row.rater]
            row.new_trial = Trial(
                assignment=a,
                position=row.position,
                swapped=row.swapped,
                is_repeat=row.is_repeat,
                repeat_of=main_of[a.pk, row.unit.pk] if row.is_repeat else None,
                attention_expected=row.attention,
                shown_at=None,
                **{unit_id: row.unit.pk},
            )
            batch.append(row.new_trial)
        Trial.objects.bulk_create(batch)
        counts["trials_created"] += len(batch)
        if not is_repeat:
            for row in rows:
                if not row.is_repeat and not row.is_check:
                    main = row.trial or row.new_trial
                    assert main is not None
                    main_of[main.assignment_id, row.unit.pk] = main
    counts["trials_answered"] = sum(1 for row in rows if row.trial is not None)

    Vote.objects.bulk_create(
        [
            Vote(
                trial=row.trial or row.new_trial,
                label=row.label,
                confidence=row.confidence,
                rationale=row.rationale,
                answers=row.answers,
                response_ms=row.response_ms,
            )
            for row in rows
        ],
        batch_size=2000,
    )
    # A reused (planned) assignment whose every trial is now answered is finished.
    for a in reused.values():
        if (
            a.state in (AssignmentState.OPEN, AssignmentState.ACTIVE)
            and not Trial.objects.filter(assignment=a, vote__isnull=True).exists()
        ):
            Assignment.objects.filter(pk=a.pk).update(state=AssignmentState.FINISHED, finished_at=now)
    return VotesImportResult(
        rows=len(rows),
        main_votes=sum(1 for row in rows if not row.is_repeat and not row.is_check),
        repeat_votes=sum(1 for row in rows if row.is_repeat),
        blocks_created=counts["blocks_created"],
        block_items_created=counts["block_items_created"],
        raters_created=counts["raters_created"],
        assignments_created=counts["assignments_created"],
        assignments_reused=counts["assignments_reused"],
        trials_created=counts["trials_created"],
        trials_answered=counts["trials_answered"],
    )


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------

# Column → ORM path from Vote, per kind (the answer columns are added by ``_export_rows``).
_IDENTITY_PATHS: dict[str, dict[str, str]] = {
    StudyKind.PAIRWISE: {
        "comparison": "trial__comparison__external_id",
        "brief": "trial__comparison__page__external_id",
        "item_a": "trial__comparison__candidate_a__external_id",
        "item_b": "trial__comparison__candidate_b__external_id",
        "system_a": "trial__comparison__candidate_a__system__external_id",
        "system_b": "trial__comparison__candidate_b__system__external_id",
    },
    StudyKind.CHECKLIST: {
        "predicate": "trial__predicate__external_id",
        "item": "trial__predicate__candidate__external_id",
        "brief": "trial__predicate__candidate__page__external_id",
        "system": "trial__predicate__candidate__system__external_id",
    },
    StudyKind.RATING: {
        "item": "trial__candidate__external_id",
        "brief": "trial__candidate__page__external_id",
        "system": "trial__candidate__system__external_id",
    },
}
_TRIAL_PATHS: dict[str, str] = {
    "block": "trial__assignment__block__name",
    "rater": "trial__assignment__rater__external_id",
    "position": "trial__position",
    "swapped": "trial__swapped",
    "repeat": "trial__is_repeat",
    "attention": "trial__attention_expected",
    "label": "label",
    "confidence": "confidence",
    "rationale": "rationale",
    "answers": "answers",
    "response_ms": "response_ms",
}


def kind_votes_export_csv(*, study: Study, path: Path) -> int:
    """Write the votes of a ``pairwise``, ``checklist`` or ``rating`` study as its votes CSV.

    Returns the number of rows. Every answered trial on a unit of the kind in an assignment with
    a rater is written, attention checks included; votes of voided assignments are left out. Rows
    are in block, assignment slot, trial position order; values are canonical, as stored.
    """
    header = kind_votes_columns(study)
    return _write_csv(path=Path(path), header=header, rows=_export_rows(study, header))


def _export_rows(study: Study, header: list[str]) -> Iterator[list[Any]]:
    kind = StudyKind(study.kind)
    paths = {**_IDENTITY_PATHS[kind], **_TRIAL_PATHS}
    dimensions = rating_dimensions(study) if kind == StudyKind.RATING else []
    qs = (
        Vote.objects.filter(
            trial__assignment__block__study=study,
            trial__assignment__rater__isnull=False,
            **{f"trial__{_UNIT_FIELD[kind]}__isnull": False},
        )
        .exclude(trial__assignment__state=AssignmentState.VOIDED)
        .order_by(
            "trial__assignment__block__position",
            "trial__assignment__block__name",
            "trial__assignment__slot",
            "trial__assignment__id",
            "trial__position",
        )
    )
    for values in qs.values_list(*paths.values()).iterator(chunk_size=5000):
        v: dict[str, Any] = dict(zip(paths, values, strict=True))
        v["swapped"] = int(v["swapped"])
        v["repeat"] = int(v["repeat"])
        for col in ("confidence", "response_ms"):
            v[col] = "" if v[col] is None else v[col]
        v["evidence"] = v["rationale"]
        ratings = (v["answers"] or {}).get("ratings") or {}
        for dimension in dimensions:
            score = ratings.get(dimension)
            v[RATING_PREFIX + dimension] = "" if score is None else int(score)
        yield [v[col] for col in header]
