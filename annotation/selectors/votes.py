"""The per-vote table every analysis uses
(docs/protocol.md "Canonical answers", "Human reference and agreement", "Files"), from
``annotation.selectors.vote_rows``.

One query (``values_list`` over the joins), no per-row lookups: 10,000 votes take a few tens of
milliseconds. Only pairwise votes are read: trials on a comparison whose vote carries one of the
labels A, B, TIE, CANNOT_JUDGE, in assignments that have a rater.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from annotation.models import GOLD_ANSWER, GOLD_EXPECTED, AssignmentState, Study, Vote
from annotation.selectors.vote_rows import AXIS_PREFIX, study_axis_ids, vote_rows

if TYPE_CHECKING:
    import pandas as pd


def votes_frame(*, study: Study, include_voided: bool = False) -> pd.DataFrame:
    """The canonical per-vote table (docs/protocol.md "Canonical answers", "Human reference and agreement"):
    one row per answered pairwise trial.

    Columns: ``comparison, page, block, rater, system_a, system_b`` (external ids / block name,
    ``str``), ``position`` (int), ``swapped``, ``is_repeat`` (bool), ``label`` (A|B|TIE|CANNOT_JUDGE),
    ``confidence`` (float, NaN when absent), ``response_ms`` (float, NaN when absent),
    ``rationale`` (str), ``voided`` (bool; always False unless ``include_voided``),
    ``allocation_probability`` (float, NaN unless the trial was chosen at serve time), then one float
    ``axis:<ID>`` column per study axis in axis order (NaN when the axis was not scored: inactive
    on the page, or a CANNOT_JUDGE vote). This is the input of ``stats.agreement``.
    """
    import numpy as np
    import pandas as pd

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
        # A serve-time trial's probability of its pair when it was chosen (NaN for the others).
        "allocation_probability": np.array(
            [np.nan if r.allocation_probability is None else float(r.allocation_probability) for r in rows],
            dtype=float,
        ),
    }
    for axis_id in axis_ids:
        data[AXIS_PREFIX + axis_id] = np.array(
            [_score(r.axis_scores.get(axis_id)) for r in rows], dtype=float
        )
    return pd.DataFrame(data)


def _score(value: object) -> float:
    import numpy as np

    if value is None or isinstance(value, bool):
        return np.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return np.nan


def gold_votes_frame(*, study: Study) -> pd.DataFrame:
    """The answered gold trials of a reference study (issue 30), voided assignments left out.

    Columns: ``rater`` (external id), ``position`` (int), ``swapped`` (bool), ``label`` (canonical),
    ``response_ms`` (float, NaN when absent), ``passed`` (bool: the canonical label is the known
    answer, ``GOLD_ANSWER``). Never data: only the exclusion rules read it.
    """
    import numpy as np
    import pandas as pd

    rows = list(
        Vote.objects.filter(
            trial__assignment__block__study=study,
            trial__attention_expected=GOLD_EXPECTED,
            trial__assignment__rater__isnull=False,
        )
        .exclude(trial__assignment__state=AssignmentState.VOIDED)
        .order_by("trial__assignment_id", "trial__position")
        .values_list("trial__assignment__rater__external_id", "trial__position", "trial__swapped", "label",
                     "response_ms")
    )
    return pd.DataFrame({
        "rater": pd.Series([r[0] for r in rows], dtype=str),
        "position": np.array([r[1] for r in rows], dtype=np.int64),
        "swapped": np.array([r[2] for r in rows], dtype=bool),
        "label": pd.Series([str(r[3]) for r in rows], dtype=str),
        "response_ms": np.array([np.nan if r[4] is None else float(r[4]) for r in rows], dtype=float),
        "passed": np.array([str(r[3]) == GOLD_ANSWER for r in rows], dtype=bool),
    })


GOLD_CSV_HEADER = ["rater", "block", "position", "gold", "page", "comparison", "swapped", "expected", "label",
                   "correct", "response_ms"]


def gold_answer_rows(*, study: Study) -> list[list[object]]:
    """The gold CSV's rows (docs/protocol.md "Files"): one per answered gold trial, voided
    assignments left out, in block, slot, position order. ``expected`` and ``label`` are canonical
    (canonical A is the identical side); ``correct`` is 1 when they match, else 0; ``comparison``
    is the comparison whose page the trial showed (its candidates were not shown); ``gold`` the
    bundle's gold id (empty for a gold trial made from the page)."""
    rows = (
        Vote.objects.filter(
            trial__assignment__block__study=study,
            trial__attention_expected=GOLD_EXPECTED,
            trial__assignment__rater__isnull=False,
        )
        .exclude(trial__assignment__state=AssignmentState.VOIDED)
        .order_by("trial__assignment__block__position", "trial__assignment__slot", "trial__assignment_id",
                  "trial__position")
        .values_list("trial__assignment__rater__external_id", "trial__assignment__block__name", "trial__position",
                     "trial__supplied_gold__external_id", "trial__comparison__page__external_id", "trial__comparison__external_id", "trial__swapped",
                     "label", "response_ms")
    )
    return [
        [rater, block, position, gold or "", page, comparison, int(swapped), GOLD_ANSWER, label,
         int(label == GOLD_ANSWER), "" if ms is None else ms]
        for rater, block, position, gold, page, comparison, swapped, label, ms in rows
    ]
