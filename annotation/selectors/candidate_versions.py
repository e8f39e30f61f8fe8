"""Reads of candidate versions (paper B.5): which version was in force when, and what votes saw.

A candidate with no CandidateVersion rows has only ever had version 1. Otherwise its rows give the
timeline: version ``number`` in force from ``activated_at`` until the next row's. A trial records
the versions it displayed (``Trial.version_a`` / ``version_b``); a trial recorded before versions
existed showed version 1.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from annotation.models import AssignmentState, CandidateVersion, Comparison, Study, Trial


@dataclass(frozen=True)
class VersionTimeline:
    """Per candidate id: activation times and version numbers, in order."""

    times: dict[int, list[datetime]]
    numbers: dict[int, list[int]]

    def at(self, candidate_id: int, moment: datetime) -> int:
        """The version of the candidate in force at ``moment`` (1 when it was never replaced)."""
        times = self.times.get(candidate_id)
        if not times:
            return 1
        k = bisect.bisect_right(times, moment) - 1
        return self.numbers[candidate_id][max(k, 0)]


def version_timeline(*, candidate_ids: Iterable[int]) -> VersionTimeline:
    ids = sorted(set(candidate_ids))
    times: dict[int, list[datetime]] = {}
    numbers: dict[int, list[int]] = {}
    for start in range(0, len(ids), 5000):
        rows = (
            CandidateVersion.objects.filter(candidate_id__in=ids[start : start + 5000])
            .order_by("candidate_id", "number")
            .values_list("candidate_id", "number", "activated_at")
        )
        for candidate_id, number, activated_at in rows:
            times.setdefault(candidate_id, []).append(activated_at)
            numbers.setdefault(candidate_id, []).append(number)
    return VersionTimeline(times=times, numbers=numbers)


@dataclass(frozen=True)
class ComparisonVersions:
    """A comparison whose candidates have been replaced at least once."""

    pk: int
    external_id: str
    set: str
    candidate_a: int
    candidate_b: int
    now: tuple[int, int]


def replaced_comparisons(*, study: Study, set: str | None = None) -> list[ComparisonVersions]:
    """The study's comparisons with a candidate past version 1, and their versions now."""
    rows = Comparison.objects.filter(study=study).filter(Q(candidate_a__version__gt=1) | Q(candidate_b__version__gt=1))
    if set:
        rows = rows.filter(set=set)
    return [
        ComparisonVersions(pk, ext, s, a, b, (va, vb))
        for pk, ext, s, a, b, va, vb in rows.order_by("pk").values_list(
            "pk", "external_id", "set", "candidate_a_id", "candidate_b_id", "candidate_a__version", "candidate_b__version"
        )
    ]


def labelled_versions(*, comparison_ids: Sequence[int]) -> dict[int, Counter[tuple[int, int]]]:
    """Per comparison: how many of its main votes (not voided) were cast on each (A, B) version pair."""
    out: dict[int, Counter[tuple[int, int]]] = {}
    ids = list(comparison_ids)
    for start in range(0, len(ids), 5000):
        rows = (
            Trial.objects.filter(
                comparison_id__in=ids[start : start + 5000], vote__isnull=False, is_repeat=False, attention_expected=""
            )
            .exclude(assignment__state=AssignmentState.VOIDED)
            .values_list("comparison_id", "version_a", "version_b")
        )
        for comparison_id, a, b in rows:
            out.setdefault(comparison_id, Counter())[(a or 1, b or 1)] += 1
    return out
