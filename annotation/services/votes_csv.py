"""The human votes CSV exchange of every study kind (docs/protocol.md "Files" (Human votes CSV), "Commands"
``import_votes``/``export_votes``, docs/study-kinds.md "Votes CSV" (votes exports gain the kind's answer
columns)).

Each kind's columns, the unit a row names and how its answer is checked are the kind's
(``design_of(study).votes_csv(study)``, ``annotation.kinds``); everything else lives here once, so
these rules hold for every kind by construction: reading and writing the file, the checks across
rows and against what is stored, and the writes (blocks, block items, raters, assignments, trials,
votes, the audit record).

Import is validated whole before anything is written and is all-or-nothing (docs/protocol.md "Files"). Every
problem is reported as one line naming the file, the line and the field, e.g.
``votes.csv line 5, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'MAYBE'``; when a
file has several problems the first is shown with the number of others. An export imports again
unchanged into a study without those votes.

Decisions where the protocol is silent (also proposed for docs/decisions/0009-votes-csv.md):

- A file creates what it implies: blocks (by name), raters (``source="import"``), one finished
  assignment per (block, rater), block items for comparisons new to their block, one trial per
  row. A rater already holding a live assignment in the block (e.g. planned by the scheduler)
  reuses it: a row whose position matches one of its unanswered trials (same comparison,
  orientation and repeat flag) answers that trial; other rows add trials. New assignments take
  slots in order of the rater's first appearance in the block, each the lowest slot number no
  live assignment of the block uses.
- One main vote per rater × comparison, and at most one hidden repeat per rater × comparison (so
  each repeat pairs with exactly one original, docs/protocol.md "Human reference and agreement"); a repeat
  needs the rater's main vote on that comparison, in the file or already stored. Votes already stored are
  never overwritten: a row that would answer an answered trial is an error.
- Export writes every stored vote except those of voided assignments (a voided assignment is
  excluded from every analysis, so it is excluded from the exchange file too). The docs/protocol.md "Files"
  file of ``pairwise_reference`` also leaves out instructed-response attention checks
  (docs/study-kinds.md "Scheduling"; its columns have no place for one, and a check is never data), so a row
  never answers a planned attention check there; the other kinds' files carry them in an ``attention`` column.
- The unit column (``comparison`` / ``predicate`` / ``item``) names the unit by its bundle id;
  the other identity columns (``brief``, ``item``, ``item_a``/``item_b``, ``system``,
  ``system_a``/``system_b``) repeat what the study says about it, so a file read by a person or
  another tool carries its context; on import they must agree with the study.
- A unit belongs to one block of the study, as docs/protocol.md "The study model"'s blocks are disjoint for
every kind (the
  kinds scheduler draws disjoint blocks too).
- ``attention`` is the trial's ``attention_expected``: empty for a data trial, otherwise the
  answer the instructed-response attention check told the rater to give, as displayed
  (``A``/``B``/``TIE``; ``YES``/``NO``/``UNCLEAR``; one value of the scale for ``rating``).
  Attention-check rows are exported and imported, so the hygiene rules (docs/study-kinds.md "Hygiene rules")
  see the same checks after a round trip. A check row is never a hidden repeat (``repeat`` must be 0), does
  not count as the rater's main vote on its unit (a rater may also have a data vote on that unit),
  and its answer is checked like any answer of the kind (a failed check is still an answer).
- ``swapped`` exists only for the pairwise kinds (the other kinds show one image); their trials
  are never swapped.
- Column order in a file is free (the header names the columns); an export writes the order
  of the kind's module docstring. Labels are case-sensitive canonical values, as in docs/protocol.md "Files".
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation import csv_cells
from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.kinds import DESIGNS, design_of
from annotation.kinds.csv_rows import ImportRow, Problems, Record, VotesCsvFormat
from annotation.models import Assignment, AssignmentState, Block, BlockItem, Rater, Study, Trial, Vote
from annotation.selectors.votes import GOLD_CSV_HEADER, gold_answer_rows
from annotation.services.audit import audit_record
from annotation.services.candidate_versions import trials_record_versions


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


def votes_import_csv(*, study: Study, path: Path, user: Any = None) -> VotesImportResult:
    """Import a votes CSV (docs/protocol.md "Files"; docs/study-kinds.md "Votes CSV" for the other kinds) into
    ``study``: all rows or nothing.

    Raises ``ValidationFailed`` (one line: file, line, field) on the first problem found after
    checking every row, and writes nothing in that case. Records an ``AuditEvent``
    (``votes.import``) on success.
    """
    fmt = design_of(study).votes_csv(study)
    path = Path(path)
    name = path.name or "votes.csv"
    header, records = read_csv(path, name)
    fmt.check_header(header, name, _owner_of)
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


def votes_export_csv(*, study: Study, path: Path) -> int:
    """Write the study's votes as its votes CSV; return the number of rows.

    Votes of voided assignments are left out (and, in the docs/protocol.md "Files" file, attention checks);
    the file imports again unchanged. Rows are in block, assignment slot, trial position order; values are
    canonical, as stored. The file is written next to ``path`` and moved into place, so a failed
    export leaves no partial file.
    """
    fmt = design_of(study).votes_csv(study)
    header = fmt.export_header()
    return write_csv(path=Path(path), header=header, rows=fmt.export_rows(header))


def gold_export_csv(*, study: Study, path: Path) -> int:
    """Write the study's gold answers CSV (docs/protocol.md "Files"; issue 30); return the number of rows.

    Gold answers are never data, so the docs/protocol.md "Files" votes CSV leaves them out; this file is where
    a researcher reads them: rater, block, position, gold, page, comparison, swapped, expected, label,
    correct, response_ms.
    """
    return write_csv(path=Path(path), header=GOLD_CSV_HEADER, rows=gold_answer_rows(study=study))


def _owner_of(column: str) -> str | None:
    """The study kind whose votes CSV has ``column`` (for a header of another kind)."""
    # The kinds newest first: a column two kinds share (``comparison``, ``item``) names the later one.
    for design in reversed(DESIGNS.values()):
        if design.owns_votes_column(column):
            return design.kind
    return None


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
