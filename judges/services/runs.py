"""Queueing judge calls (docs/protocol.md "Judges and calibration", "Commands" ``run_judges``): idempotent on
(judge, comparison, order, repeat).

``judge_run_start`` creates the missing JudgeOutput rows (``pending``) with
``bulk_create(ignore_conflicts=True)`` and, on commit, queues one Celery task per call that is not
finished (pending, or running with an expired lease), passing only the output id. Running it
again skips what is done and re-queues what was lost. ``judge_outputs_run_local`` executes calls in
this process with a pool of threads (eager mode: the CLI's progress bar, the benchmark).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.errors import ArbiterError, NotFound
from annotation.kinds import design_of
from annotation.kinds.judging import UNIT_CANDIDATE, JudgeRequestPlan
from annotation.models import Comparison, ComparisonSet, Study
from annotation.services.audit import audit_record
from judges.limits import limiter_for
from judges.models import Judge, JudgeOutput, Order, OutputStatus, Provider
from judges.services.calls import DATABASE_ERRORS, expired_output_ids, judge_limits, judge_output_execute
from judges.units import study_outputs

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


def judge_plan_of(study: Study) -> JudgeRequestPlan:
    """The study kind's judge plan (decision 0077); a one-line error when the kind builds none."""
    plan = design_of(study).judge_plan(study)
    if plan.refusal:
        raise ArbiterError(f"study {study.slug} cannot be judged: {plan.refusal}")
    return plan


def run_units(study: Study, plan: JudgeRequestPlan, orders: Sequence[str], set: str | None) -> tuple[str, list[int], tuple[str, ...]]:
    """The output field of the plan's unit, the units a run calls, and the orders it calls them in: the
    asked ``orders`` the plan has, else the plan's (a call about one rendering is made in its one order,
    whatever ``orders`` asked)."""
    orders = tuple(o for o in orders if o in plan.orders) or plan.orders
    if plan.unit == UNIT_CANDIDATE:
        if set:
            raise ArbiterError(f"set: study {study.slug}'s judge calls are about renderings, which have no set")
        ids = design_of(study).judge_unit_ids(study)
        if not ids:
            raise ArbiterError(f"study {study.slug} has no rendering with something to answer to judge")
        return "candidate_id", ids, orders
    comparisons = Comparison.objects.filter(study=study)
    if set:
        comparisons = comparisons.filter(set=set)
    ids = list(comparisons.values_list("pk", flat=True))
    if not ids:
        raise ArbiterError(f"study {study.slug} has no {set + ' ' if set else ''}comparisons to judge")
    return "comparison_id", ids, tuple(orders)


def _check_run(judge: Judge, orders: str | Sequence[str], repeats: int, set: str | None) -> tuple[str, ...]:
    """The run's orders, once the judge is callable and the repeats and set make sense."""
    if judge.provider == Provider.IMPORTED:
        raise ArbiterError(f"judge {judge.name} is imported-only (no endpoint); register a callable judge with add_judge")
    checked = parse_orders(orders)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise ArbiterError(f"repeats must be an integer 1..{MAX_REPEATS}, got {repeats!r}")
    if set not in (None, "", *ComparisonSet.values):
        raise ArbiterError(f"set must be human or deployment, got {set!r}")
    return checked


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
    refresh: bool = False,
) -> JudgeRunPlan:
    """Create the rows of a run and queue its unfinished calls on commit.

    ``refresh`` (paper B.5): the run is exactly the calls of the judge that have a superseded
    output (every order and repeat they had): a missing successor is created, a finished one
    counts as done, so running it again is harmless; ``orders`` and ``repeats`` are not used,
    ``set`` still narrows it. Without it, a superseded call counts as missing, so the usual run
    makes its successor too.
    """
    orders = _check_run(judge, orders, repeats, set)
    field, unit_ids, orders = run_units(study, judge_plan_of(study), orders, set)
    # Starting a run again is how an admin says the key / quota problem that stopped it is fixed.
    limiter_for().clear_stop(judge_limits(judge))

    with transaction.atomic():
        if refresh:
            keys = _refresh_keys(judge=judge, field=field, unit_ids=unit_ids)
        else:
            keys = [(uid, order, rep) for uid in unit_ids for order in orders for rep in range(repeats)]
        rows = [JudgeOutput(judge=judge, order=order, repeat=rep, **{field: uid}) for uid, order, rep in keys]
        before = JudgeOutput.objects.filter(study_outputs(study), judge=judge).count()
        JudgeOutput.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
        if refresh:
            wanted = frozenset(keys)
            plan_rows = JudgeOutput.objects.filter(
                pk__in=[
                    pk
                    for pk, *key in JudgeOutput.objects.filter(
                        judge=judge, **{f"{field}__in": sorted({uid for uid, _, _ in keys})}
                    ).values_list("pk", field, "order", "repeat")
                    if tuple(key) in wanted
                ]
            )
        else:
            plan_rows = JudgeOutput.objects.filter(
                judge=judge, order__in=orders, repeat__lt=repeats, **{f"{field}__in": unit_ids}
            )
        created = JudgeOutput.objects.filter(study_outputs(study), judge=judge).count() - before
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


def _refresh_keys(*, judge: Judge, field: str, unit_ids: Sequence[int]) -> list[tuple[int, str, int]]:
    """(unit, order, repeat) of every superseded output of the judge on these units."""
    return sorted(
        set(
            JudgeOutput.all_versions.filter(
                judge=judge, superseded=True, **{f"{field}__in": list(unit_ids)}
            ).values_list(field, "order", "repeat")
        )
    )


def judge_outputs_dispatch(*, output_ids: Iterable[int], recovered: bool = False) -> int:
    """Queue one task per output id (the task claims the row, so a duplicate message is harmless).

    ``recovered``: calls whose worker died, queued ahead of the runs' backlog (``judges.tasks``).
    """
    from judges.tasks import RECOVERED_PRIORITY, RUN_PRIORITY, call_judge

    priority = RECOVERED_PRIORITY if recovered else RUN_PRIORITY
    n = 0
    for output_id in output_ids:
        call_judge.apply_async((output_id,), priority=priority)
        n += 1
    return n


def judge_outputs_requeue(*, study: Study, judge: Judge | None = None) -> int:
    """Re-queue calls whose worker died (running, lease expired). Returns how many."""
    rows = JudgeOutput.objects.filter(study_outputs(study), status=OutputStatus.RUNNING, lease_until__lt=timezone.now())
    if judge is not None:
        rows = rows.filter(judge=judge)
    ids = list(rows.values_list("pk", flat=True))
    if ids:
        transaction.on_commit(lambda: judge_outputs_dispatch(output_ids=ids, recovered=True))
    return len(ids)


def judge_outputs_sweep() -> int:
    """Re-queue every call, in every study, whose lease ran out (the periodic sweeper's job)."""
    ids = expired_output_ids()
    if ids:
        judge_outputs_dispatch(output_ids=ids, recovered=True)
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


def judge_outputs_run_in_background(*, output_ids: Sequence[int], concurrency: int = 4) -> threading.Thread:
    """Run the calls in a daemon thread of this process and return it (the embedded default).

    Without a broker the web page would otherwise answer only when every call is done; started
    here, the judges page shows them finishing (its htmx poll) as a real worker would. The
    claims, leases and retries are the same as a worker's (``execute_retrying``); a call left by
    a stopped process is taken up again by the next run or the lease sweeper.
    """

    def run() -> None:
        try:
            judge_outputs_run_local(output_ids=output_ids, concurrency=concurrency)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="arbiter-judges", daemon=True)
    thread.start()
    return thread


def _limiter_caps_in_flight(output_ids: Sequence[int], concurrency: int) -> bool:
    """True when every output is one judge's whose limiter allows at most ``concurrency`` requests."""
    caps: set[tuple[int, int]] = set()
    for start in range(0, len(output_ids), 500):
        chunk = output_ids[start : start + 500]
        caps.update(JudgeOutput.objects.filter(pk__in=chunk).values_list("judge_id", "judge__concurrency").distinct())
        if len(caps) > 1:
            return False
    return len(caps) == 1 and max(int(next(iter(caps))[1]), 1) <= concurrency


def judge_outputs_run_local(
    *,
    output_ids: Sequence[int],
    concurrency: int = 1,
    progress: Callable[[int, str], None] | None = None,
) -> dict[str, int]:
    """Run calls in this process, at most ``concurrency`` in flight; counts of the statuses written.

    When the calls are one judge's and its limiter already holds its HTTP requests to at most
    ``concurrency`` (``judge.concurrency <= concurrency``), a quarter more threads than that run
    them: while one thread stores its result and claims its next output, the provider still has
    ``judge.concurrency`` requests to answer instead of one fewer during each call's database
    work (benchmarks/bench_judges.py: 91.7 % → 96.8 % of the ideal rate).
    """
    from judges.providers.transport import close_thread_clients

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
            close_thread_clients()

    spare = max(1, concurrency // 4) if _limiter_caps_in_flight(output_ids, concurrency) else 0
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(concurrency + spare, len(output_ids)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    close_old_connections()
    if errors:
        raise errors[0]
    return counts


@dataclass(frozen=True)
class JudgeRunEstimate:
    """What a run would send, before anything is queued (``run_judges --dry-run``)."""

    judge: str
    calls: int  # calls that would be made (unfinished ones of the plan)
    done: int
    image_tokens: int
    text_tokens: int
    output_tokens: int
    cost_usd: float | None
    batch: bool = False

    @property
    def input_tokens(self) -> int:
        return self.image_tokens + self.text_tokens


def _sent_size(stored: Any, max_edge: int | None) -> tuple[int, int]:
    width, height = int(stored.width), int(stored.height)
    if max_edge and max(width, height) > max_edge:
        scale = max_edge / max(width, height)
        return max(1, round(width * scale)), max(1, round(height * scale))
    return width, height


def judge_run_estimate(
    *,
    study: Study,
    judge: Judge,
    set: str | None = None,
    orders: Sequence[str] = (Order.PRIMARY, Order.SWAPPED),
    repeats: int = 1,
    retry_failed: bool = False,
    batch: bool = False,
) -> JudgeRunEstimate:
    """Calls, estimated image / text / output tokens and cost of a run; writes nothing."""
    from annotation.models import Axis
    from judges.costs import Prices, cost_usd, image_tokens, reply_tokens, text_tokens
    from judges.prompts import active_axes_payload, render_prompt
    from judges.providers.schema import SYSTEM_PROMPT, reply_schema

    orders = _check_run(judge, orders, repeats, set)
    plan = judge_plan_of(study)
    if plan.unit == UNIT_CANDIDATE:
        return _item_run_estimate(study=study, judge=judge, plan=plan, repeats=repeats, retry_failed=retry_failed,
                                  batch=batch, set=set)
    orders = tuple(o for o in orders if o in plan.orders) or plan.orders
    comparisons = Comparison.objects.filter(study=study).select_related(
        "study", "page__image", "page__neutralized_image", "candidate_a__image", "candidate_a__neutralized_image",
        "candidate_b__image", "candidate_b__neutralized_image",
    )
    if set:
        comparisons = comparisons.filter(set=set)
    finished = [OutputStatus.VALID, OutputStatus.INVALID] + ([] if retry_failed else [OutputStatus.FAILED])
    done_keys = Counter(
        JudgeOutput.objects.filter(judge=judge, comparison__study=study, order__in=orders, repeat__lt=repeats,
                                   status__in=finished).values_list("comparison_id", flat=True)
    )
    axes = list(Axis.objects.filter(study=study).order_by("position"))
    per_call = repeats * len(orders)
    max_edge = judge.max_image_edge or None
    calls = done = image = text = output = 0
    for comparison in comparisons.iterator(chunk_size=500):
        already = done_keys.get(comparison.pk, 0)
        todo = per_call - already
        done += already
        if todo <= 0:
            continue
        neutral = bool(comparison.study.neutralize_media)
        page = comparison.page
        pick = [(page.image, page.neutralized_image), (comparison.candidate_a.image, comparison.candidate_a.neutralized_image),
                (comparison.candidate_b.image, comparison.candidate_b.neutralized_image)]
        sizes = [_sent_size((n or i) if neutral else i, max_edge) for i, n in pick if (n or i) is not None]
        active = page.active_axis_ids(axes)
        prompt = render_prompt(comparison.study.judge_prompt, active_axes_payload(axes, page.targets, active),
                               default=plan.default_prompt)
        chars = len(prompt) + len(SYSTEM_PROMPT) + 40
        if judge.structured_output:
            chars += len(json.dumps(reply_schema(active)))
        calls += todo
        image += todo * sum(image_tokens(judge.provider, w, h) for w, h in sizes)
        text += todo * text_tokens(chars)
        output += todo * reply_tokens(len(active))
    prices = Prices(judge.price_input_per_mtok, judge.price_output_per_mtok, judge.batch_discount)
    return JudgeRunEstimate(
        judge=judge.name, calls=calls, done=done, image_tokens=image, text_tokens=text, output_tokens=output,
        cost_usd=cost_usd(prices, image + text, output, batch=batch), batch=batch,
    )


# A checklist answer's evidence: a few words per question on top of the id and the answer.
EVIDENCE_TOKENS_PER_QUESTION = 25


def _item_run_estimate(
    *, study: Study, judge: Judge, plan: JudgeRequestPlan, repeats: int, retry_failed: bool, batch: bool,
    set: str | None,
) -> JudgeRunEstimate:
    """``judge_run_estimate`` of a run whose calls are about one rendering each (one image, the kind's
    prompt and reply)."""
    from annotation.models import Candidate
    from judges.costs import Prices, cost_usd, image_tokens, reply_tokens, text_tokens
    from judges.providers.schema import SYSTEM_PROMPT
    from judges.request_building import RequestNotBuildable, request_contract

    _field, unit_ids, orders = run_units(study, plan, plan.orders, set)
    finished = [OutputStatus.VALID, OutputStatus.INVALID] + ([] if retry_failed else [OutputStatus.FAILED])
    done_keys = Counter(
        JudgeOutput.objects.filter(judge=judge, candidate_id__in=unit_ids, order__in=orders, repeat__lt=repeats,
                                   status__in=finished).values_list("candidate_id", flat=True)
    )
    per_call = repeats * len(orders)
    max_edge = judge.max_image_edge or None
    calls = done = image = text = output = 0
    candidates = Candidate.objects.filter(pk__in=unit_ids).select_related("page__study", "image", "neutralized_image")
    for candidate in candidates.iterator(chunk_size=500):
        already = done_keys.get(candidate.pk, 0)
        todo = per_call - already
        done += already
        if todo <= 0:
            continue
        try:
            asked = request_contract(unit=candidate)
        except RequestNotBuildable:
            continue
        stored = (candidate.neutralized_image or candidate.image) if study.neutralize_media else candidate.image
        chars = len(asked.prompt) + len(SYSTEM_PROMPT) + 40
        if judge.structured_output:
            chars += len(json.dumps(asked.contract.schema()))
        n = len(asked.contract.ids)
        calls += todo
        if stored is not None:
            image += todo * image_tokens(judge.provider, *_sent_size(stored, max_edge))
        text += todo * text_tokens(chars)
        output += todo * (reply_tokens(n) + (EVIDENCE_TOKENS_PER_QUESTION * n if asked.keys else 0))
    prices = Prices(judge.price_input_per_mtok, judge.price_output_per_mtok, judge.batch_discount)
    return JudgeRunEstimate(
        judge=judge.name, calls=calls, done=done, image_tokens=image, text_tokens=text, output_tokens=output,
        cost_usd=cost_usd(prices, image + text, output, batch=batch), batch=batch,
    )


def judge_run_usage(*, output_ids: Sequence[int], judge: Judge) -> dict[str, Any]:
    """Tokens the provider reported for these outputs, and their cost at the judge's prices."""
    from django.db.models import Sum

    from judges.costs import Prices, cost_usd

    totals: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "calls": 0}
    live = {"i": 0, "o": 0}
    batch = {"i": 0, "o": 0}
    for start in range(0, len(output_ids), 5000):
        rows = JudgeOutput.objects.filter(pk__in=list(output_ids[start : start + 5000]))
        part = rows.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cached_tokens"), n=Sum("calls"),
                              bi=Sum("input_tokens", filter=~Q(batch_id="")),
                              bo=Sum("output_tokens", filter=~Q(batch_id="")))
        for key, agg in (("input_tokens", "i"), ("output_tokens", "o"), ("cached_tokens", "c"), ("calls", "n")):
            totals[key] += part[agg] or 0
        batch["i"] += part["bi"] or 0
        batch["o"] += part["bo"] or 0
    live["i"] = totals["input_tokens"] - batch["i"]
    live["o"] = totals["output_tokens"] - batch["o"]
    prices = Prices(judge.price_input_per_mtok, judge.price_output_per_mtok, judge.batch_discount)
    live_cost = cost_usd(prices, live["i"], live["o"])
    batch_cost = cost_usd(prices, batch["i"], batch["o"], batch=True)
    totals["cost_usd"] = None if live_cost is None or batch_cost is None else live_cost + batch_cost
    return totals
