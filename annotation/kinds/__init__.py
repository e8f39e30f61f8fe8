"""The study-kind registry: ``design_of(study)`` is the one place a study's kind is looked up."""

from __future__ import annotations

from typing import Protocol

from annotation.kinds import checklist, pairwise, pairwise_reference, rating
from annotation.kinds.base import StudyDesign

DESIGNS: dict[str, StudyDesign] = {
    module.DESIGN.kind: module.DESIGN for module in (pairwise_reference, pairwise, checklist, rating)
}


class _HasKind(Protocol):
    kind: str


def design_of(study: _HasKind | str) -> StudyDesign:
    """The design of a study (or of a ``Study.kind`` value); ``KeyError`` names an unknown kind."""
    kind = study if isinstance(study, str) else study.kind
    try:
        return DESIGNS[kind]
    except KeyError:
        raise KeyError(f"unknown study kind {kind!r}; known: {', '.join(DESIGNS)}") from None


__all__ = ["DESIGNS", "StudyDesign", "design_of"]
