"""Ratings (SPEC §10): one candidate scored on the study's dimensions."""

from annotation.kinds.base import StudyDesign

DESIGN = StudyDesign(kind="rating", label="Ratings", unit="candidate", has_reference=False, pairwise=False)
