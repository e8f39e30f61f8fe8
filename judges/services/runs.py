"""Queueing judge calls (SPEC §6, §9 ``run_judges``): idempotent on (judge, comparison, order, repeat).

``judge_run_start`` creates the missing JudgeOutput rows (``pending``) with
``bulk_create(ignore_conflicts=True)`` and, on commit, queues one Celery task per call that is not
finished (pending, or running with an expired lease), passing only the output id. Running it
again skips what is done and re-queues what was lost. ``judge_outputs_run_local`` executes calls in
this process with a pool of threads (eager mode: the CLI's progress bar, the benchmark).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.errors import ArbiterError, NotFound
from annotation.models import Comparison, ComparisonSet, Study
from annotation.services.audit import audit_record
from judges.limits import limiter_for
from judges.models import Judge, JudgeOutput, Order, OutputStatus, Provider
from judges.services.calls import DATABASE_ERRORS, judge_limits, judge_output_execute

MAX_REPEATS = 100


@dataclass(frozen=True)
class JudgeRunPlan:
    judge: str
    calls: int  # calls in the plan
    created: int  # new rows
    done: int  # already finished (valid, invalid or failed), skipped
    output_ids: tuple[int, ...]  # unfinished calls, queued (or to run locally)
    # Every unfinished call of the plan, including those a live worker holds (for --wait).
    unfinished_ids: tuple[int, ...] = ()


def tasks_run_eagerly() -> bool:
    from judges.tasks import call_judge

    return bool(call_judge.app.conf.task_always_eager)


def judge_get(*, name: str) -> Judge:
    try:
        return Judge.objects.get(name=name)
    except Judge.DoesNotExist:
        raise NotFound(f"no judge named {name!r} (see add_judge)") from None


def parse_orders(orders: str | Sequence[str]) -> tuple[str, ...]:
    items = [o.strip() for o in (orders.split(",") if isinstance(orders, str) else orders) if o.strip()]
    if not items:
        raise ArbiterError("orders: give at least one of primary, swapped")
    bad = [o for o in items if o not in Order.values]
    if bad:
        raise ArbiterError(f"orders: {', '.join(bad)} is not primary or swapped")
    return tuple(dict.fromkeys(items))


def _unfinished(now: object) -> Q:
    return Q(status=OutputStatus.PENDING) | Q(status=OutputStatus.RUNNING, lease_until__lt=now)


def judge_run_start(
    *,
    study: Study,
    judge: Judge,
    set: str | None = None,
    orders: Sequence[str] = (Order.PRIMARY, Order.SWAPPED),
    repeats: int = 1,
    retry_failed: bool = False,
    dispatch: bool = True,
    user: Any = None,
) -> JudgeRunPlan:
    """Create the rows of a run and queue its unfinished calls on commit."""
    if judge.provider == Provider.IMPORTED:
        raise ArbiterError(f"judge {judge.name} is imported-only (no endpoint); register a callable judge with add_judge")
    orders = parse_orders(orders)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise ArbiterError(f"repeats must be an integer 1..{MAX_REPEATS}, got {repeats!r}")
    if set not in (None, "", *ComparisonSet.values):
        raise ArbiterError(f"set must be human or deployment, got {set!r}")
    comparisons = Comparison.objects.filter(study=study)
    if set:
        comparisons = comparisons.filter(set=set)
    comparison_ids = list(comparisons.values_list("pk", flat=True))
    if not comparison_ids:
        raise ArbiterError(f"study {study.slug} has no {set + ' ' if set else ''}comparisons to judge")
    # Starting a run again is how an admin says the key / quota problem that stopped it is fixed.
    limiter_for().clear_stop(judge_limits(judge))

    with transaction.atomic():
        rows = [
            JudgeOutput(judge=judge, comparison_id=cid, order=order, repeat=rep)
            for cid in comparison_ids
            for order in orders
            for rep in range(repeats)
        ]
        before = JudgeOutput.objects.filter(judge=judge, comparison__study=study).count()
        JudgeOutput.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
        plan_rows = JudgeOutput.objects.filter(
            judge=judge, comparison_id__in=comparison_ids, order__in=orders, repeat__lt=repeats
        )
        created = JudgeOutput.objects.filter(judge=judge, comparison__study=study).count() - before
        if retry_failed:
            plan_rows.filter(status=OutputStatus.FAILED).update(
                status=OutputStatus.PENDING, attempts=0, transport_failures=0, invalid_attempts=0, error="", finished_at=None
            )
        now = timezone.now()
        ids = tuple(plan_rows.filter(_unfinished(now)).order_by("pk").values_list("pk", flat=True))
        unfinished = tuple(
            plan_rows.filter(status__in=[OutputStatus.PENDING, OutputStatus.RUNNING]).order_by("pk").values_list("pk", flat=True)
        )
        done = plan_rows.filter(status__in=[OutputStatus.VALID, OutputStatus.INVALID, OutputStatus.FAILED]).count()
        audit_record(
            action="judges.run", user=user, study=study, target=judge.name,
            set=set or "all", orders=list(orders), repeats=repeats, queued=len(ids), created=created,
        )
        if dispatch and ids:
            transaction.on_commit(lambda: judge_outputs_dispatch(output_ids=ids))
    return JudgeRunPlan(
        judge=judge.name, calls=len(rows), created=created, done=done, output_ids=ids, unfinished_ids=unfinished
    )


def judge_outputs_dispatch(*, output_ids: Iterable[int]) -> int:
    """Queue one task per output id (the task claims the row, so a duplicate message is harmless)."""
    from judges.tasks import call_judge

    n = 0
    for output_id in output_ids:
        call_judge.delay(output_id)
        n += 1
    return n


def judge_outputs_requeue(*, study: Study, judge: Judge | None = None) -> int:
    """Re-queue calls whose worker died (running, lease expired). Returns how many."""
    rows = JudgeOutput.objects.filter(comparison__study=study, status=OutputStatus.RUNNING, lease_until__lt=timezone.now())
    if judge is not None:
        rows = rows.filter(judge=judge)
    ids = list(rows.values_list("pk", flat=True))
    if ids:
        transaction.on_commit(lambda: judge_outputs_dispatch(output_ids=ids))
    return len(ids)


def judge_outputs_sweep() -> int:
    """Re-queue every call, in every study, whose lease ran out (the periodic sweeper's job)."""
    ids = list(
        JudgeOutput.objects.filter(status=OutputStatus.RUNNING, lease_until__lt=timezone.now()).values_list("pk", flat=True)
    )
    if ids:
        judge_outputs_dispatch(output_ids=ids)
    return len(ids)


def judge_stop_reason(judge: Judge) -> str | None:
    """Why calls of this judge are stopped (bad key, no quota), or None."""
    return limiter_for().stopped(judge_limits(judge))


DATABASE_RETRY_SECONDS = 60.0


def execute_retrying(output_id: int) -> str:
    """``judge_output_execute``, riding out a database restart (reconnect and try again for a minute)."""
    give_up = time.monotonic() + DATABASE_RETRY_SECONDS
    pause = 0.5
    while True:
        try:
            return judge_output_execute(output_id=output_id)
        except DATABASE_ERRORS:
            connection.close()
            if time.monotonic() > give_up:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def judge_outputs_run_local(
    *,
    output_ids: Sequence[int],
    concurrency: int = 1,
    progress: Callable[[int, str], None] | None = None,
) -> dict[str, int]:
    """Run calls in this process (``concurrency`` threads); counts of the statuses written."""
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def record(status: str) -> None:
        with lock:
            counts[status] = counts.get(status, 0) + 1
            if progress:
                progress(sum(counts.values()), status)

    if concurrency <= 1 or len(output_ids) <= 1:
        for output_id in output_ids:
            record(execute_retrying(output_id))
        return counts

    work: queue.Queue[int] = queue.Queue()
    for output_id in output_ids:
        work.put(output_id)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                try:
                    output_id = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    record(execute_retrying(output_id))
                except BaseException as exc:  # keep the pool alive; re-raised below
                    errors.append(exc)
                    return
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(concurrency, len(output_ids)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    close_old_connections()
    if errors:
        raise errors[0]
    return counts
