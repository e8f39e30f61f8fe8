"""``run_judges SLUG --judge NAME [--set human|deployment] [--orders primary,swapped] [--repeats N]``
(docs/protocol.md "Commands").

Creates the missing outputs and queues one task per unfinished call; running it again skips what
is done. With eager tasks (no broker) the calls run here, ``--concurrency`` at a time (default:
the judge's), behind a progress bar. With a broker, ``--wait`` polls the database until the run
is finished (re-queueing calls whose worker died) and shows the same bar.

``--max-calls N`` / ``--budget-usd X`` spend a budget adaptively (``judges.services.budget``): in
rounds, each chosen from the judge's outputs so far; with a broker every round is queued and waited
for (a budget run always waits), so ``--wait`` is implied.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import ArbiterError
from annotation.management.base import ArbiterCommand
from judges.management.commands._common import study_by_slug
from judges.models import JudgeOutput, OutputStatus
from judges.services.batches import (
    judge_batch_submit,
    judge_batches_cancel,
    judge_batches_open,
    judge_batches_poll,
)
from judges.services.budget import DEFAULT_TARGET_WIDTH_ELO, judge_budget_resolve, judge_run_budget
from judges.services.runs import (
    judge_get,
    judge_outputs_dispatch,
    judge_outputs_requeue,
    judge_outputs_run_local,
    judge_run_estimate,
    judge_run_start,
    judge_run_usage,
    judge_stop_reason,
    tasks_run_eagerly,
)
from judges.units import study_outputs

BAR_WIDTH = 30


class Command(ArbiterCommand):
    help = "Queue judge calls for a study (idempotent: finished calls are skipped)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--judge", required=True)
        parser.add_argument("--set", choices=["human", "deployment"], default=None)
        parser.add_argument("--orders", default="primary,swapped")
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument("--retry-failed", action="store_true", help="run failed calls again from scratch")
        parser.add_argument(
            "--refresh",
            action="store_true",
            help="only the successors of superseded outputs (candidates replaced by import_study --update)",
        )
        parser.add_argument("--wait", action="store_true", help="with a broker: wait for the run to finish")
        parser.add_argument("--wait-timeout", type=float, default=None, help="give up waiting after S seconds")
        parser.add_argument("--concurrency", type=int, default=None, help="eager mode: calls in flight here")
        parser.add_argument("--batch", action="store_true",
                            help="submit through the provider's batch API (about half price; results within 24 h)")
        parser.add_argument("--cancel", nargs="?", const="all", default=None, metavar="BATCH_ID",
                            help="cancel the judge's open batches in this study (or the one named) and store what is done")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the calls, estimated tokens and cost; queue nothing")
        parser.add_argument("--max-calls", type=int, default=None, metavar="N",
                            help="spend at most N calls (one call: one comparison in one order and repeat), chosen "
                                 "adaptively in rounds where they narrow the leaderboard's adjacent intervals most "
                                 "(docs/protocol.md \"A judge's call budget\")")
        parser.add_argument("--budget-usd", type=float, default=None, metavar="X",
                            help="like --max-calls, the calls X dollars buy at the dry run's estimated cost per call "
                                 "(the judge needs prices)")
        parser.add_argument("--target-width", type=float, default=DEFAULT_TARGET_WIDTH_ELO, metavar="ELO",
                            help="with a budget: the adjacent 95%% interval width (Elo) the allocator steers by "
                                 f"(default {DEFAULT_TARGET_WIDTH_ELO:g})")
        parser.add_argument("--poll", type=float, default=1.0, help=argparse_hidden())

    def run(self, *args: Any, **o: Any) -> None:
        study = study_by_slug(o["slug"])
        judge = judge_get(name=o["judge"])
        if o["dry_run"]:
            self._dry_run(study, judge, o)
            return
        if o["cancel"]:
            cancelled = judge_batches_cancel(study=study, judge=judge,
                                             batch_id=None if o["cancel"] == "all" else o["cancel"])
            for batch in cancelled:
                self.stdout.write(f"batch {batch.pk} ({batch.provider_batch_id}): {batch.status}, "
                                  f"{batch.stored} results stored")
            if not cancelled:
                self.stdout.write(f"{judge.name}: no open batch in {study.slug}")
            return
        budgeted = o["max_calls"] is not None or o["budget_usd"] is not None
        if budgeted and (o["batch"] or o["refresh"] or o["retry_failed"]):
            raise ArbiterError("--max-calls / --budget-usd run live calls on comparisons not yet called; "
                               "they do not combine with --batch, --refresh or --retry-failed")
        if o["batch"]:
            self._batch(study, judge, o)
            return
        if budgeted:
            self._budget(study, judge, o)
            return
        eager = tasks_run_eagerly()
        plan = judge_run_start(
            study=study,
            judge=judge,
            set=o["set"],
            orders=o["orders"],
            repeats=o["repeats"],
            retry_failed=o["retry_failed"],
            dispatch=not eager,
            refresh=o["refresh"],
        )
        self.stdout.write(
            f"{judge.name}: {plan.calls} calls, {plan.created} new, {plan.done} already done, "
            f"{len(plan.output_ids)} {'to run' if eager else 'queued'}"
            + (f", {busy} held by a worker" if (busy := len(plan.unfinished_ids) - len(plan.output_ids)) else "")
        )
        ids = list(plan.output_ids)
        learned_before = dict(judge.learned_parameters or {})
        if eager:
            concurrency = o["concurrency"] or judge.concurrency
            self._bar(0, len(ids), {})
            seen: dict[str, int] = {}

            def progress(done: int, status: str) -> None:
                seen[status] = seen.get(status, 0) + 1
                self._bar(done, len(ids), seen)

            judge_outputs_run_local(output_ids=ids, concurrency=concurrency, progress=progress)
            self._end()
        elif o["wait"] and plan.unfinished_ids:
            ids = list(plan.unfinished_ids)
            self._wait(study, judge, ids, o["poll"], o["wait_timeout"])
        counts = self._counts(ids)
        if ids and (eager or o["wait"]):
            self.stdout.write(
                f"valid {counts.get('valid', 0)}, invalid {counts.get('invalid', 0)}, failed {counts.get('failed', 0)}"
            )
            self.stdout.write(self._usage_line(judge, ids))
            self._learned(judge, learned_before)
            stop = judge_stop_reason(judge)
            if stop:
                raise ArbiterError(f"{judge.name}: run stopped, {counts.get('pending', 0)} calls left pending: {stop}")
            self._check_outcome(judge, ids, counts)

    def _budget(self, study: Any, judge: Any, o: dict[str, Any]) -> None:
        budget = judge_budget_resolve(study=study, judge=judge, set=o["set"], orders=o["orders"], repeats=o["repeats"],
                                      max_calls=o["max_calls"], budget_usd=o["budget_usd"])
        eager = tasks_run_eagerly()
        money = (f" (${budget.budget_usd:g} at an estimated ${budget.cost_per_call_usd:.4f} a call)"
                 if budget.budget_usd is not None else "")
        self.stdout.write(f"{judge.name}: budget {budget.max_calls} calls{money}; "
                          f"{'in this process' if eager else 'each round queued and waited for'}")
        learned_before = dict(judge.learned_parameters or {})

        def run_round(ids: list[int]) -> None:
            if eager:
                judge_outputs_run_local(output_ids=ids, concurrency=o["concurrency"] or judge.concurrency)
            elif ids:
                judge_outputs_dispatch(output_ids=ids)
                self._wait(study, judge, ids, o["poll"], o["wait_timeout"])

        def on_round(r: Any) -> None:
            if r.widest_adjacent_elo != r.widest_adjacent_elo:  # NaN: renderings in brief order, no fit
                self.stdout.write(f"{r.comparisons} renderings in brief order, {r.calls} calls, spent "
                                  f"{r.spent}/{budget.max_calls}")
                return
            self.stdout.write(f"round {r.index}: {r.comparisons} comparisons, {r.calls} calls, spent "
                              f"{r.spent}/{budget.max_calls}; widest adjacent 95% interval {r.widest_adjacent_elo:.0f} Elo")

        run = judge_run_budget(study=study, judge=judge, budget=budget, run_round=run_round, set=o["set"],
                               orders=o["orders"], repeats=o["repeats"], target_width_elo=o["target_width"],
                               on_round=on_round)
        ids = list(run.output_ids)
        counts = self._counts(ids)
        unspent = budget.max_calls - run.calls
        if run.allocation != "adaptive":
            self.stdout.write(f"{judge.name}: a budget of {budget.max_calls} calls: {run.calls} spent "
                              f"({run.allocation}, {unspent} unspent)")
        else:
            self.stdout.write(
                f"{judge.name}: adaptive with a budget of {budget.max_calls} calls: {run.calls} spent in "
                f"{len(run.rounds)} rounds ({unspent} unspent"
                f"{', every comparison called' if unspent >= run.per_comparison and not run.stopped else ''}); "
                f"widest adjacent 95% interval {run.widest_adjacent_elo:.0f} Elo (steering width {o['target_width']:g})"
            )
        self.stdout.write(
            f"valid {counts.get('valid', 0)}, invalid {counts.get('invalid', 0)}, failed {counts.get('failed', 0)}"
        )
        self.stdout.write(self._usage_line(judge, ids))
        self._learned(judge, learned_before)
        if run.stopped:
            raise ArbiterError(f"{judge.name}: run stopped after {run.calls} calls: {run.stopped}")
        self._check_outcome(judge, ids, counts)

    def _learned(self, judge: Any, before: dict[str, Any]) -> None:
        """One line per parameter the run learned to drop (--adapt-parameters)."""
        judge.refresh_from_db(fields=["learned_parameters"])
        for param, entry in (judge.learned_parameters or {}).items():
            if param not in before:
                self.stdout.write(f"{judge.name}: the model {judge.model} refused '{param}', so {entry['changed']} "
                                  f"(stored on the judge; undo: {entry['undo']})")

    def _check_outcome(self, judge: Any, ids: list[int], counts: dict[str, int]) -> None:
        """Exit non-zero when no call of the run succeeded, or when any failed for a reason other than its reply."""
        failed = counts.get(OutputStatus.FAILED, 0)
        first = (JudgeOutput.objects.filter(pk__in=ids[:5000], status=OutputStatus.FAILED)
                 .order_by("pk").values_list("error", flat=True).first()) if failed else None
        reason = f" (first: {' '.join(str(first).split())[:300]})" if first else ""
        if ids and not counts.get(OutputStatus.VALID, 0):
            raise ArbiterError(f"{judge.name}: no call of this run succeeded ({counts.get('invalid', 0)} invalid, "
                               f"{failed} failed){reason}")
        if failed:
            raise ArbiterError(f"{judge.name}: {failed} of {len(ids)} calls failed for a reason other than the "
                               f"reply's content{reason}; run_judges --retry-failed runs them again")

    def _batch(self, study: Any, judge: Any, o: dict[str, Any]) -> None:
        submitted = 0
        while (batch := judge_batch_submit(study=study, judge=judge, set=o["set"], orders=o["orders"],
                                           repeats=o["repeats"], retry_failed=o["retry_failed"])) is not None:
            submitted += 1
            self.stdout.write(f"{judge.name}: batch {batch.pk} submitted as {batch.provider_batch_id}, "
                              f"{batch.calls} calls")
        if not submitted:
            self.stdout.write(f"{judge.name}: nothing to submit (every call is done or held)")
        if not o["wait"]:
            return
        started = time.monotonic()
        while judge_batches_open(study=study, judge=judge):
            judge_batches_poll(study=study, judge=judge)
            if not judge_batches_open(study=study, judge=judge):
                break
            if o["wait_timeout"] is not None and time.monotonic() - started > o["wait_timeout"]:
                raise ArbiterError(f"gave up waiting after {o['wait_timeout']:g} s; the batch stays open "
                                   "(poll again with run_judges --batch --wait, or let the beat task do it)")
            time.sleep(max(o["poll"], 0.05))
        ids = list(JudgeOutput.objects.filter(study_outputs(study), judge=judge).values_list("pk", flat=True))
        counts = self._counts(ids)
        self.stdout.write(f"valid {counts.get('valid', 0)}, invalid {counts.get('invalid', 0)}, "
                          f"failed {counts.get('failed', 0)}, pending {counts.get('pending', 0)}")
        self.stdout.write(self._usage_line(judge, ids))

    def _dry_run(self, study: Any, judge: Any, o: dict[str, Any]) -> None:
        estimate = judge_run_estimate(study=study, judge=judge, set=o["set"], orders=o["orders"], repeats=o["repeats"],
                                      retry_failed=o["retry_failed"], batch=o["batch"])
        if estimate.cost_usd is None:
            cost = "cost unknown (no prices: add_judge NAME --update --price-input X --price-output Y)"
        else:
            cost = (f"cost ${estimate.cost_usd:,.4f} at ${judge.price_input_per_mtok:g} / "
                    f"${judge.price_output_per_mtok:g} per million input / output tokens"
                    + (f", batch discount {judge.batch_discount:.0%}" if estimate.batch else ""))
        self.stdout.write(
            f"{judge.name} (dry run, nothing queued): {estimate.calls} calls, {estimate.done} already done; "
            f"estimated input {estimate.input_tokens:,} tokens (images {estimate.image_tokens:,}, text "
            f"{estimate.text_tokens:,}), output {estimate.output_tokens:,} tokens; {cost}"
        )

    def _usage_line(self, judge: Any, ids: list[int]) -> str:
        usage = judge_run_usage(output_ids=ids, judge=judge)
        cost = "" if usage["cost_usd"] is None else f", cost ${usage['cost_usd']:,.4f}"
        return (f"recorded: {usage['calls']} requests, input {usage['input_tokens']:,} tokens "
                f"({usage['cached_tokens']:,} cached), output {usage['output_tokens']:,} tokens{cost}")

    def _counts(self, ids: list[int]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for start in range(0, len(ids), 5000):
            for status in JudgeOutput.objects.filter(pk__in=ids[start : start + 5000]).values_list("status", flat=True):
                counts[status] = counts.get(status, 0) + 1
        return counts

    def _wait(self, study: Any, judge: Any, ids: list[int], poll: float, timeout: float | None) -> None:
        started = time.monotonic()
        last_requeue = started
        while True:
            counts = self._counts(ids)
            pending = counts.get(OutputStatus.PENDING, 0) + counts.get(OutputStatus.RUNNING, 0)
            self._bar(len(ids) - pending, len(ids), counts)
            if not pending or (not counts.get(OutputStatus.RUNNING, 0) and judge_stop_reason(judge)):
                self._end()
                return
            now = time.monotonic()
            if now - last_requeue >= max(poll * 5, 5.0):
                judge_outputs_requeue(study=study, judge=judge)
                last_requeue = now
            if timeout is not None and now - started > timeout:
                self._end()
                raise ArbiterError(f"gave up waiting after {timeout:g} s with {pending} calls unfinished (they stay queued)")
            time.sleep(poll)

    def _bar(self, done: int, total: int, counts: dict[str, int]) -> None:
        filled = BAR_WIDTH * done // total if total else BAR_WIDTH
        line = (
            f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}  valid {counts.get('valid', 0)}"
            f"  invalid {counts.get('invalid', 0)}  failed {counts.get('failed', 0)}"
        )
        self.stdout.write(line, ending="")
        self.stdout.flush()

    def _end(self) -> None:
        self.stdout.write("")
        if hasattr(sys.stdout, "flush"):
            sys.stdout.flush()


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS
