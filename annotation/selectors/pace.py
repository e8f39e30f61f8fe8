"""A rater's own pace: the time estimate shown on the progress bar and the break screen (issue 17).

The estimate is the median of the rater's server-measured response times in this assignment
times the trials left, so one long pause (a coffee, a break screen) does not inflate it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median
from typing import Any

from annotation.models import Assignment, Vote

MIN_ANSWERS_FOR_ESTIMATE = 3


def _response_times_query(assignment_id: int) -> Any:
    return Vote.objects.filter(trial__assignment_id=assignment_id, response_ms__isnull=False).order_by().values(
        "response_ms"
    )


def minutes_left(
    *, assignment: Assignment, answered: int, total: int, times: Sequence[int] | None = None
) -> int | None:
    """About how many minutes the rest of the assignment takes at the rater's median pace.

    None until the rater has answered ``MIN_ANSWERS_FOR_ESTIMATE`` trials (too little to say);
    0 when nothing is left; otherwise at least 1. ``times``: the assignment's stored response
    times when the caller has them (an answer's ``Progress``), else they are read.
    """
    left = max(total - answered, 0)
    if left == 0:
        return 0
    if answered < MIN_ANSWERS_FOR_ESTIMATE:
        return None
    if times is None:
        times = [int(row["response_ms"]) for row in _response_times_query(assignment.pk)]
    if len(times) < MIN_ANSWERS_FOR_ESTIMATE:
        return None
    return max(1, math.ceil(median(times) * left / 60_000))


def break_due(*, every: int, answered: int, total: int) -> bool:
    """A break screen after every ``every`` answered trials, never before the first or after the last."""
    return every > 0 and 0 < answered < total and answered % every == 0
