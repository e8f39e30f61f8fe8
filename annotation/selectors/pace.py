"""A rater's own pace: the time estimate shown on the progress bar and the break screen (issue 17).

The estimate is the median of the rater's server-measured response times in this assignment
times the trials left, so one long pause (a coffee, a break screen) does not inflate it.
"""

from __future__ import annotations

import math
from statistics import median

from annotation.models import Assignment, Vote

MIN_ANSWERS_FOR_ESTIMATE = 3


def minutes_left(*, assignment: Assignment, answered: int, total: int) -> int | None:
    """About how many minutes the rest of the assignment takes at the rater's median pace.

    None until the rater has answered ``MIN_ANSWERS_FOR_ESTIMATE`` trials (too little to say);
    0 when nothing is left; otherwise at least 1.
    """
    left = max(total - answered, 0)
    if left == 0:
        return 0
    if answered < MIN_ANSWERS_FOR_ESTIMATE:
        return None
    times = [
        int(ms) for ms in Vote.objects.filter(trial__assignment=assignment, response_ms__isnull=False)
        .order_by().values_list("response_ms", flat=True) if ms is not None
    ]
    if len(times) < MIN_ANSWERS_FOR_ESTIMATE:
        return None
    return max(1, math.ceil(median(times) * left / 60_000))


def break_due(*, every: int, answered: int, total: int) -> bool:
    """A break screen after every ``every`` answered trials, never before the first or after the last."""
    return every > 0 and 0 < answered < total and answered % every == 0
