"""Group commit of the judge calls' writes on SQLite (judges/services/group_commit.py)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from judges.models import JudgeOutput
from judges.services.calls import judge_output_claim
from judges.services.group_commit import _GroupCommit, committed
from tests.judges.factories import make_example_study, make_judge


@pytest.mark.django_db(transaction=True)
def test_a_write_is_committed_and_an_error_is_the_writers_own() -> None:
    study = make_example_study()
    judge = make_judge(base_url="http://127.0.0.1:9/v1")
    output = JudgeOutput.objects.create(judge=judge, comparison=study.comparisons.get(external_id="c1"), order="primary")
    token = judge_output_claim(output_id=output.pk, lease_seconds=30, max_attempts=3, count_call=True)
    assert token
    output.refresh_from_db()
    assert (output.status, output.claim_token, output.attempts, output.calls) == ("running", token, 1, 1)
    # The claim is conditional still: a second claim under a live lease gets nothing.
    assert judge_output_claim(output_id=output.pk, lease_seconds=30, max_attempts=3) is None

    def failing() -> int:
        JudgeOutput.objects.filter(pk=output.pk).update(error="half-written")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        committed(failing)
    output.refresh_from_db()
    assert output.error == ""  # the failed write's savepoint was rolled back, nothing half-written
    assert committed(lambda: JudgeOutput.objects.filter(pk=output.pk).update(error="kept")) == 1
    output.refresh_from_db()
    assert output.error == "kept"


@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_share_a_transaction_and_each_gets_its_own_result() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("group commit is for SQLite")
    group = _GroupCommit()
    ran_on: dict[int, int] = {}
    results: dict[int, object] = {}
    start = threading.Barrier(8)

    def op(i: int) -> int:
        ran_on[i] = threading.get_ident()
        time.sleep(0.02)  # a slow commit: the others queue meanwhile
        if i == 3:
            raise KeyError(i)
        return i * 10

    def writer(i: int) -> None:
        start.wait()
        try:
            results[i] = group.run(lambda: op(i))
        except KeyError as exc:
            results[i] = exc
        finally:
            results.setdefault(-1 - i, threading.get_ident())
            connection.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert {i: results[i] for i in range(8) if i != 3} == {i: i * 10 for i in range(8) if i != 3}
    assert isinstance(results[3], KeyError)  # one member's error does not fail the group
    leaders = set(ran_on.values())
    assert len(leaders) < 8  # some writes ran in another writer's transaction
    assert not group._queue and not group._leading
