"""``annotation.task_queue``: a task goes to the broker when there is one; without one, to a daemon thread
of the process, one computing at a time (the plans and leaderboards of tests/ranking/test_runs_in_background.py)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from annotation import task_queue


class FakeTask:
    """A task whose ``apply`` records how many of its runs overlap, and blocks until released."""

    name = "fake"

    def __init__(self, *, eager: bool) -> None:
        self.app = SimpleNamespace(conf=SimpleNamespace(task_always_eager=eager))
        self.delayed: list[tuple[Any, ...]] = []
        self.applied: list[list[Any]] = []
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0
        self.release = threading.Event()

    def delay(self, *args: Any) -> None:
        self.delayed.append(args)

    def apply(self, *, args: list[Any], throw: bool) -> None:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.applied.append(args)
        self.release.wait(timeout=30)
        with self.lock:
            self.running -= 1


def test_with_a_broker_the_task_is_sent_and_no_thread_starts(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_TASKS_IN_BACKGROUND = True
    task = FakeTask(eager=False)
    assert task_queue.task_queue(task, 7) is None
    assert task.delayed == [(7,)] and task.applied == []


def test_with_the_setting_off_an_eager_task_runs_as_celery_runs_it(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_TASKS_IN_BACKGROUND = False
    task = FakeTask(eager=True)
    assert task_queue.task_queue(task, 7) is None
    assert task.delayed == [(7,)]  # eager delay: inside the caller


def test_without_a_broker_tasks_run_in_daemon_threads_one_at_a_time(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_TASKS_IN_BACKGROUND = True
    task = FakeTask(eager=True)
    threads = [task_queue.task_queue(task, n) for n in range(3)]
    assert all(t is not None and t.daemon and t.name == "arbiter-task" for t in threads)
    # The first holds the slot; the others have started and wait for it.
    for _ in range(3000):  # at most 30 s for the first to start
        if task.applied:
            break
        threading.Event().wait(0.01)
    assert len(task.applied) == 1 and all(t is not None and t.is_alive() for t in threads)
    task.release.set()
    for thread in threads:
        assert thread is not None
        thread.join(timeout=30)
    assert sorted(a[0] for a in task.applied) == [0, 1, 2] and task.most_at_once == 1
    assert task.delayed == []
