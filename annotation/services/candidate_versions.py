"""Which candidate versions a trial showed (paper B.5): recorded once, when it is first shown.

A vote belongs to the versions its trial displayed, so a later ``import_study --update`` never
moves it to the replacement: ``Trial.version_a`` / ``version_b`` (canonical A and B; a rating or
checklist trial's one candidate in ``version_a``) are written when the trial is first shown and,
for imported votes, when they are imported; never changed after.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import F

from annotation.models import Trial

# Annotations that read the displayed candidates' versions in the query that loads a trial.
VERSION_ANNOTATIONS = {
    "unit_version_a": F("comparison__candidate_a__version"),
    "unit_version_b": F("comparison__candidate_b__version"),
    "unit_version_single": F("candidate__version"),
    "unit_version_predicate": F("predicate__candidate__version"),
}


def displayed_versions(trial: Trial) -> tuple[int | None, int | None]:
    """(version_a, version_b) to record for a trial loaded with ``VERSION_ANNOTATIONS``."""
    a = getattr(trial, "unit_version_a", None)
    if a is not None:
        return a, getattr(trial, "unit_version_b", None)
    single = getattr(trial, "unit_version_single", None)
    return (single if single is not None else getattr(trial, "unit_version_predicate", None)), None


def trials_record_versions(*, trial_ids: Iterable[int]) -> int:
    """Record the current candidate versions on those of the trials that have none yet."""
    ids = list(trial_ids)
    groups: dict[tuple[int | None, int | None], list[int]] = defaultdict(list)
    for start in range(0, len(ids), 5000):
        rows = Trial.objects.filter(pk__in=ids[start : start + 5000], version_a__isnull=True).values_list(
            "pk",
            "comparison__candidate_a__version",
            "comparison__candidate_b__version",
            "candidate__version",
            "predicate__candidate__version",
        )
        for pk, a, b, single, predicate in rows:
            groups[(a, b) if a is not None else (single if single is not None else predicate, None)].append(pk)
    n = 0
    for (version_a, version_b), pks in groups.items():
        for start in range(0, len(pks), 5000):
            n += Trial.objects.filter(pk__in=pks[start : start + 5000], version_a__isnull=True).update(
                version_a=version_a, version_b=version_b
            )
    return n
