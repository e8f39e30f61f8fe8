"""Reads of canonical human votes (SPEC §3, §5, §8): the per-vote table every analysis uses.

One query (``values_list`` over the joins), no per-row lookups: 10,000 votes take a few tens of
milliseconds. Only pairwise votes are read: trials on a comparison whose vote carries one of the
labels A, B, TIE, CANNOT_JUDGE, in assignments that have a rater.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from annotation.models import PAIRWISE_LABELS, AssignmentState, Axis, Study, Vote

AXIS_PREFIX = "axis:"

# Output column → ORM path, in output order (before the axis columns).
_FIELDS: dict[str, str] = {
    "comparison": "trial__comparison__external_id",
    "page": "trial__comparison__page__external_id",
    "block": "trial__assignment__block__name",
    "rater": "trial__assignment__rater__external_id",
    "system_a": "trial__comparison__candidate_a__system__external_id",
    "system_b": "trial__comparison__candidate_b__system__external_id",
    "position": "trial__position",
    "swapped": "trial__swapped",
    "is_repeat": "trial__is_repeat",
    "label": "label",
    "confidence": "confidence",
    "response_ms": "response_ms",
    "rationale": "rationale",
    "voided": "trial__assignment__state",
    "axis_scores": "axis_scores",
    "history": "history",
}


@dataclass(frozen=True)
class VoteRow:
    """One stored pairwise vote with the identities of the SPEC §8 votes CSV (canonical values)."""

    comparison: str
    page: str
    block: str
    rater: str
    system_a: str
    system_b: str
    position: int
    swapped: bool
    is_repeat: bool
    label: str
    confidence: int | None
    response_ms: int | None
    rationale: str
    voided: bool
    axis_scores: dict[str, int]
    # Earlier answers replaced with Undo, oldest first (``Vote.history``); empty: never revised.
    history: tuple[dict[str, Any], ...] = ()

    @property
    def first_label(self) -> str:
        """The canonical label first given (SPEC §8 ``first_label``); empty when never revised."""
        return str(self.history[0].get("label", "")) if self.history else ""


def study_axis_ids(*, study: Study) -> list[str]:
    """The study's axis ids in their defined order (the order of the ``axis:<ID>`` columns)."""
    return list(Axis.objects.filter(study=study).order_by("position").values_list("axis_id", flat=True))


def study_has_revised_votes(*, study: Study) -> bool:
    """Whether a rater changed some answer of the study with Undo (``Vote.history`` not empty)."""
    return Vote.objects.filter(trial__assignment__block__study=study).exclude(history=[]).exists()


def vote_rows(*, study: Study, include_voided: bool = False) -> Iterator[VoteRow]:
    """Every pairwise vote of ``study`` in export order: block, assignment slot, trial position.

    Votes of voided assignments are left out unless ``include_voided``; attention checks (SPEC §11)
    are never data and always left out.
    """
    qs = Vote.objects.filter(
        trial__assignment__block__study=study,
        trial__comparison__isnull=False,
        trial__attention_expected="",
        trial__assignment__rater__isnull=False,
        label__in=[str(label) for label in PAIRWISE_LABELS],
    )
    if not include_voided:
        qs = qs.exclude(trial__assignment__state=AssignmentState.VOIDED)
    qs = qs.order_by(
        "trial__assignment__block__position",
        "trial__assignment__block__name",
        "trial__assignment__slot",
        "trial__assignment__id",
        "trial__position",
    )
    for values in qs.values_list(*_FIELDS.values()).iterator(chunk_size=5000):
        row: dict[str, Any] = dict(zip(_FIELDS, values, strict=True))
        row["voided"] = row["voided"] == AssignmentState.VOIDED
        row["axis_scores"] = dict(row["axis_scores"] or {})
        row["history"] = tuple(row["history"] or ())
        yield VoteRow(**row)


def votes_frame(*, study: Study, include_voided: bool = False) -> pd.DataFrame:
    """The canonical per-vote table (SPEC §3, §5): one row per answered pairwise trial.

    Columns: ``comparison, page, block, rater, system_a, system_b`` (external ids / block name,
    ``str``), ``position`` (int), ``swapped``, ``is_repeat`` (bool), ``label`` (A|B|TIE|CANNOT_JUDGE),
    ``confidence`` (float, NaN when absent), ``response_ms`` (float, NaN when absent),
    ``rationale`` (str), ``voided`` (bool; always False unless ``include_voided``), then one float
    ``axis:<ID>`` column per study axis in axis order (NaN when the axis was not scored: inactive
    on the page, or a CANNOT_JUDGE vote). This is the input of ``stats.agreement``.
    """
    axis_ids = study_axis_ids(study=study)
    rows = list(vote_rows(study=study, include_voided=include_voided))
    data: dict[str, Any] = {
        "comparison": pd.Series([r.comparison for r in rows], dtype=str),
        "page": pd.Series([r.page for r in rows], dtype=str),
        "block": pd.Series([r.block for r in rows], dtype=str),
        "rater": pd.Series([r.rater for r in rows], dtype=str),
        "system_a": pd.Series([r.system_a for r in rows], dtype=str),
        "system_b": pd.Series([r.system_b for r in rows], dtype=str),
        "position": np.array([r.position for r in rows], dtype=np.int64),
        "swapped": np.array([r.swapped for r in rows], dtype=bool),
        "is_repeat": np.array([r.is_repeat for r in rows], dtype=bool),
        "label": pd.Series([r.label for r in rows], dtype=str),
        "confidence": np.array(
            [np.nan if r.confidence is None else float(r.confidence) for r in rows], dtype=float
        ),
        "response_ms": np.array(
            [np.nan if r.response_ms is None else float(r.response_ms) for r in rows], dtype=float
        ),
        "rationale": pd.Series([r.rationale for r in rows], dtype=str),
        "voided": np.array([r.voided for r in rows], dtype=bool),
    }
    for axis_id in axis_ids:
        data[AXIS_PREFIX + axis_id] = np.array(
            [_score(r.axis_scores.get(axis_id)) for r in rows], dtype=float
        )
    return pd.DataFrame(data)


def _score(value: object) -> float:
    if value is None or isinstance(value, bool):
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return np.nan
