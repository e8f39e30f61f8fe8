"""Human votes CSV of the other study kinds (SPEC §11 "votes exports gain the kind's answer columns").

The ``pairwise``, ``checklist`` and ``rating`` kinds run on the same blocks, assignments and
trials as ``pairwise_reference`` (docs/study-kinds.md), so their votes CSV follows the SPEC §8
rules of ``annotation.services.votes`` (both run on ``annotation.services.votes_common``, which
holds every step but the columns and the answers): the whole file is validated before
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

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation.errors import ArbiterError
from annotation.models import (
    AssignmentState,
    Candidate,
    ChecklistAnswer,
    Comparison,
    Label,
    Predicate,
    Study,
    StudyKind,
    Trial,
    Vote,
)
from annotation.services.votes import VOTES_BASE_COLUMNS
from annotation.services.votes_common import (
    ImportRow,
    Problems,
    Record,
    Unit,
    VotesImportResult,
    check_header,
    import_row,
    parse_int,
    parse_pairwise_answer,
    parse_placement,
    parse_response_ms,
    parse_unit,
    row_values,
    votes_csv_import,
    write_csv,
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

    def check_header(self, header: list[str], name: str) -> None:
        _check_header(header, self, name)

    def parse_rows(self, header: list[str], records: list[Record], problems: Problems) -> list[ImportRow]:
        return _parse_rows(kind=self, header=header, records=records, problems=problems)

    def planned_mismatch(self, row: ImportRow, trial: Trial) -> str | None:
        planned = (
            getattr(trial, f"{self.unit_field}_id"),
            trial.swapped,
            trial.is_repeat,
            trial.attention_expected,
        )
        if planned == (row.unit.pk, row.swapped, row.is_repeat, row.attention):
            return None
        orientation = "orientation, " if self.pairwise else ""
        return (
            f"position {row.position} of rater {row.rater!r} in block {row.block!r} is a planned trial of "
            f"another {self.unit_column}, {orientation}repeat flag or attention check"
        )

    def units(self) -> dict[str, Unit]:
        """The study's units by bundle id, with their identity columns."""
        study = self.study
        if study.kind == StudyKind.PAIRWISE:
            return {
                c.external_id: Unit(
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
                p.external_id: Unit(
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
            c.external_id: Unit(
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
    return votes_csv_import(fmt=_Kind(study), path=path, user=user)


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

    def unknown(col: str) -> str:
        if col.startswith(RATING_PREFIX) and study.kind == StudyKind.RATING:
            return f"unknown rating column (the study's dimensions: {', '.join(kind.dimensions) or 'none'})"
        owner = _column_owner(col)
        where = (
            f"a column of the {owner} votes CSV, but study '{study.slug}' is a {study.kind} study"
            if owner
            else "unknown column"
        )
        return f"{where} (expected {', '.join(expected)})"

    check_header(header=header, expected=expected, name=name, unknown=unknown)


def _parse_rows(
    *, kind: _Kind, header: list[str], records: list[Record], problems: Problems
) -> list[ImportRow]:
    """Row-local checks: identities, values, answers of the kind. Returns the rows that passed."""
    study = kind.study
    units = kind.units()
    attention_answers = kind.attention_answers()
    low, high = kind.scale
    rows: list[ImportRow] = []
    for line, raw, value in row_values(header, records, problems, text_columns=_TEXT_COLUMNS):
        n_before = len(problems.items)
        unit = parse_unit(
            value=value, column=kind.unit_column, units=units, study=study, line=line, problems=problems
        )
        placement = parse_placement(value=value, line=line, problems=problems, swapped=kind.pairwise)
        attention = value["attention"]
        if attention and study.kind == StudyKind.RATING and parse_int(attention) is not None:
            attention = str(parse_int(attention))  # "+3" / "03" → "3", as the scheduler writes it
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
        elif attention and placement.is_repeat:
            problems.add(
                line,
                "repeat",
                f"an attention check (attention {attention!r}) is never a hidden repeat; expected 0",
            )
        response_ms = parse_response_ms(value=value, line=line, problems=problems)

        label, rationale = "", ""
        confidence: int | None = None
        answers: dict[str, Any] = {}
        if study.kind == StudyKind.PAIRWISE:
            label, confidence = parse_pairwise_answer(value=value, line=line, problems=problems)
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
                score = parse_int(value[col])
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
        vote = {
            "label": label,
            "confidence": confidence,
            "rationale": rationale,
            "answers": answers,
            "response_ms": response_ms,
        }
        rows.append(import_row(line=line, unit=unit, placement=placement, vote=vote, attention=attention))
    return rows


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
    return write_csv(path=Path(path), header=header, rows=_export_rows(study, header))


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
