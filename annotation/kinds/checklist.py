"""Checklist predicates (SPEC §10): one candidate, one yes/no predicate per trial."""

from annotation.kinds.base import StudyDesign

DESIGN = StudyDesign(
    kind="checklist", label="Checklist predicates", unit="predicate", has_reference=False, pairwise=False
)
