"""Pairwise without a reference (SPEC §10): two candidates, a winner, optional score dimensions."""

from annotation.kinds.base import StudyDesign

DESIGN = StudyDesign(
    kind="pairwise", label="Pairwise without reference", unit="comparison", has_reference=False, pairwise=True
)
