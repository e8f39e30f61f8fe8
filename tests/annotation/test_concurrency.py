"""Concurrency on PostgreSQL: simultaneous arrivals never exceed a block's target; one vote per trial.

Threads each use their own database connection (transactional tests: every thread sees committed
rows only), released at the end of the thread.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest
from django.db import connection, connections
from django.db.models import Count

from annotation.errors import ArbiterError
from annotation.models import Assignment, AssignmentState, Block, Rater, Trial, Vote
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.participants import StudyFull, participant_claim, participant_rater_get_or_create
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def run_together(n: int, work: Callable[[int], object]) -> list[object]:
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def target(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


@pytest.mark.parametrize("arrivals", [20, 32])
def test_simultaneous_arrivals_fill_blocks_without_exceeding_targets(arrivals: int) -> None:
    """SECURITY.md row 10 (32 at once) and the raters issue (20 at once)."""
    assert connection.vendor == "postgresql"
    rs = make_rater_study(pages=6)
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=1, min_gap=2, raters=[9, 6], seed=1)
    study = rs.study

    def arrive(i: int) -> object:
        rater = participant_rater_get_or_create(study=study, external_id=f"crowd-{i}")
        return participant_claim(study=study, rater=rater).pk

    results = run_together(arrivals, arrive)
    claimed = [r for r in results if isinstance(r, int)]
    full = [r for r in results if isinstance(r, StudyFull)]
    others = [r for r in results if not isinstance(r, (int, StudyFull))]
    assert not others, others
    assert len(claimed) == 15 and len(full) == arrivals - 15
    assert len(set(claimed)) == 15  # no slot given twice
    # No duplicate trial: every claimed plan still has one trial per position.
    assert not (
        Trial.objects.filter(assignment_id__in=claimed)
        .values("assignment_id", "position")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )
    per_block = Counter(
        Assignment.objects.filter(state=AssignmentState.ACTIVE).values_list("block__position", flat=True)
    )
    for block in Block.objects.filter(study=study):
        assert per_block[block.position] == block.target_raters
    assert Assignment.objects.filter(rater__isnull=False).values("rater").distinct().count() == 15


def test_the_same_participant_arriving_twice_at_once_gets_one_assignment() -> None:
    rs = make_rater_study(pages=6)
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=1, min_gap=2, raters=[3, 3], seed=1)

    def arrive(_: int) -> object:
        rater = participant_rater_get_or_create(study=rs.study, external_id="twin")
        return participant_claim(study=rs.study, rater=rater).pk

    results = run_together(8, arrive)
    assert all(isinstance(r, int) for r in results), results
    assert len(set(results)) == 1
    assert Rater.objects.filter(external_id="twin").count() == 1


def test_ten_concurrent_submissions_of_one_trial_store_one_vote() -> None:
    rs = make_rater_study(pages=6)
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=1, min_gap=2, raters=[1, 1], seed=1)
    rater = participant_rater_get_or_create(study=rs.study, external_id="fast-clicker")
    assignment = participant_claim(study=rs.study, rater=rater)
    view = trial_next(assignment=assignment)
    assert view is not None
    axes = {a["id"]: 1 for a in view.axes}

    def submit(i: int) -> object:
        # half retry the same request (same key), half come from another tab (other keys)
        key = view.idempotency_key if i % 2 == 0 else f"other-tab-key-{i}"
        return vote_submit(VoteInput(trial_token=view.trial.token, rater_id=rater.pk, verdict="A", confidence=4, axes=axes,
                           rationale="", idempotency_key=key))

    results = run_together(10, submit)
    assert Vote.objects.filter(trial=view.trial).count() == 1
    vote = Vote.objects.get(trial=view.trial)
    ok = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, ArbiterError)]
    assert len(ok) + len(refused) == 10
    assert {r.vote.pk for r in ok} == {vote.pk}  # type: ignore[attr-defined]
    if vote.idempotency_key == view.idempotency_key:
        assert len(ok) == 5 and all(r.status_code == 409 for r in refused)
    else:
        assert len(ok) == 1
    assert Trial.objects.filter(assignment=assignment, vote__isnull=False).count() == 1
