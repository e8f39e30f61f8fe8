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

Both importers run on ``annotation.services.votes_common`` (reading, the checks across rows and
against stored state, every write, the audit record, the export writer); this module keeps only
what is particular to the SPEC §8 file: its columns, the comparison's identity, labels,
confidence and axis scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from annotation.errors import ValidationFailed
from annotation.models import Axis, Comparison, Label, Page, Study, StudyKind, Trial
from annotation.selectors.votes import AXIS_PREFIX, study_axis_ids, study_has_revised_votes, vote_rows
from annotation.services.votes_common import (
    ImportRow,
    Problems,
    Record,
    Unit,
    VotesImportResult,
    check_header,
    import_row,
    parse_flag,
    parse_int,
    parse_pairwise_answer,
    parse_placement,
    parse_response_ms,
    parse_unit,
    row_values,
    votes_csv_import,
    write_csv,
)

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
# SPEC §8 optional trailing columns: the rater changed the answer with Undo (0/1), and the
# canonical label first given (empty unless revised). Export writes them when a vote of the
# study was revised (so a study without revisions exports exactly the SPEC columns, as before);
# import takes files with or without them.
VOTES_REVISION_COLUMNS: tuple[str, ...] = ("revised", "first_label")


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
    return votes_csv_import(fmt=_ReferenceFormat(study), path=path, user=user)


@dataclass
class _ReferenceFormat:
    """The SPEC §8 votes CSV as ``votes_csv_import`` sees it (a ``VotesCsvFormat``)."""

    study: Study
    unit_column: str = "comparison"
    unit_field: str = "comparison"

    @cached_property
    def axis_ids(self) -> list[str]:
        return study_axis_ids(study=self.study)

    def check_header(self, header: list[str], name: str) -> None:
        axis_ids = self.axis_ids

        def unknown(col: str) -> str:
            if col.startswith(AXIS_PREFIX):
                return f"unknown axis column (the study's axes: {', '.join(axis_ids) or 'none'})"
            return (
                f"unknown column (expected {', '.join(VOTES_BASE_COLUMNS)}"
                f" and one axis:<AXIS_ID> column per study axis, optionally {', '.join(VOTES_REVISION_COLUMNS)})"
            )

        expected = [*VOTES_BASE_COLUMNS, *(AXIS_PREFIX + a for a in axis_ids)]
        for col in VOTES_REVISION_COLUMNS:
            if header.count(col) > 1:
                raise ValidationFailed(f"{name} line 1, field '{col}': the column appears twice")
        required = [col for col in header if col not in VOTES_REVISION_COLUMNS]
        check_header(header=required, expected=expected, name=name, unknown=unknown)

    def parse_rows(self, header: list[str], records: list[Record], problems: Problems) -> list[ImportRow]:
        return _parse_rows(
            study=self.study, header=header, records=records, axis_ids=self.axis_ids, problems=problems
        )

    def planned_mismatch(self, row: ImportRow, trial: Trial) -> str | None:
        # A SPEC §8 row has no attention column, so it never answers a planned attention check.
        where = f"position {row.position} of rater {row.rater!r} in block {row.block!r}"
        if (trial.comparison_id, trial.swapped, trial.is_repeat) != (row.unit.pk, row.swapped, row.is_repeat):
            return f"{where} is a planned trial of another comparison, orientation or repeat flag"
        if trial.attention_expected:
            return f"{where} is a planned attention check, not a data trial"
        return None


def _parse_rows(
    *,
    study: Study,
    header: list[str],
    records: list[Record],
    axis_ids: list[str],
    problems: Problems,
) -> list[ImportRow]:
    """Row-local checks: identities, values, axis membership. Returns the rows that passed."""
    comparisons = {
        c.external_id: c
        for c in Comparison.objects.filter(study=study).select_related(
            "page", "candidate_a__system", "candidate_b__system"
        )
    }
    units = {
        cid: Unit(
            c.pk,
            c.external_id,
            {
                "page": c.page.external_id,
                "system_a": c.candidate_a.system.external_id,
                "system_b": c.candidate_b.system.external_id,
            },
        )
        for cid, c in comparisons.items()
    }
    axes = list(Axis.objects.filter(study=study).order_by("position"))
    active_by_page: dict[int, set[str]] = {}

    def active(page: Page) -> set[str]:
        if page.pk not in active_by_page:
            active_by_page[page.pk] = set(page.active_axis_ids(axes))
        return active_by_page[page.pk]

    rows: list[ImportRow] = []
    for line, raw, value in row_values(header, records, problems, text_columns=("rationale",)):
        n_before = len(problems.items)
        unit = parse_unit(
            value=value, column="comparison", units=units, study=study, line=line, problems=problems
        )
        placement = parse_placement(value=value, line=line, problems=problems, swapped=True)
        label, confidence = parse_pairwise_answer(value=value, line=line, problems=problems)
        response_ms = parse_response_ms(value=value, line=line, problems=problems)
        scores: dict[str, int] = {}
        if unit is not None and label in VOTE_LABELS:
            page = comparisons[unit.external_id].page
            page_active = active(page)
            for axis_id in axis_ids:
                col = AXIS_PREFIX + axis_id
                cell = value[col]
                if label == Label.CANNOT_JUDGE:
                    if cell != "":
                        problems.add(line, col, f"must be empty for a CANNOT_JUDGE vote, got {cell!r}")
                elif axis_id in page_active:
                    score = parse_int(cell)
                    if score is None or not -2 <= score <= 2:
                        got = "empty" if cell == "" else repr(cell)
                        problems.add(
                            line,
                            col,
                            f"expected an integer −2…2 (axis active on page '{page.external_id}'), got {got}",
                        )
                    else:
                        scores[axis_id] = score
                elif cell != "":
                    problems.add(
                        line,
                        col,
                        f"must be empty: the axis is inactive on page '{page.external_id}', got {cell!r}",
                    )
        history = _parse_revision(value=value, line=line, problems=problems)
        if len(problems.items) > n_before or unit is None:
            continue
        vote = {
            "label": label,
            "confidence": confidence,
            "axis_scores": scores,
            "rationale": raw["rationale"],
            "response_ms": response_ms,
            "history": history,
        }
        rows.append(import_row(line=line, unit=unit, placement=placement, vote=vote))
    return rows


def _parse_revision(*, value: dict[str, str], line: int, problems: Problems) -> list[dict[str, Any]]:
    """The optional ``revised`` / ``first_label`` cells as a ``Vote.history`` (one imported entry)."""
    revised_cell = value.get("revised", "")
    first = value.get("first_label", "")
    revised = parse_flag(revised_cell) if revised_cell != "" else False
    if revised is None:
        problems.add(line, "revised", f"expected 0, 1 or empty, got {revised_cell!r}")
        return []
    if not revised:
        if first != "":
            problems.add(line, "first_label", f"must be empty unless revised is 1, got {first!r}")
        return []
    if first not in VOTE_LABELS:
        problems.add(line, "first_label", f"expected one of {', '.join(VOTE_LABELS)} (revised is 1), got {first!r}")
        return []
    return [{"label": first, "imported": True}]


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
    revisions = study_has_revised_votes(study=study)
    header = [*VOTES_BASE_COLUMNS, *(AXIS_PREFIX + a for a in axis_ids), *(VOTES_REVISION_COLUMNS if revisions else ())]
    # vote_rows leaves attention checks out: the SPEC §8 columns have no place for them.
    rows = (
        [
            v.comparison,
            v.page,
            v.system_a,
            v.system_b,
            v.block,
            v.rater,
            v.position,
            int(v.swapped),
            int(v.is_repeat),
            v.label,
            "" if v.confidence is None else v.confidence,
            v.rationale,
            "" if v.response_ms is None else v.response_ms,
            *("" if v.axis_scores.get(a) is None else int(v.axis_scores[a]) for a in axis_ids),
            *((int(bool(v.history)), v.first_label) if revisions else ()),
        ]
        for v in vote_rows(study=study)
    )
    return write_csv(path=Path(path), header=header, rows=rows)
