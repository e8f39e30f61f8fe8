"""The reference protocol (SPEC §2-§9): two candidate renderings judged against the reference page."""

from annotation.kinds.base import StudyDesign

DESIGN = StudyDesign(
    kind="pairwise_reference",
    label="Pairwise with reference",
    unit="comparison",
    has_reference=True,
    pairwise=True,
)
