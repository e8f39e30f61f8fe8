"""Judge outputs follow candidate replacements (paper B.5, ``import_study --update``).

The annotation app sends the signals (it imports no other app); these receivers run inside its
update transaction. A judge call still queued or running on a touched comparison, or about a
replaced rendering itself (``candidate_ids``: a checklist or ratings call), refuses the update: its
reply could belong to either version. Otherwise every output of a touched comparison and every
call about a replaced rendering (valid, invalid or failed, every order and repeat; a checklist
call's question rows stay with it) is marked superseded: kept as history, left out of every
current query, and made again by the next ``run_judges``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from annotation.errors import Conflict
from annotation.models import Study
from judges.models import JudgeOutput, OutputStatus

CHUNK = 5000


def _chunks(ids: Sequence[int]) -> list[Sequence[int]]:
    return [ids[start : start + CHUNK] for start in range(0, len(ids), CHUNK)]


def refuse_while_calls_run(
    sender: Any, *, study: Study, comparison_ids: Sequence[int], candidate_ids: Sequence[int] = (), **kwargs: Any
) -> None:
    unfinished = [OutputStatus.PENDING, OutputStatus.RUNNING]
    on_comparisons = sum(
        JudgeOutput.objects.filter(comparison_id__in=list(chunk), status__in=unfinished).count()
        for chunk in _chunks(comparison_ids)
    )
    on_renderings = sum(
        JudgeOutput.objects.filter(candidate_id__in=list(chunk), status__in=unfinished).count()
        for chunk in _chunks(candidate_ids)
    )
    busy = on_comparisons + on_renderings
    where = "comparisons or renderings" if on_renderings else "comparisons"
    if busy:
        raise Conflict(
            f"{busy} judge call(s) are queued or running on {where} this update touches; "
            "let them finish (run_judges ... --wait) and update again"
        )


def supersede_outputs(
    sender: Any, *, study: Study, comparison_ids: Sequence[int], candidate_ids: Sequence[int] = (), **kwargs: Any
) -> dict[str, int]:
    superseded = 0
    for chunk in _chunks(comparison_ids):
        superseded += JudgeOutput.objects.filter(comparison_id__in=list(chunk)).update(superseded=True)
    for chunk in _chunks(candidate_ids):
        superseded += JudgeOutput.objects.filter(candidate_id__in=list(chunk)).update(superseded=True)
    return {"outputs_superseded": superseded}
