"""The reference protocol (docs/protocol.md "The study model" to "Commands"): two candidate renderings judged
against the reference page.

Votes CSV (docs/protocol.md "Files"): ``comparison, page, system_a, system_b, block, rater, position, swapped,
repeat, label, confidence, rationale, response_ms``, then one ``axis:<AXIS_ID>`` column per study axis (empty
when the axis is inactive on the page), optionally ``revised, first_label``. Labels and axis scores
are canonical (docs/protocol.md "Canonical answers"). ``confidence`` is required (integer 1–5) for A, B and
TIE; it may be empty for CANNOT_JUDGE. An export writes the revision columns only when a vote of the study was
revised, so a study without revisions exports exactly the protocol columns. A row never answers a planned
attention check (the docs/protocol.md "Files" columns have no place for one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from annotation.errors import ValidationFailed
from annotation.kinds.base import ScheduleUnit, StudyDesign
from annotation.kinds.csv_rows import (
    ImportRow,
    OwnerOf,
    Problems,
    Record,
    Unit,
    check_header,
    import_row,
    parse_flag,
    parse_int,
    parse_pairwise_answer,
    parse_placement,
    parse_response_ms,
    parse_unit,
    row_values,
)
from annotation.kinds.judging import BOTH_ORDERS, REPLY_VERDICT, UNIT_COMPARISON, JudgeRequestPlan
from annotation.models import Axis, Comparison, ComparisonSet, Label, Page, Study, Trial, rater_page_options
from annotation.selectors.vote_rows import (
    AXIS_PREFIX,
    study_axis_ids,
    study_has_revised_votes,
    study_has_served_votes,
    vote_rows,
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
# docs/protocol.md "Files" optional trailing columns: the rater changed the answer with Undo (0/1), and the
# canonical label first given (empty unless revised). Export writes them when a vote of the
# study was revised (so a study without revisions exports exactly the protocol columns, as before);
# import takes files with or without them.
VOTES_REVISION_COLUMNS: tuple[str, ...] = ("revised", "first_label")
# Optional last column (issue 30): the axes the rater set with the verdict key and left unchanged,
# ";"-separated. Written when the study marks them (``rater_page.mark_defaulted_axes``); import
# accepts and ignores it.
VOTES_DEFAULTED_COLUMN = "axes_defaulted"
# Optional last column: a serve-time trial's allocation probability (docs/protocol.md "Serve-time
# choice"), written when the study has such votes, for the debiased scores; import ignores it.
VOTES_PROBABILITY_COLUMN = "allocation_probability"


@dataclass
class ReferenceVotesCsv:
    """The docs/protocol.md "Files" votes CSV (a ``VotesCsvFormat``)."""

    study: Study
    unit_column: str = "comparison"
    unit_field: str = "comparison"

    @cached_property
    def axis_ids(self) -> list[str]:
        return study_axis_ids(study=self.study)

    def check_header(self, header: list[str], name: str, owner_of: OwnerOf) -> None:
        axis_ids = self.axis_ids

        def unknown(col: str) -> str:
            if col.startswith(AXIS_PREFIX):
                return f"unknown axis column (the study's axes: {', '.join(axis_ids) or 'none'})"
            return (
                f"unknown column (expected {', '.join(VOTES_BASE_COLUMNS)}"
                f" and one axis:<AXIS_ID> column per study axis, optionally {', '.join(VOTES_REVISION_COLUMNS)})"
            )

        expected = [*VOTES_BASE_COLUMNS, *(AXIS_PREFIX + a for a in axis_ids)]
        optional = (*VOTES_REVISION_COLUMNS, VOTES_DEFAULTED_COLUMN, VOTES_PROBABILITY_COLUMN)
        for col in optional:
            if header.count(col) > 1:
                raise ValidationFailed(f"{name} line 1, field '{col}': the column appears twice")
        required = [col for col in header if col not in optional]
        check_header(header=required, expected=expected, name=name, unknown=unknown)

    def parse_rows(self, header: list[str], records: list[Record], problems: Problems) -> list[ImportRow]:
        return _parse_rows(
            study=self.study, header=header, records=records, axis_ids=self.axis_ids, problems=problems
        )

    def planned_mismatch(self, row: ImportRow, trial: Trial) -> str | None:
        # A docs/protocol.md "Files" row has no attention column, so it never answers a planned attention
        # check.
        where = f"position {row.position} of rater {row.rater!r} in block {row.block!r}"
        if (trial.comparison_id, trial.swapped, trial.is_repeat) != (row.unit.pk, row.swapped, row.is_repeat):
            return f"{where} is a planned trial of another comparison, orientation or repeat flag"
        if trial.attention_expected:
            return f"{where} is a planned attention check, not a data trial"
        return None

    @cached_property
    def defaulted(self) -> bool:
        return rater_page_options(self.study)["mark_defaulted_axes"]

    @cached_property
    def revisions(self) -> bool:
        return study_has_revised_votes(study=self.study)

    @cached_property
    def served(self) -> bool:
        return study_has_served_votes(study=self.study)

    def export_header(self) -> list[str]:
        return [
            *VOTES_BASE_COLUMNS,
            *(AXIS_PREFIX + a for a in self.axis_ids),
            *(VOTES_REVISION_COLUMNS if self.revisions else ()),
            *((VOTES_DEFAULTED_COLUMN,) if self.defaulted else ()),
            *((VOTES_PROBABILITY_COLUMN,) if self.served else ()),
        ]

    def export_rows(self, header: list[str]) -> Iterator[list[Any]]:
        """Every stored vote but those of voided assignments and of attention checks (the
        docs/protocol.md "Files" columns have no place for them), in block, assignment slot, trial position
        order."""
        axis_ids, revisions, defaulted, served = self.axis_ids, self.revisions, self.defaulted, self.served
        for v in vote_rows(study=self.study):
            yield [
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
                *((";".join(v.answers.get("axes_defaulted") or ()),) if defaulted else ()),
                *(("" if v.allocation_probability is None else repr(v.allocation_probability),) if served else ()),
            ]


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


def eligible_comparisons(study: Study) -> list[Comparison]:
    """Human-set comparisons whose two candidates both rendered
    (docs/protocol.md "The study model", "Planning the human study")."""
    return list(
        Comparison.objects.filter(
            study=study,
            set=ComparisonSet.HUMAN,
            candidate_a__rendered=True,
            candidate_b__rendered=True,
            candidate_a__image__isnull=False,
            candidate_b__image__isnull=False,
        )
        .select_related("page")
        .order_by("page__position", "page__external_id", "external_id")
    )


@dataclass(frozen=True)
class PairwiseReferenceDesign(StudyDesign):
    image_slots = ("ref", "left", "right")
    trial_unit_related = ("comparison__page__image",)  # the reference's size sizes its <img>
    has_axes = True
    unit_field = "comparison"
    has_attention_checks = False
    asks_comprehension = False
    counterbalanced = False
    new_study_makes = ("kind", "systems", "pages", "candidates")
    keeps_page_text = True  # "more text" of the disagreement lens counts characters

    def schedule_units(self, study: Study) -> list[ScheduleUnit]:
        return [ScheduleUnit(c, c.page_id) for c in eligible_comparisons(study)]

    def default_rater_targets(self, study: Study, blocks: int) -> list[int]:
        return [5, 5, 5, 5, 5, 4, 2, 2]  # docs/protocol.md "Commands"

    def votes_csv(self, study: Study) -> ReferenceVotesCsv:
        return ReferenceVotesCsv(study)

    def judge_plan(self, study: Study) -> JudgeRequestPlan:
        """REFERENCE, CANDIDATE A, CANDIDATE B and the verdict (docs/protocol.md "Judges and calibration");
        the default prompt is the protocol's (``judges.prompts.DEFAULT_JUDGE_PROMPT``)."""
        return JudgeRequestPlan(
            unit=UNIT_COMPARISON,
            slots=(("REFERENCE", "reference"), ("CANDIDATE A", "first"), ("CANDIDATE B", "second")),
            reply=REPLY_VERDICT,
            orders=BOTH_ORDERS,
            default_prompt="",
        )

    def owns_votes_column(self, column: str) -> bool:
        return column.startswith(AXIS_PREFIX) or column in VOTES_BASE_COLUMNS


DESIGN = PairwiseReferenceDesign(
    kind="pairwise_reference",
    label="Pairwise with reference",
    unit="comparison",
    has_reference=True,
    pairwise=True,
)
