"""Answers of the other study kinds (docs/study-kinds.md "Comprehension check") through the services:
comprehension check, validation, canonical storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.errors import ValidationFailed
from annotation.models import Assignment, AssignmentState, Rater, Study, Trial, Vote
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.comprehension import (
    ComprehensionRequired,
    comprehension_question,
    comprehension_submit,
)
from annotation.services.participants import participant_claim, participant_rater_get_or_create
from annotation.services.scheduling import blocks_schedule, schedule_units

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
pytestmark = pytest.mark.django_db


def _study(kind: str, *, checks: int = 1) -> Study:
    study = study_import_bundle(path=FIXTURES / kind)
    n = len(schedule_units(study))
    blocks_schedule(study=study, blocks=1, block_size=n, repeats=1, min_gap=2, raters=[2], seed=3, checks=checks)
    study.refresh_from_db()
    return study


def _passed(study: Study, participant: str) -> Rater:
    rater = participant_rater_get_or_create(study=study, external_id=participant)
    assert comprehension_submit(rater=rater, answer=comprehension_question(study).answer) == "passed"
    return rater


@pytest.mark.parametrize("kind", ["pairwise", "checklist", "rating"])
def test_claim_needs_the_comprehension_check_and_two_wrong_answers_screen_out(kind: str) -> None:
    study = _study(kind)
    question = comprehension_question(study)
    wrong = next(v for v, _ in question.choices if v != question.answer)
    rater = participant_rater_get_or_create(study=study, external_id="p1")
    with pytest.raises(ComprehensionRequired):
        participant_claim(study=study, rater=rater)
    assert comprehension_submit(rater=rater, answer=wrong) == "retry"
    assert comprehension_submit(rater=rater, answer=question.answer) == "passed"
    assert participant_claim(study=study, rater=rater).state == AssignmentState.ACTIVE

    other = participant_rater_get_or_create(study=study, external_id="p2")
    assert comprehension_submit(rater=other, answer=wrong) == "retry"
    assert comprehension_submit(rater=other, answer=wrong) == "failed"
    # No third attempt, even with the right answer; no place was used up.
    assert comprehension_submit(rater=other, answer=question.answer) == "failed"
    other.refresh_from_db()
    assert (other.comprehension_attempts, other.comprehension_passed) == (2, False)
    with pytest.raises(ComprehensionRequired):
        participant_claim(study=study, rater=other)
    assert Assignment.objects.filter(block__study=study, state=AssignmentState.OPEN).count() == 1
    with pytest.raises(ValidationFailed, match="choose one of the answers"):
        comprehension_submit(rater=participant_rater_get_or_create(study=study, external_id="p3"), answer="MAYBE")


def _answer_all(study: Study, rater: Rater, answer: dict[str, object]) -> list[Trial]:
    assignment = participant_claim(study=study, rater=rater)
    answered = []
    while (view := trial_next(assignment=assignment)) is not None:
        vote_submit(VoteInput(trial_token=view.trial.token, rater_id=rater.pk, axes={},  # type: ignore[arg-type]
                              idempotency_key=f"key-{view.number:04d}", **answer))
        answered.append(view.trial)
        assignment.refresh_from_db()
    return answered


def test_pairwise_votes_are_canonical_and_show_the_brief() -> None:
    study = _study("pairwise")
    rater = _passed(study, "p1")
    assignment = participant_claim(study=study, rater=rater)
    view = trial_next(assignment=assignment)
    assert view is not None and view.kind == "pairwise" and view.brief and view.axes == []
    trials = _answer_all(study, rater, {"verdict": "A", "confidence": 4, "rationale": ""})
    for trial in trials:
        vote = Vote.objects.get(trial=trial)
        assert vote.label == ("B" if trial.swapped else "A") and vote.confidence == 4
    assert any(t.swapped for t in trials) and any(not t.swapped for t in trials)


def test_checklist_needs_evidence_and_a_checklist_label() -> None:
    study = _study("checklist")
    rater = _passed(study, "p1")
    assignment = participant_claim(study=study, rater=rater)
    view = trial_next(assignment=assignment)
    assert view is not None and view.question
    token = view.trial.token
    with pytest.raises(ValidationFailed, match="evidence"):
        vote_submit(VoteInput(trial_token=token, rater_id=rater.pk, verdict="YES", confidence=None, axes={}, rationale="  ",
                    idempotency_key="key-00001"))
    with pytest.raises(ValidationFailed, match="Yes, No or Unclear"):
        vote_submit(VoteInput(trial_token=token, rater_id=rater.pk, verdict="A", confidence=3, axes={}, rationale="seen",
                    idempotency_key="key-00001"))
    trials = _answer_all(study, rater, {"verdict": "UNCLEAR", "confidence": None, "rationale": "too small to read"})
    votes = Vote.objects.filter(trial__in=trials)
    assert {(v.label, v.rationale, v.confidence) for v in votes} == {("UNCLEAR", "too small to read", None)}


def test_rating_needs_every_dimension_on_the_scale() -> None:
    study = _study("rating")
    rater = _passed(study, "p1")
    assignment = participant_claim(study=study, rater=rater)
    view = trial_next(assignment=assignment)
    assert view is not None and view.dimensions == ("aesthetics", "brief_fidelity") and view.scale == (1, 2, 3, 4, 5)
    token = view.trial.token
    for ratings, message in (
        ({"aesthetics": 3}, "rate every dimension"),
        ({"aesthetics": 3, "brief_fidelity": 6}, "must be one of 1, 2, 3, 4, 5"),
        ({"aesthetics": 3, "brief_fidelity": 2, "colour": 1}, "'colour' is not a dimension"),
        ({"aesthetics": True, "brief_fidelity": 2}, "must be an integer"),
    ):
        with pytest.raises(ValidationFailed, match=message):
            vote_submit(VoteInput(trial_token=token, rater_id=rater.pk, verdict="", confidence=None, axes={}, rationale="",
                        idempotency_key="key-00001", ratings=ratings))
    assert not Vote.objects.exists()
    trials = _answer_all(study, rater, {"verdict": "", "confidence": None, "rationale": "",
                                        "ratings": {"aesthetics": "4", "brief_fidelity": 2}})
    assert {tuple(sorted(v.answers["ratings"].items())) for v in Vote.objects.filter(trial__in=trials)} == {
        (("aesthetics", 4), ("brief_fidelity", 2))}
    assert all(v.label == "" for v in Vote.objects.all())


def test_attention_check_trial_carries_an_instruction_and_replays_are_idempotent() -> None:
    study = _study("checklist", checks=3)
    rater = _passed(study, "p1")
    assignment = participant_claim(study=study, rater=rater)
    seen = []
    while (view := trial_next(assignment=assignment)) is not None:
        seen.append((view.trial.attention_expected, view.attention))
        kwargs = {"trial_token": view.trial.token, "rater_id": rater.pk, "verdict": "NO", "confidence": None,
                  "axes": {}, "rationale": "no headline", "idempotency_key": f"key-{view.number:05d}"}
        first = vote_submit(VoteInput(**kwargs))  # type: ignore[arg-type]
        again = vote_submit(VoteInput(**kwargs))  # type: ignore[arg-type]
        assert again.replayed and again.vote.pk == first.vote.pk
    checks = [(e, text) for e, text in seen if e]
    assert len(checks) == 3
    names = {"YES": "Yes", "NO": "No", "UNCLEAR": "Unclear"}
    assert all(text == f"Attention check: for this one, please answer “{names[e]}”." for e, text in checks)
    assert all(text == "" for e, text in seen if not e)


def test_progress_and_quality_count_units_and_attention_checks() -> None:
    from annotation.selectors.progress import rater_quality, study_progress

    study = _study("checklist", checks=3)
    rater = _passed(study, "p1")
    _answer_all(study, rater, {"verdict": "NO", "confidence": None, "rationale": "not there"})
    checks = list(Trial.objects.filter(assignment__rater=rater).exclude(attention_expected=""))
    quality = next(q for q in rater_quality(study) if q.assignment.rater_id == rater.pk)
    assert quality.attention_checks == 3
    assert quality.attention_passed == sum(1 for t in checks if t.attention_expected == "NO")
    # Answered counts every answered trial, checks included, like the trial total (issue 17: 50 / 52).
    assert quality.votes == quality.trials == Trial.objects.filter(assignment__rater=rater).count()
    assert quality.cannot_judge_share == 0  # the UNCLEAR share
    row = study_progress(study).blocks[0]
    assert row.covered == row.size == len(schedule_units(study))

    other = _passed(study, "p2")
    _answer_all(study, other, {"verdict": "UNCLEAR", "confidence": None, "rationale": "cannot tell"})
    q2 = next(q for q in rater_quality(study) if q.assignment.rater_id == other.pk)
    assert q2.cannot_judge_share == 1
    assert study_progress(study).blocks[0].covered == row.size  # UNCLEAR covers nothing new
