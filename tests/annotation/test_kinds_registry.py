"""The kind registry covers every ``StudyKind`` and nothing else."""

import pytest

from annotation.kinds import DESIGNS, design_of
from annotation.models import Study, StudyKind


def test_every_study_kind_has_exactly_one_design() -> None:
    assert set(DESIGNS) == set(StudyKind.values)
    for kind in StudyKind.values:
        assert design_of(kind).kind == kind
        assert design_of(Study(kind=kind)) is DESIGNS[kind]


def test_only_the_reference_kind_shows_a_reference_and_the_pairwise_kinds_ask_for_a_winner() -> None:
    assert [d.kind for d in DESIGNS.values() if d.has_reference] == [StudyKind.PAIRWISE_REFERENCE]
    assert {d.kind for d in DESIGNS.values() if d.pairwise} == {
        StudyKind.PAIRWISE_REFERENCE,
        StudyKind.PAIRWISE,
    }


def test_an_unknown_kind_is_a_one_line_error_naming_it() -> None:
    with pytest.raises(KeyError, match="unknown study kind 'ranking'"):
        design_of("ranking")


def test_new_study_makes_keys_of_the_kinds_bundle_and_reads_predicates_for_the_checklist_only() -> None:
    for design in DESIGNS.values():
        if not design.has_reference:  # the reference kind's bundle is its own format (docs/protocol.md "Files")
            assert set(design.new_study_makes) <= {*design.bundle_required, *design.bundle_optional}, design.kind
    assert [d.kind for d in DESIGNS.values() if d.takes_predicates] == [StudyKind.CHECKLIST]
