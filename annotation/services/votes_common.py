"""The steps every votes CSV shares, whatever the study kind (SPEC §8, §11).

``annotation.services.votes`` (the SPEC §8 file of ``pairwise_reference``) and
``annotation.services.kind_votes`` (``pairwise``, ``checklist``, ``rating``) differ only in their
columns, in how a row names its unit (what a trial shows: a comparison, a predicate or a
candidate) and in how its answer is checked. Everything else lives here once, so the rules of
``votes``' docstring hold for every kind by construction: reading and writing the file, the
one-line problems, the checks of the placement columns, the checks across rows and against what
is stored, and the writes (blocks, block items, raters, assignments, trials, votes, the audit
record). A kind describes itself with a ``VotesCsvFormat``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation import csv_cells
from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.models import (
    PAIRWISE_LABELS,
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Label,
    Rater,
    Study,
    Trial,
    Vote,
)
from annotation.services.audit import audit_record
from annotation.services.candidate_versions import trials_record_versions

MAX_DB_INT = 2_147_483_647  # PositiveIntegerField's upper bound on every backend
# Bounded (int() of 4,300+ digits raises ValueError); longer numbers are over MAX_DB_INT anyway.
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_UINT = re.compile(r"[0-9]{1,18}")
_MAX_REPORTED = 1000  # stop collecting problems after this many (the first is what is shown)

Record = tuple[int, list[str]]  # (first physical line of the row, its fields)


@dataclass(frozen=True)
class VotesImportResult:
    """What a votes CSV import wrote."""

    rows: int
    main_votes: int
    repeat_votes: int
    blocks_created: int
    block_items_created: int
    raters_created: int
    assignments_created: int
    assignments_reused: int
    trials_created: int
    trials_answered: int  # existing (planned) trials the file answered

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Problems:
    """Collects one-line problems; raises the first (with the count of the others)."""

    name: str
    items: list[str] = field(default_factory=list)

    def add(self, line: int, column: str, message: str) -> None:
        if len(self.items) < _MAX_REPORTED:
            self.items.append(f"{self.name} line {line}, field '{column}': {message}")

    def add_line(self, line: int, message: str) -> None:
        if len(self.items) < _MAX_REPORTED:
            self.items.append(f"{self.name} line {line}: {message}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        first = self.items[0]
        more = len(self.items) - 1
        if more:
            suffix = f"{more}+" if len(self.items) >= _MAX_REPORTED else str(more)
            first = f"{first} (and {suffix} more problem{'s' if more != 1 else ''} in the file)"
        raise ValidationFailed(first)


@dataclass(frozen=True)
class Unit:
    """What a trial shows: its primary key, bundle id and the identity columns that describe it."""

    pk: int
    external_id: str
    identity: dict[str, str]


@dataclass(frozen=True)
class Placement:
    """Where a row's answer goes; ``None`` where the cell did not parse (a problem is recorded)."""

    block: str
    rater: str
    position: int | None
    swapped: bool | None
    is_repeat: bool | None


@dataclass
class ImportRow:
    """One parsed CSV row, checked against itself (not yet against the other rows or the DB)."""

    line: int
    unit: Unit
    block: str
    rater: str
    position: int
    swapped: bool
    is_repeat: bool
    attention: str  # the trial's attention_expected: empty for a data trial
    vote: dict[str, Any]  # the Vote fields the row writes (label, confidence, rationale, ...)
    trial: Trial | None = None  # an existing unanswered trial this row answers
    new_trial: Trial | None = None

    @property
    def is_check(self) -> bool:
        return self.attention != ""


class VotesCsvFormat(Protocol):
    """What differs between the votes CSVs of the study kinds."""

    study: Study
    unit_column: str  # the column naming the unit; also the unit's name in messages
    unit_field: str  # the Trial / BlockItem foreign key naming the unit

    def check_header(self, header: list[str], name: str) -> None:
        """Raise ``ValidationFailed`` on the first missing, repeated or unknown column."""

    def parse_rows(self, header: list[str], records: list[Record], problems: Problems) -> list[ImportRow]:
        """Row-local checks; returns the rows that passed."""
        ...

    def planned_mismatch(self, row: ImportRow, trial: Trial) -> str | None:
        """Why ``row`` cannot answer the unanswered planned ``trial`` at its position, if it cannot."""
        ...


# --------------------------------------------------------------------------------------------
# Reading and checking the file
# --------------------------------------------------------------------------------------------


def read_csv(path: Path, name: str) -> tuple[list[str], list[Record]]:
    """Header and (first line number, fields) records; blank lines skipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ArbiterError(f"{name}: cannot read the file ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ValidationFailed(f"{name} line {line}: not UTF-8 text (byte {exc.start})") from None
    reader = csv_cells.reader(io.StringIO(text, newline=""), strict=True)
    records: list[Record] = []
    header: list[str] | None = None
    start = 1
    try:
        for fields in reader:
            if fields and any(f.strip() for f in fields):
                if header is None:
                    header = fields
                else:
                    records.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ValidationFailed(f"{name} line {reader.line_num}: not valid CSV ({exc})") from None
    if header is None:
        raise ValidationFailed(f"{name} line 1: empty file, expected the votes CSV header")
    header = [h.strip() for h in header]
    if "\x00" in text:
        # PostgreSQL text cannot hold NUL (SQLite would store it): refuse it, naming line and field.
        for line, fields in [(1, header), *records]:
            for index, cell in enumerate(fields):
                if "\x00" in cell:
                    column = header[index] if index < len(header) else f"column {index + 1}"
                    raise ValidationFailed(f"{name} line {line}, field '{column}': contains a NUL character")
    return header, records


def check_header(*, header: list[str], expected: list[str], name: str, unknown: Callable[[str], str]) -> None:
    """Each column once, each of ``expected`` present; ``unknown(col)`` says what is wrong with another."""
    seen: set[str] = set()
    for col in header:
        if col in seen:
            raise ValidationFailed(f"{name} line 1, field '{col}': the column appears twice")
        seen.add(col)
        if col not in expected:
            raise ValidationFailed(f"{name} line 1, field '{col}': {unknown(col)}")
    for col in expected:
        if col not in seen:
            raise ValidationFailed(f"{name} line 1, field '{col}': missing required column")


def row_values(
    header: list[str], records: list[Record], problems: Problems, *, text_columns: Iterable[str]
) -> Iterator[tuple[int, dict[str, str], dict[str, str]]]:
    """(line, raw cells, cells stripped but for the free-text ones) of each row as wide as the header."""
    width = len(header)
    for line, fields in records:
        if len(fields) != width:
            problems.add_line(line, f"expected {width} fields as in the header, got {len(fields)}")
            continue
        raw = dict(zip(header, fields, strict=True))
        yield line, raw, {k: (v if k in text_columns else v.strip()) for k, v in raw.items()}


def parse_unit(
    *,
    value: dict[str, str],
    column: str,
    units: Mapping[str, Unit],
    study: Study,
    line: int,
    problems: Problems,
) -> Unit | None:
    """The unit the row names in ``column``; its identity columns must agree with the study."""
    shown = value[column]
    unit = units.get(shown)
    if unit is None:
        problems.add(
            line,
            column,
            f"unknown {column} {shown!r} in study '{study.slug}'"
            if shown
            else f"empty; expected a {column} id",
        )
    else:
        for col, want in unit.identity.items():
            if value[col] != want:
                problems.add(
                    line, col, f"{column} '{unit.external_id}' has {col} {want!r}, got {value[col]!r}"
                )
    return unit


def parse_placement(*, value: dict[str, str], line: int, problems: Problems, swapped: bool) -> Placement:
    """The ``block``, ``rater``, ``position``, ``repeat`` and (when the kind has it) ``swapped`` cells."""
    if not value["block"]:
        problems.add(line, "block", "empty; expected a block name")
    elif len(value["block"]) > Block._meta.get_field("name").max_length:  # type: ignore[operator]
        problems.add(line, "block", "longer than 80 characters")
    if not value["rater"]:
        problems.add(line, "rater", "empty; expected a rater id")
    elif len(value["rater"]) > Rater._meta.get_field("external_id").max_length:  # type: ignore[operator]
        problems.add(line, "rater", "longer than 200 characters")
    position = parse_uint(value["position"])
    if position is None or position > MAX_DB_INT:
        problems.add(line, "position", f"expected a non-negative integer, got {value['position']!r}")
    is_swapped: bool | None = False  # kinds that show one image are never swapped
    if swapped:
        is_swapped = parse_flag(value["swapped"])
        if is_swapped is None:
            problems.add(line, "swapped", f"expected 0 or 1, got {value['swapped']!r}")
    is_repeat = parse_flag(value["repeat"])
    if is_repeat is None:
        problems.add(line, "repeat", f"expected 0 or 1, got {value['repeat']!r}")
    return Placement(value["block"], value["rater"], position, is_swapped, is_repeat)


def parse_pairwise_answer(*, value: dict[str, str], line: int, problems: Problems) -> tuple[str, int | None]:
    """The ``label`` (canonical A/B/TIE/CANNOT_JUDGE) and ``confidence`` (1–5; empty for CANNOT_JUDGE)."""
    label = value["label"]
    if label not in PAIRWISE_LABELS:
        problems.add(line, "label", f"expected one of {', '.join(PAIRWISE_LABELS)}, got {label!r}")
    confidence: int | None = None
    if not (value["confidence"] == "" and label == Label.CANNOT_JUDGE):
        conf = parse_int(value["confidence"])
        if conf is None or not 1 <= conf <= 5:
            problems.add(line, "confidence", f"expected an integer 1–5, got {value['confidence']!r}")
        else:
            confidence = conf
    return label, confidence


def parse_response_ms(*, value: dict[str, str], line: int, problems: Problems) -> int | None:
    if value["response_ms"] == "":
        return None
    response_ms = parse_uint(value["response_ms"])
    if response_ms is None or response_ms > MAX_DB_INT:
        problems.add(
            line, "response_ms", f"expected a non-negative integer or empty, got {value['response_ms']!r}"
        )
    return response_ms


def import_row(
    *, line: int, unit: Unit, placement: Placement, vote: dict[str, Any], attention: str = ""
) -> ImportRow:
    """The row of a line that passed every row-local check."""
    assert (
        placement.position is not None and placement.swapped is not None and placement.is_repeat is not None
    )
    return ImportRow(
        line=line,
        unit=unit,
        block=placement.block,
        rater=placement.rater,
        position=placement.position,
        swapped=placement.swapped,
        is_repeat=placement.is_repeat,
        attention=attention,
        vote=vote,
    )


def parse_uint(text: str) -> int | None:
    return int(text) if _UINT.fullmatch(text) else None


def parse_int(text: str) -> int | None:
    return int(text) if _INT.fullmatch(text) else None


def parse_flag(text: str) -> bool | None:
    return {"0": False, "1": True}.get(text)


def _check_file_consistency(rows: list[ImportRow], noun: str, problems: Problems) -> None:
    """Checks across rows: block membership, positions, main/repeat multiplicity."""
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


# --------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------


def votes_csv_import(*, fmt: VotesCsvFormat, path: Path, user: Any = None) -> VotesImportResult:
    """Import a votes CSV of ``fmt``'s kind into ``fmt.study``: all rows or nothing.

    Raises ``ValidationFailed`` (one line: file, line, field) on the first problem found after
    checking every row, and writes nothing in that case. Records an ``AuditEvent``
    (``votes.import``) on success.
    """
    study = fmt.study
    path = Path(path)
    name = path.name or "votes.csv"
    header, records = read_csv(path, name)
    fmt.check_header(header, name)
    try:
        with transaction.atomic():
            # Serializes concurrent imports into one study (slots, block items, positions).
            list(Study.objects.select_for_update().filter(pk=study.pk).values_list("pk", flat=True))
            problems = Problems(name)
            rows = fmt.parse_rows(header, records, problems)
            _check_file_consistency(rows, fmt.unit_column, problems)
            problems.raise_if_any()
            stored = _Stored(study=study, rows=rows, unit_id=f"{fmt.unit_field}_id")
            stored.check(fmt=fmt, rows=rows, problems=problems)
            problems.raise_if_any()
            result = stored.write(study=study, rows=rows)
            audit_record(action="votes.import", user=user, study=study, target=name, **result.as_dict())
    except IntegrityError as exc:  # a concurrent writer took a slot / position first
        raise Conflict(f"{name}: the study changed while importing ({exc}); run the import again") from None
    return result


class _Stored:
    """What is stored already about the file's blocks, units and raters (read once)."""

    def __init__(self, *, study: Study, rows: list[ImportRow], unit_id: str) -> None:
        self.unit_id = unit_id  # the Trial / BlockItem foreign key column of the unit, e.g. "comparison_id"
        self.blocks = {b.name: b for b in Block.objects.filter(study=study)}
        self.blocks_of_unit: dict[int, dict[str, Block]] = defaultdict(dict)
        for item in BlockItem.objects.filter(
            block__study=study, **{f"{unit_id}__in": {r.unit.pk for r in rows}}
        ).select_related("block"):
            self.blocks_of_unit[getattr(item, unit_id)][item.block.name] = item.block
        self.raters = {
            r.external_id: r
            for r in Rater.objects.filter(study=study, external_id__in={r.rater for r in rows})
        }
        live = Assignment.objects.filter(block__study=study).exclude(state=AssignmentState.VOIDED)
        self.live_slots: dict[int, set[int]] = defaultdict(set)
        self.live_by_block_rater: dict[tuple[int, int], Assignment] = {}
        for a in live.filter(block__name__in={row.block for row in rows}):
            self.live_slots[a.block_id].add(a.slot)
            if a.rater_id is not None:
                self.live_by_block_rater[a.block_id, a.rater_id] = a
        # The live assignments the file's raters hold in its blocks, and their trials: by
        # position; data trials by unit (main, repeats).
        self.reused: dict[int, Assignment] = {}
        for row in rows:
            block = self.blocks.get(row.block)
            rater = self.raters.get(row.rater)
            if block is not None and rater is not None and (block.pk, rater.pk) in self.live_by_block_rater:
                a = self.live_by_block_rater[block.pk, rater.pk]
                self.reused[a.pk] = a
        self.trial_at: dict[tuple[int, int], Trial] = {}
        self.main_trial: dict[tuple[int, int], Trial] = {}
        self.repeat_trials: dict[tuple[int, int], list[Trial]] = defaultdict(list)
        self.answered: set[int] = set()
        if self.reused:
            trials = list(
                Trial.objects.filter(assignment_id__in=self.reused, **{f"{unit_id}__isnull": False})
            )
            self.answered = set(Vote.objects.filter(trial__in=trials).values_list("trial_id", flat=True))
            for t in trials:
                self.trial_at[t.assignment_id, t.position] = t
                if t.attention_expected:  # a planned attention check: never a main vote or a repeat
                    continue
                if t.is_repeat:
                    self.repeat_trials[t.assignment_id, getattr(t, unit_id)].append(t)
                else:
                    self.main_trial[t.assignment_id, getattr(t, unit_id)] = t

    def check(self, *, fmt: VotesCsvFormat, rows: list[ImportRow], problems: Problems) -> None:
        """Checks against stored state; sets ``row.trial`` where a row answers a planned trial."""
        noun = fmt.unit_column
        main_trial, repeat_trials, answered = self.main_trial, self.repeat_trials, self.answered
        file_mains = {(row.rater, row.unit.pk) for row in rows if not row.is_repeat and not row.is_check}

        def missing_main_vote(row: ImportRow) -> None:
            problems.add(
                row.line,
                "repeat",
                f"a hidden repeat needs a main vote of rater {row.rater!r} on {noun} "
                f"'{row.unit.external_id}' (neither in the file nor stored)",
            )

        for row in rows:
            uid = row.unit.pk
            stored_blocks = self.blocks_of_unit.get(uid)
            if stored_blocks and row.block not in stored_blocks:
                problems.add(
                    row.line,
                    "block",
                    f"{noun} '{row.unit.external_id}' belongs to block {', '.join(map(repr, stored_blocks))}, "
                    f"got {row.block!r}",
                )
                continue
            block = self.blocks.get(row.block)
            rater = self.raters.get(row.rater)
            live_a = self.live_by_block_rater.get((block.pk, rater.pk)) if block and rater else None
            if live_a is None:
                if row.is_repeat and (row.rater, uid) not in file_mains:
                    missing_main_vote(row)
                continue
            existing = self.trial_at.get((live_a.pk, row.position))
            if existing is not None:
                if existing.pk in answered:
                    problems.add(
                        row.line,
                        "position",
                        f"rater {row.rater!r} already answered position {row.position} in block {row.block!r}",
                    )
                    continue
                mismatch = fmt.planned_mismatch(row, existing)
                if mismatch is not None:
                    problems.add(row.line, "position", mismatch)
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
                    missing_main_vote(row)

    def write(self, *, study: Study, rows: list[ImportRow]) -> VotesImportResult:
        """Create what the checked rows imply and store their votes."""
        unit_id, blocks, raters = self.unit_id, self.blocks, self.raters
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
            if row.unit.pk in self.blocks_of_unit:
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
            self.blocks_of_unit[row.unit.pk][row.block] = block
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
            used = self.live_slots[block.pk]
            for rid in block_raters:
                held = self.live_by_block_rater.get((block.pk, raters[rid].pk))
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
        main_of: dict[tuple[int, int], Trial] = dict(self.main_trial)
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

        votes = Vote.objects.bulk_create(
            [Vote(trial=row.trial or row.new_trial, **row.vote) for row in rows], batch_size=2000
        )
        # Imported votes are for the candidate versions in force now (paper B.5).
        trials_record_versions(trial_ids=[vote.trial_id for vote in votes])
        # A reused (planned) assignment whose every trial is now answered is finished.
        for a in self.reused.values():
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


def write_csv(*, path: Path, header: list[str], rows: Iterable[list[Any]]) -> int:
    """Write ``header`` and ``rows`` to ``path`` atomically; return the number of rows.

    The file is written next to ``path`` and moved into place, so a failed export leaves no
    partial file.
    """
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=".votes-", suffix=".csv", dir=directory)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            writer = csv_cells.writer(fh)
            writer.writerow(header)
            for row in rows:
                writer.writerow(row)
                n += 1
        os.chmod(tmp_name, 0o644)  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return n
