"""Schema-level guarantees of docs/protocol.md "The study model", "Canonical answers": canonical identities
and uniqueness live in the database."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.models import (
    Assignment,
    AuditEvent,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    Page,
    Rater,
    Study,
    System,
    Trial,
    Vote,
)
from calibration.models import CoefficientSet, FrozenError
from judges.models import Judge, JudgeOutput

pytestmark = pytest.mark.django_db


@pytest.fixture
def study() -> Study:
    study = Study.objects.create(slug="s", title="S")
    page = Page.objects.create(study=study, external_id="p1")
    alpha = System.objects.create(study=study, external_id="alpha", name="Alpha")
    beta = System.objects.create(study=study, external_id="beta", name="Beta")
    a = Candidate.objects.create(page=page, system=alpha, rendered=True)
    b = Candidate.objects.create(page=page, system=beta, rendered=True)
    Comparison.objects.create(study=study, external_id="c1", page=page, candidate_a=a, candidate_b=b)
    return study


def fails(callable_: object) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        callable_()  # type: ignore[operator]


def test_comparison_needs_two_distinct_candidates_and_is_unique(study: Study) -> None:
    comparison = Comparison.objects.get()
    fails(lambda: Comparison.objects.create(
        study=study, external_id="c2", page=comparison.page, candidate_a=comparison.candidate_a,
        candidate_b=comparison.candidate_a))
    fails(lambda: Comparison.objects.create(
        study=study, external_id="c3", page=comparison.page, candidate_a=comparison.candidate_a,
        candidate_b=comparison.candidate_b))
    fails(lambda: Comparison.objects.create(
        study=study, external_id="c1", page=comparison.page, candidate_a=comparison.candidate_b,
        candidate_b=comparison.candidate_a))


def test_failed_render_cannot_have_an_image(study: Study) -> None:
    from annotation.models import StoredImage

    image = StoredImage.objects.create(sha256="0" * 64, file="images/00/x.png", width=1, height=1, size_bytes=1)
    page = Page.objects.get()
    gamma = System.objects.create(study=study, external_id="gamma", name="Gamma")
    fails(lambda: Candidate.objects.create(page=page, system=gamma, rendered=False, image=image))


def test_blocks_are_disjoint_and_votes_are_one_per_trial(study: Study) -> None:
    comparison = Comparison.objects.get()
    first = Block.objects.create(study=study, name="block-1")
    second = Block.objects.create(study=study, name="block-2", position=1)
    BlockItem.objects.create(block=first, position=0, comparison=comparison)
    fails(lambda: BlockItem.objects.create(block=second, position=0, comparison=comparison))

    rater = Rater.objects.create(study=study, external_id="r01")
    assignment = Assignment.objects.create(block=first, slot=0, rater=rater, state="active")
    fails(lambda: Assignment.objects.create(block=first, slot=0, state="open"))
    fails(lambda: Assignment.objects.create(block=first, slot=1, rater=rater, state="active"))
    trial = Trial.objects.create(assignment=assignment, position=1, comparison=comparison)
    fails(lambda: Trial.objects.create(assignment=assignment, position=2, comparison=comparison))
    fails(lambda: Trial.objects.create(assignment=assignment, position=3, comparison=comparison, is_repeat=True))
    Trial.objects.create(assignment=assignment, position=3, comparison=comparison, is_repeat=True, repeat_of=trial)
    Vote.objects.create(trial=trial, label="A", confidence=3)
    fails(lambda: Vote.objects.create(trial=trial, label="B", confidence=3))
    fails(lambda: Vote.objects.create(trial=Trial.objects.get(position=3), label="B", confidence=9))

    # A voided assignment frees its slot and its rater (reopen a block slot).
    Assignment.objects.filter(pk=assignment.pk).update(state="voided")
    Assignment.objects.create(block=first, slot=0, state="open")


def test_one_judge_output_per_call(study: Study) -> None:
    judge = Judge.objects.create(name="j1", family="f")
    comparison = Comparison.objects.get()
    JudgeOutput.objects.create(judge=judge, comparison=comparison, order="primary", repeat=0)
    fails(lambda: JudgeOutput.objects.create(judge=judge, comparison=comparison, order="primary", repeat=0))
    fails(lambda: JudgeOutput.objects.create(
        judge=judge, comparison=comparison, order="swapped", repeat=0, status="valid", winner=""))


def test_coefficient_sets_are_immutable(study: Study) -> None:
    frozen = CoefficientSet.objects.create(study=study, name="v1", coefficients={"j1": 0.9})
    frozen.coefficients = {"j1": 0.1}
    with pytest.raises(FrozenError):
        frozen.save()
    with pytest.raises(FrozenError):
        CoefficientSet.objects.filter(pk=frozen.pk).update(coefficients={"j1": 0.2})
    with pytest.raises(FrozenError):
        frozen.delete()
    assert CoefficientSet.objects.get(pk=frozen.pk).coefficients == {"j1": 0.9}


def test_audit_log_is_append_only(study: Study) -> None:
    event = AuditEvent.objects.create(action="study.import", study=study, target="s")
    event.action = "something else"
    with pytest.raises(ValueError):
        event.save()
    with pytest.raises(ValueError):
        event.delete()
