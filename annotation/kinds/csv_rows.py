"""One row of a votes CSV, as every study kind parses it (docs/protocol.md "Files",
docs/study-kinds.md "Votes CSV").

The cells every votes CSV shares (placement, response time, the pairwise answer), the one-line
problems, the unit a row names, and ``AttentionVotesCsv``: the layout of the kinds whose file
carries an ``attention`` column (``pairwise``, ``checklist``, ``rating``). Each kind's design
(``annotation.kinds.<kind>``) builds its ``VotesCsvFormat`` from these; the exchange itself (reading
the file, the checks across rows and against what is stored, every write) is
``annotation.services.votes_csv``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from annotation.errors import ValidationFailed
from annotation.models import PAIRWISE_LABELS, AssignmentState, Block, Label, Rater, Study, Trial, Vote

MAX_DB_INT = 2_147_483_647  # PositiveIntegerField's upper bound on every backend
# Bounded (int() of 4,300+ digits raises ValueError); longer numbers are over MAX_DB_INT anyway.
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_UINT = re.compile(r"[0-9]{1,18}")
_MAX_REPORTED = 1000  # stop collecting problems after this many (the first is what is shown)

Record = tuple[int, list[str]]  # (first physical line of the row, its fields)


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



OwnerOf = Callable[[str], "str | None"]  # the study kind whose votes CSV has a column, if any


class VotesCsvFormat(Protocol):
    """What differs between the votes CSVs of the study kinds."""

    study: Study

    @property
    def unit_column(self) -> str:
        """The column naming the unit; also the unit's name in messages."""
        ...

    @property
    def unit_field(self) -> str:
        """The Trial / BlockItem foreign key naming the unit."""
        ...

    def check_header(self, header: list[str], name: str, owner_of: OwnerOf) -> None:
        """Raise ``ValidationFailed`` on the first missing, repeated or unknown column."""

    def parse_rows(self, header: list[str], records: list[Record], problems: Problems) -> list[ImportRow]:
        """Row-local checks; returns the rows that passed."""
        ...

    def planned_mismatch(self, row: ImportRow, trial: Trial) -> str | None:
        """Why ``row`` cannot answer the unanswered planned ``trial`` at its position, if it cannot."""
        ...

    def export_header(self) -> list[str]:
        """The columns an export writes, in order."""
        ...

    def export_rows(self, header: list[str]) -> Iterable[list[Any]]:
        """The exported rows (cells in ``header`` order)."""
        ...


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




# --------------------------------------------------------------------------------------------
# The layout with an attention column (pairwise, checklist, rating;
# docs/study-kinds.md "Running the other study kinds")
# --------------------------------------------------------------------------------------------

TEXT_COLUMNS = ("rationale", "evidence")  # free text, kept exactly as written
# Column → ORM path from Vote of the placement and answer cells (a kind adds its identity paths).
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


@dataclass
class AttentionVotesCsv:
    """The votes CSV of a kind that exports its attention checks (docs/study-kinds.md).

    ``attention`` is the trial's ``attention_expected``: empty for a data trial, otherwise the
    answer the instructed-response check told the rater to give, as displayed. A check row is
    never a hidden repeat and is not the rater's main vote on its unit. A kind says its columns,
    its units and how its answer cells parse.
    """

    study: Study
    unit_column: ClassVar[str]
    unit_field: ClassVar[str]
    has_swapped: ClassVar[bool] = False  # only a two-image kind has the ``swapped`` column
    identity_paths: ClassVar[dict[str, str]]  # identity column → ORM path from Vote

    def columns(self) -> list[str]:
        raise NotImplementedError

    def units(self) -> dict[str, Unit]:
        """The study's units by bundle id, with their identity columns."""
        raise NotImplementedError

    def attention_answers(self) -> tuple[str, ...]:
        raise NotImplementedError

    def attention_cell(self, cell: str) -> str:
        """The ``attention`` cell as the scheduler writes it."""
        return cell

    def attention_expected(self) -> str:
        return f"one of {', '.join(self.attention_answers())}"

    def unknown_own_column(self, col: str) -> str | None:
        """What is wrong with an unknown column that looks like one of this kind's, if it does."""
        return None

    def parse_answer(
        self, *, value: dict[str, str], raw: dict[str, str], line: int, problems: Problems
    ) -> dict[str, Any]:
        """The Vote fields ``label``, ``confidence``, ``rationale`` and ``answers`` of a row."""
        raise NotImplementedError

    def export_answer(self, v: dict[str, Any]) -> None:
        """Add the kind's answer cells to an exported row ``v`` (column → value)."""

    # ---- the VotesCsvFormat protocol

    def check_header(self, header: list[str], name: str, owner_of: OwnerOf) -> None:
        study = self.study
        expected = self.columns()

        def unknown(col: str) -> str:
            own = self.unknown_own_column(col)
            if own is not None:
                return own
            owner = owner_of(col)
            where = (
                f"a column of the {owner} votes CSV, but study '{study.slug}' is a {study.kind} study"
                if owner
                else "unknown column"
            )
            return f"{where} (expected {', '.join(expected)})"

        check_header(header=header, expected=expected, name=name, unknown=unknown)

    def parse_rows(self, header: list[str], records: list[Record], problems: Problems) -> list[ImportRow]:
        """Row-local checks: identities, values, answers of the kind. Returns the rows that passed."""
        study = self.study
        units = self.units()
        attention_answers = self.attention_answers()
        rows: list[ImportRow] = []
        for line, raw, value in row_values(header, records, problems, text_columns=TEXT_COLUMNS):
            n_before = len(problems.items)
            unit = parse_unit(
                value=value, column=self.unit_column, units=units, study=study, line=line, problems=problems
            )
            placement = parse_placement(value=value, line=line, problems=problems, swapped=self.has_swapped)
            attention = self.attention_cell(value["attention"]) if value["attention"] else ""
            if attention and attention not in attention_answers:
                problems.add(
                    line,
                    "attention",
                    f"expected empty (a data trial) or {self.attention_expected()} (the answer an attention "
                    f"check asks for), got {attention!r}",
                )
            elif attention and placement.is_repeat:
                problems.add(
                    line,
                    "repeat",
                    f"an attention check (attention {attention!r}) is never a hidden repeat; expected 0",
                )
            response_ms = parse_response_ms(value=value, line=line, problems=problems)
            answer = self.parse_answer(value=value, raw=raw, line=line, problems=problems)
            if len(problems.items) > n_before or unit is None:
                continue
            vote = {**answer, "response_ms": response_ms}
            rows.append(import_row(line=line, unit=unit, placement=placement, vote=vote, attention=attention))
        return rows

    def planned_mismatch(self, row: ImportRow, trial: Trial) -> str | None:
        planned = (
            getattr(trial, f"{self.unit_field}_id"),
            trial.swapped,
            trial.is_repeat,
            trial.attention_expected,
        )
        if planned == (row.unit.pk, row.swapped, row.is_repeat, row.attention):
            return None
        orientation = "orientation, " if self.has_swapped else ""
        return (
            f"position {row.position} of rater {row.rater!r} in block {row.block!r} is a planned trial of "
            f"another {self.unit_column}, {orientation}repeat flag or attention check"
        )

    def export_header(self) -> list[str]:
        return self.columns()

    def export_rows(self, header: list[str]) -> Iterator[list[Any]]:
        """Every answered trial on a unit of the kind in an assignment with a rater, attention checks
        included, but not those of voided assignments; in block, slot, position order."""
        paths = {**self.identity_paths, **_TRIAL_PATHS}
        qs = (
            Vote.objects.filter(
                trial__assignment__block__study=self.study,
                trial__assignment__rater__isnull=False,
                **{f"trial__{self.unit_field}__isnull": False},
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
            self.export_answer(v)
            yield [v[col] for col in header]
