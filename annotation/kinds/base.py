"""What a study kind is: one ``StudyDesign`` per kind, looked up with ``design_of(study)``.

Every difference between the kinds (the unit a rater judges, the image slots a trial shows, the trial
template, how an answer is cleaned and canonicalized, the votes-CSV columns, the bundle section, the
schedule units) belongs to the kind's design, in its own module of this package. Code elsewhere asks
the design instead of testing ``study.kind``: adding a kind is one new module here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from annotation.kinds.csv_rows import VotesCsvFormat
    from annotation.models import Study


@dataclass(frozen=True)
class StudyDesign:
    """The fixed facts of one study kind (SPEC §2, §10); a kind's module subclasses it."""

    kind: str  # the ``Study.kind`` value (``annotation.models.StudyKind``)
    label: str
    unit: str  # what one trial asks about: "comparison", "predicate" or "candidate"
    has_reference: bool  # a reference page is shown beside the candidates
    pairwise: bool  # a trial shows two candidates and asks for a winner

    @property
    def name(self) -> str:
        return self.kind

    # ---- votes CSV (SPEC §8, §11; annotation.services.votes_csv)

    def votes_csv(self, study: Study) -> VotesCsvFormat:
        """The study's votes CSV: its columns, how a row parses, what an export writes."""
        raise NotImplementedError

    def owns_votes_column(self, column: str) -> bool:
        """Whether ``column`` is one of this kind's votes-CSV columns (for a header of another kind)."""
        raise NotImplementedError
