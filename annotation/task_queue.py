"""Queue a Celery task once the transaction commits; without a broker, run it in a thread.

With a broker ``task.delay`` hands the task to a worker and the page that started it polls its
row with htmx. Without one (the embedded default of ``make run``, ``CELERY_TASK_ALWAYS_EAGER``)
``delay`` runs the task inside the request, so the page would answer only when the computation is
done: a plan of the demo study took 1.8 s on a quiet machine and 5.1 s on a busy one, a Davidson
leaderboard 1.1 s (benchmarks/bench_report_pages.py). With ``ARBITER_TASKS_IN_BACKGROUND`` (on by
default) the task runs instead in a daemon thread of this process once the row is committed, as
the judges page runs its calls (``judges.services.runs.judge_outputs_run_in_background``): the
request answers at once, with the run queued, and the page's htmx poll shows it finishing. The
task is the one a worker would run (``task.apply``), so its claim (a conditional update) and its
"failed" on an unexpected error are the same; an error is logged, as a worker would. One task
computes at a time (``BACKGROUND_SLOTS``), the others wait in their threads and their pages say
"Queued", as behind a worker of concurrency one: the process keeps the rest of its CPU for its
requests, the raters' among them, however many plans a researcher starts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from threading import BoundedSemaphore, Thread, Timer
from typing import Any

from django.conf import settings
from django.db import connection, transaction

logger = logging.getLogger(__name__)

#: How many background tasks compute at once in this process.
BACKGROUND_SLOTS = 1
_slots = BoundedSemaphore(BACKGROUND_SLOTS)


def task_runs_in_background(task: Any) -> bool:
    """True when ``task`` would run inside the request (no broker) and the setting moves it to a thread."""
    return bool(task.app.conf.task_always_eager) and bool(settings.ARBITER_TASKS_IN_BACKGROUND)


def task_run_in_thread(task: Any, args: Sequence[Any]) -> None:
    """Run ``task`` here as a worker would (once a slot is free), log an error, close the thread's connection."""
    try:
        with _slots:
            task.apply(args=list(args), throw=True)
    except Exception:
        logger.exception("task %s%r failed in its thread", task.name, tuple(args))
    finally:
        connection.close()


def task_queue(task: Any, *args: Any) -> Thread | None:
    """Queue ``task(*args)`` now: on the broker, or in a daemon thread (returned) without one."""
    if not task_runs_in_background(task):
        task.delay(*args)
        return None
    thread = Thread(target=task_run_in_thread, args=(task, args), name="arbiter-task", daemon=True)
    thread.start()
    return thread


def task_queue_on_commit(task: Any, *args: Any) -> None:
    """``task_queue`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: task_queue(task, *args), robust=True)


def task_queue_later(task: Any, seconds: float, *args: Any) -> None:
    """``task_queue(task, *args)`` in ``seconds`` (a run waiting its turn asks again without
    holding the background slot meanwhile)."""
    timer = Timer(seconds, task_queue, args=(task, *args))
    timer.daemon = True
    timer.start()
