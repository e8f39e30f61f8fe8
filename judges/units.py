"""Which outputs belong to a study, whatever the unit its kind's judge calls are about (decision 0077)."""

from __future__ import annotations

from django.db.models import Q

from annotation.kinds import design_of
from annotation.kinds.judging import UNIT_CANDIDATE
from annotation.models import Study


def study_outputs(study: Study) -> Q:
    """The outputs of a study's calls: on its renderings when its kind's judge calls are about one
    rendering, else on its comparisons."""
    if design_of(study).judge_plan(study).unit == UNIT_CANDIDATE:
        return Q(candidate__page__study=study)
    return Q(comparison__study=study)
