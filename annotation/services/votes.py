"""Human votes CSV import and export (SPEC §8 "Human votes CSV", §9 ``import_votes``/``export_votes``).

Format: ``comparison, page, system_a, system_b, block, rater, position, swapped, repeat, label,
confidence, rationale, response_ms``, then one ``axis:<AXIS_ID>`` column per study axis (empty
when the axis is inactive on the page). Labels and axis scores are canonical (SPEC §3).

Import is validated whole before anything is written and is all-or-nothing (SPEC §8). Every
problem is reported as one line naming the file, the line and the field, e.g.
``votes.csv line 5, field 'label': expected one of A, B, TIE, CANNOT_JUDGE, got 'MAYBE'``; when a
file has several problems the first is shown with the number of others.

Decisions where the SPEC is silent (also proposed for docs/decisions.md):

- A file creates what it implies: blocks (by name), raters (``source="import"``), one finished
  assignment per (block, rater), block items for comparisons new to their block, one trial per
  row. A rater already holding a live assignment in the block (e.g. planned by the scheduler)
  reuses it: a row whose position matches one of its unanswered trials (same comparison,
  orientation and repeat flag) answers that trial; other rows add trials. New assignments take
  slots in order of the rater's first appearance in the block, each the lowest slot number no
  live assignment of the block uses.
- One main vote per rater × comparison, and at most one hidden repeat per rater × comparison (so
  each repeat pairs with exactly one original, SPEC §5); a repeat needs the rater's main vote on
  that comparison, in the file or already stored. Votes already stored are never overwritten:
  a row that would answer an answered trial is an error.
- ``confidence`` is required (integer 1–5) for A, B and TIE; it may be empty for CANNOT_JUDGE.
- Export writes every stored pairwise vote except those of voided assignments (a voided
  assignment is excluded from every analysis, so it is excluded from the exchange file too) and
  those of instructed-response attention checks (SPEC §11; the SPEC §8 columns have no place for
  one, and a check is never data); it writes only the SPEC columns, so an export imports again
  unchanged into a study without those votes. For the same reason a row never answers a planned
  attention check.
- Studies of the other kinds (``pairwise``, ``checklist``, ``rating``, SPEC §11) have their own
  columns: ``votes_import_csv`` / ``votes_export_csv`` hand them to ``annotation.services.kind_votes``,
  so the commands and the API serve every kind.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.models import (
    Assignment,
    AssignmentState,
    Axis,
    Block,
    BlockItem,
    Comparison,
    Label,
    Page,
    Rater,
    Study,
    StudyKind,
    Trial,
    Vote,
)
from annotation.selectors.votes import AXIS_PREFIX, study_axis_ids, vote_rows
from annotation.services.audit import audit_record

VOTES_BASE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "page",
    "system_a",
    "system_b",
    "block",
    "rater",
    "position",
    "swapped",
    "repeat",
    "label",
    "confidence",
    "rationale",
    "response_ms",
)
VOTE_LABELS: tuple[str, ...] = (Label.A, Label.B, Label.TIE, Label.CANNOT_JUDGE)
_LABELS_TEXT = ", ".join(str(label) for label in VOTE_LABELS)
_INT = re.compile(r"[+-]?[0-9]+")
_UINT = re.compile(r"[0-9]+")
_MAX_REPORTED = 1000  # stop collecting problems after this many (the first is what is shown)
_MAX_DB_INT = 2_147_483_647  # PositiveIntegerField's upper bound on every backend


@dataclass(frozen=True)
class VotesImportResult:
    """What ``votes_import_csv`` wrote."""

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
class _Row:
    """One parsed CSV row, checked against itself (not yet against the other rows or the DB)."""

    line: int
    comparison: Comparison
    block: str
    rater: str
    position: int
    swapped: bool
    is_repeat: bool
    label: str
    confidence: int | None
    rationale: str
    response_ms: int | None
    axis_scores: dict[str, int]
    # Filled while checking against the database:
    trial: Trial | None = None  # an existing unanswered trial this row answers
    new_trial: Trial | None = None


@dataclass
class _Problems:
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


# --------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------


def votes_import_csv(*, study: Study, path: Path, user: Any = None) -> VotesImportResult:
    """Import a human votes CSV (SPEC §8) into ``study``: all rows or nothing.

    Raises ``ValidationFailed`` (one line: file, line, field) on the first problem found after
    checking every row, and writes nothing in that case. Records an ``AuditEvent``
    (``votes.import``) on success.
    """
    if study.kind != StudyKind.PAIRWISE_REFERENCE:
        from annotation.services.kind_votes import kind_votes_import_csv  # it imports this module

        return kind_votes_import_csv(study=study, path=path, user=user)
    path = Path(path)
    name = path.name or "votes.csv"
    header, records = _read_csv(path, name)
    axis_ids = study_axis_ids(study=study)
    _check_header(header, axis_ids, name)
    try:
        with transaction.atomic():
            # Serializes concurrent imports into one study (slots, block items, positions).
            list(Study.objects.select_for_update().filter(pk=study.pk).values_list("pk", flat=True))
            result = _import(study=study, header=header, records=records, axis_ids=axis_ids, name=name)
            audit_record(action="votes.import", user=user, study=study, target=name, **result.as_dict())
    except IntegrityError as exc:  # a concurrent writer took a slot / position first
        raise Conflict(f"{name}: the study changed while importing ({exc}); run the import again") from None
    return result


def _read_csv(path: Path, name: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
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
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
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
    return [h.strip() for h in header], records


def _check_header(header: list[str], axis_ids: list[str], name: str) -> None:
    expected_axes = [AXIS_PREFIX + a for a in axis_ids]
    seen: set[str] = set()
    for col in header:
        if col in seen:
            raise ValidationFailed(f"{name} line 1, field '{col}': the column appears twice")
        seen.add(col)
        if col in VOTES_BASE_COLUMNS or col in expected_axes:
            continue
        if col.startswith(AXIS_PREFIX):
            known = ", ".join(axis_ids) or "none"
            raise ValidationFailed(
                f"{name} line 1, field '{col}': unknown axis column (the study's axes: {known})"
            )
        raise ValidationFailed(
            f"{name} line 1, field '{col}': unknown column (expected {', '.join(VOTES_BASE_COLUMNS)}"
            f" and one axis:<AXIS_ID> column per study axis)"
        )
    for col in (*VOTES_BASE_COLUMNS, *expected_axes):
        if col not in seen:
            raise ValidationFailed(f"{name} line 1, field '{col}': missing required column")


def _parse_rows(
    *,
    study: Study,
    header: list[str],
    records: list[tuple[int, list[str]]],
    axis_ids: list[str],
    problems: _Problems,
) -> list[_Row]:
    """Row-local checks: identities, values, axis membership. Returns the rows that passed."""
    comparisons = {
        c.external_id: c
        for c in Comparison.objects.filter(study=study).select_related(
            "page", "candidate_a__system", "candidate_b__system"
        )
    }
    axes = list(Axis.objects.filter(study=study).order_by("position"))
    active_by_page: dict[int, set[str]] = {}

    def active(page: Page) -> set[str]:
        if page.pk not in active_by_page:
            active_by_page[page.pk] = set(page.active_axis_ids(axes))
        return active_by_page[page.pk]

    rows: list[_Row] = []
    width = len(header)
    for line, fields in records:
        if len(fields) != width:
            problems.add_line(line, f"expected {width} fields as in the header, got {len(fields)}")
            continue
        raw = dict(zip(header, fields, strict=True))
        value = {k: (v if k == "rationale" else v.strip()) for k, v in raw.items()}
        n_before = len(problems.items)

        comparison = comparisons.get(value["comparison"])
        if comparison is None:
            shown = value["comparison"]
            problems.add(
                line, "comparison",
                f"unknown comparison {shown!r} in study '{study.slug}'" if shown else "empty; expected a comparison id",
            )
        else:
            for col, want in (
                ("page", comparison.page.external_id),
                ("system_a", comparison.candidate_a.system.external_id),
                ("system_b", comparison.candidate_b.system.external_id),
            ):
                if value[col] != want:
                    problems.add(line, col, f"comparison '{comparison.external_id}' has {col} {want!r}, got {value[col]!r}")
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
        swapped = _flag(value["swapped"])
        if swapped is None:
            problems.add(line, "swapped", f"expected 0 or 1, got {value['swapped']!r}")
        is_repeat = _flag(value["repeat"])
        if is_repeat is None:
            problems.add(line, "repeat", f"expected 0 or 1, got {value['repeat']!r}")
        label = value["label"]
        if label not in VOTE_LABELS:
            problems.add(line, "label", f"expected one of {_LABELS_TEXT}, got {label!r}")
        confidence: int | None = None
        if value["confidence"] == "" and label == Label.CANNOT_JUDGE:
            pass
        else:
            conf = _int(value["confidence"])
            if conf is None or not 1 <= conf <= 5:
                problems.add(line, "confidence", f"expected an integer 1–5, got {value['confidence']!r}")
            else:
                confidence = conf
        response_ms: int | None = None
        if value["response_ms"] != "":
            response_ms = _uint(value["response_ms"])
            if response_ms is None or response_ms > _MAX_DB_INT:
                problems.add(
                    line, "response_ms", f"expected a non-negative integer or empty, got {value['response_ms']!r}"
                )
        scores: dict[str, int] = {}
        if comparison is not None and label in VOTE_LABELS:
            page_active = active(comparison.page)
            for axis_id in axis_ids:
                col = AXIS_PREFIX + axis_id
                cell = value[col]
                if label == Label.CANNOT_JUDGE:
                    if cell != "":
                        problems.add(line, col, f"must be empty for a CANNOT_JUDGE vote, got {cell!r}")
                elif axis_id in page_active:
                    score = _int(cell)
                    if score is None or not -2 <= score <= 2:
                        got = "empty" if cell == "" else repr(cell)
                        problems.add(
                            line, col,
                            f"expected an integer −2…2 (axis active on page '{comparison.page.external_id}'), got {got}",
                        )
                    else:
                        scores[axis_id] = score
                elif cell != "":
                    problems.add(
                        line, col,
                        f"must be empty: the axis is inactive on page '{comparison.page.external_id}', got {cell!r}",
                    )
        if len(problems.items) > n_before or comparison is None:
            continue
        assert position is not None and swapped is not None and is_repeat is not None
        rows.append(
            _Row(
                line=line, comparison=comparison, block=value["block"], rater=value["rater"],
                position=position, swapped=swapped, is_repeat=is_repeat, label=label,
                confidence=confidence, rationale=raw["rationale"], response_ms=response_ms,
                axis_scores=scores,
            )
        )
    return rows


def _check_file_consistency(rows: list[_Row], problems: _Problems) -> None:
    """Checks across rows: block membership, positions, main/repeat multiplicity, repeats' originals."""
    block_of: dict[int, tuple[str, int]] = {}
    positions: dict[tuple[str, str, int], int] = {}
    mains: dict[tuple[str, int], int] = {}
    repeats: dict[tuple[str, int], int] = {}
    for row in rows:
        cid = row.comparison.pk
        first = block_of.setdefault(cid, (row.block, row.line))
        if first[0] != row.block:
            problems.add(
                row.line, "block",
                f"comparison '{row.comparison.external_id}' is in block {first[0]!r} (line {first[1]}), got {row.block!r}",
            )
        key = (row.block, row.rater, row.position)
        if key in positions:
            problems.add(
                row.line, "position",
                f"rater {row.rater!r} already has position {row.position} in block {row.block!r} (line {positions[key]})",
            )
        else:
            positions[key] = row.line
        seen = repeats if row.is_repeat else mains
        pair = (row.rater, cid)
        if pair in seen:
            what = "a hidden repeat (at most one per rater and comparison)" if row.is_repeat else "a main vote"
            problems.add(
                row.line, "repeat",
                f"rater {row.rater!r} already has {what} on comparison '{row.comparison.external_id}' (line {seen[pair]})",
            )
        else:
            seen[pair] = row.line


def _import(
    *, study: Study, header: list[str], records: list[tuple[int, list[str]]], axis_ids: list[str], name: str
) -> VotesImportResult:
    problems = _Problems(name)
    rows = _parse_rows(study=study, header=header, records=records, axis_ids=axis_ids, problems=problems)
    _check_file_consistency(rows, problems)
    problems.raise_if_any()

    # ---- What is stored already (read once) ----------------------------------------------
    blocks = {b.name: b for b in Block.objects.filter(study=study)}
    block_by_name_for_row = {row.block for row in rows}
    block_of_comparison = {
        item.comparison_id: item.block
        for item in BlockItem.objects.filter(
            block__study=study, comparison_id__in={r.comparison.pk for r in rows}
        ).select_related("block")
    }
    raters = {r.external_id: r for r in Rater.objects.filter(study=study, external_id__in={r.rater for r in rows})}
    live = Assignment.objects.filter(block__study=study).exclude(state=AssignmentState.VOIDED)
    live_slots: dict[int, set[int]] = defaultdict(set)
    live_by_block_rater: dict[tuple[int, int], Assignment] = {}
    for a in live.filter(block__name__in=block_by_name_for_row):
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
    # Trials of reused assignments: by position, main trial per comparison, repeats per comparison.
    trial_at: dict[tuple[int, int], Trial] = {}
    main_trial: dict[tuple[int, int], Trial] = {}
    repeat_trials: dict[tuple[int, int], list[Trial]] = defaultdict(list)
    answered: set[int] = set()
    if reused:
        trials = list(Trial.objects.filter(assignment_id__in=reused, comparison__isnull=False))
        answered = set(Vote.objects.filter(trial__in=trials).values_list("trial_id", flat=True))
        for t in trials:
            trial_at[t.assignment_id, t.position] = t
            if t.attention_expected:  # a planned attention check: no SPEC §8 row answers it
                continue
            if t.is_repeat:
                repeat_trials[t.assignment_id, t.comparison_id].append(t)  # type: ignore[index]
            else:
                main_trial[t.assignment_id, t.comparison_id] = t  # type: ignore[index]

    # ---- Checks against stored state -----------------------------------------------------
    file_mains = {(row.rater, row.comparison.pk) for row in rows if not row.is_repeat}
    for row in rows:
        stored_block = block_of_comparison.get(row.comparison.pk)
        if stored_block is not None and stored_block.name != row.block:
            problems.add(
                row.line, "block",
                f"comparison '{row.comparison.external_id}' belongs to block {stored_block.name!r}, got {row.block!r}",
            )
            continue
        block = blocks.get(row.block)
        rater = raters.get(row.rater)
        live_a = live_by_block_rater.get((block.pk, rater.pk)) if block and rater else None
        if live_a is None:
            if row.is_repeat and (row.rater, row.comparison.pk) not in file_mains:
                problems.add(
                    row.line, "repeat",
                    f"a hidden repeat needs a main vote of rater {row.rater!r} on comparison "
                    f"'{row.comparison.external_id}' (neither in the file nor stored)",
                )
            continue
        cid = row.comparison.pk
        existing = trial_at.get((live_a.pk, row.position))
        if existing is not None:
            if existing.pk in answered:
                problems.add(
                    row.line, "position",
                    f"rater {row.rater!r} already answered position {row.position} in block {row.block!r}",
                )
                continue
            if (existing.comparison_id, existing.swapped, existing.is_repeat) != (cid, row.swapped, row.is_repeat):
                problems.add(
                    row.line, "position",
                    f"position {row.position} of rater {row.rater!r} in block {row.block!r} is a planned trial of "
                    f"another comparison, orientation or repeat flag",
                )
                continue
            if existing.attention_expected:
                problems.add(
                    row.line, "position",
                    f"position {row.position} of rater {row.rater!r} in block {row.block!r} is a planned "
                    f"attention check, not a data trial",
                )
                continue
            row.trial = existing
        elif not row.is_repeat and (live_a.pk, cid) in main_trial:
            t = main_trial[live_a.pk, cid]
            problems.add(
                row.line, "position",
                f"rater {row.rater!r} already has comparison '{row.comparison.external_id}' at position "
                f"{t.position} in block {row.block!r}",
            )
            continue
        elif row.is_repeat and repeat_trials.get((live_a.pk, cid)):
            problems.add(
                row.line, "repeat",
                f"rater {row.rater!r} already has a hidden repeat of comparison '{row.comparison.external_id}' "
                f"(at most one per rater and comparison)",
            )
            continue
        if row.is_repeat and (row.rater, cid) not in file_mains:
            original = main_trial.get((live_a.pk, cid))
            if original is None or original.pk not in answered:
                problems.add(
                    row.line, "repeat",
                    f"a hidden repeat needs a main vote of rater {row.rater!r} on comparison "
                    f"'{row.comparison.external_id}' (neither in the file nor stored)",
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
                study=study, name=block_name, position=next_block_position, target_raters=max(1, len(block_raters))
            )
            next_block_position += 1
            counts["blocks_created"] += 1

    # Block items for comparisons new to their block, in order of first appearance.
    new_items: list[BlockItem] = []
    next_item_position: dict[int, int] = {}
    for row in rows:
        cid = row.comparison.pk
        if cid in block_of_comparison:
            continue
        block = blocks[row.block]
        if block.pk not in next_item_position:
            last = BlockItem.objects.filter(block=block).order_by("-position").values_list("position", flat=True).first()
            next_item_position[block.pk] = 0 if last is None else last + 1
        new_items.append(BlockItem(block=block, position=next_item_position[block.pk], comparison=row.comparison))
        next_item_position[block.pk] += 1
        block_of_comparison[cid] = block
    BlockItem.objects.bulk_create(new_items)
    counts["block_items_created"] = len(new_items)

    new_raters = [Rater(study=study, external_id=rid, source=Rater.Source.IMPORT)
                  for rid in dict.fromkeys(row.rater for row in rows) if rid not in raters]
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
                    block=block, slot=slot, rater=raters[rid], state=AssignmentState.FINISHED,
                    claimed_at=now, started_at=now, finished_at=now,
                )
                counts["assignments_created"] += 1
            else:
                assignment_of[block_name, rid] = held
                counts["assignments_reused"] += 1

    # Trials: main ones first (repeats point at them), then repeats.
    main_of: dict[tuple[int, int], Trial] = dict(main_trial)
    for is_repeat in (False, True):
        batch: list[Trial] = []
        for row in rows:
            if row.is_repeat != is_repeat or row.trial is not None:
                continue
            a = assignment_of[row.block, row.rater]
            row.new_trial = Trial(
                assignment=a, position=row.position, comparison=row.comparison, swapped=row.swapped,
                is_repeat=row.is_repeat,
                repeat_of=main_of[a.pk, row.comparison.pk] if row.is_repeat else None,
                shown_at=None,
            )
            batch.append(row.new_trial)
        Trial.objects.bulk_create(batch)
        counts["trials_created"] += len(batch)
        if not is_repeat:
            for row in rows:
                if not row.is_repeat:
                    main = row.trial or row.new_trial
                    assert main is not None
                    main_of[main.assignment_id, row.comparison.pk] = main
    counts["trials_answered"] = sum(1 for row in rows if row.trial is not None)

    Vote.objects.bulk_create(
        [
            Vote(
                trial=row.trial or row.new_trial, label=row.label, confidence=row.confidence,
                axis_scores=row.axis_scores, rationale=row.rationale, response_ms=row.response_ms,
            )
            for row in rows
        ],
        batch_size=2000,
    )
    # A reused (planned) assignment whose every trial is now answered is finished.
    for a in reused.values():
        if a.state in (AssignmentState.OPEN, AssignmentState.ACTIVE) and not Trial.objects.filter(
            assignment=a, vote__isnull=True
        ).exists():
            Assignment.objects.filter(pk=a.pk).update(state=AssignmentState.FINISHED, finished_at=now)
    return VotesImportResult(
        rows=len(rows),
        main_votes=sum(1 for row in rows if not row.is_repeat),
        repeat_votes=sum(1 for row in rows if row.is_repeat),
        blocks_created=counts["blocks_created"],
        block_items_created=counts["block_items_created"],
        raters_created=counts["raters_created"],
        assignments_created=counts["assignments_created"],
        assignments_reused=counts["assignments_reused"],
        trials_created=counts["trials_created"],
        trials_answered=counts["trials_answered"],
    )


def _uint(text: str) -> int | None:
    return int(text) if _UINT.fullmatch(text) else None


def _int(text: str) -> int | None:
    return int(text) if _INT.fullmatch(text) else None


def _flag(text: str) -> bool | None:
    return {"0": False, "1": True}.get(text)


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def votes_export_csv(*, study: Study, path: Path) -> int:
    """Write the study's votes as a SPEC §8 votes CSV; return the number of rows.

    Votes of voided assignments and of attention checks are left out; only the SPEC columns are
    written (so the file imports again unchanged). Rows are in block, assignment slot, trial
    position order. The file is written next to ``path`` and moved into place, so a failed export
    leaves no partial file. Studies of the other kinds are written by ``kind_votes_export_csv``.
    """
    if study.kind != StudyKind.PAIRWISE_REFERENCE:
        from annotation.services.kind_votes import kind_votes_export_csv  # it imports this module

        return kind_votes_export_csv(study=study, path=path)
    axis_ids = study_axis_ids(study=study)
    header = [*VOTES_BASE_COLUMNS, *(AXIS_PREFIX + a for a in axis_ids)]
    # vote_rows leaves attention checks out: the SPEC §8 columns have no place for them.
    rows = (
        [
            v.comparison, v.page, v.system_a, v.system_b, v.block, v.rater, v.position,
            int(v.swapped), int(v.is_repeat), v.label,
            "" if v.confidence is None else v.confidence,
            v.rationale,
            "" if v.response_ms is None else v.response_ms,
            *("" if v.axis_scores.get(a) is None else int(v.axis_scores[a]) for a in axis_ids),
        ]
        for v in vote_rows(study=study)
    )
    return _write_csv(path=Path(path), header=header, rows=rows)


def _write_csv(*, path: Path, header: list[str], rows: Iterable[list[Any]]) -> int:
    """Write ``header`` and ``rows`` to ``path`` atomically; return the number of rows.

    The file is written next to ``path`` and moved into place, so a failed export leaves no
    partial file.
    """
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=".votes-", suffix=".csv", dir=directory)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh, lineterminator="\n")
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
