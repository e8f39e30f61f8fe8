"""A stand-in for the thread ``annotation.task_queue`` starts without a broker: it records the task and
starts nothing, so a test sees what the request left queued, then runs the task itself (on SQLite an
in-memory test database is locked per connection, so a real thread cannot share the test's data)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from annotation import task_queue


class RecordedThread:
    """Stands in for ``threading.Thread`` in ``annotation.task_queue``: records, starts nothing."""

    def __init__(
        self, *, target: Callable[..., None], args: tuple[Any, ...], name: str, daemon: bool
    ) -> None:
        self.target, self.args, self.name, self.daemon = target, args, name, daemon
        self.started = False

    def start(self) -> None:
        self.started = True

    def run(self) -> None:
        """Run the target here; the connection it closes at the end is a thread's, so not the test's."""
        closed: list[bool] = []
        connection = task_queue.connection
        task_queue.connection = SimpleNamespace(close=lambda: closed.append(True))  # type: ignore[assignment]
        try:
            self.target(*self.args)
        finally:
            task_queue.connection = connection
        assert closed == [True], "the thread's database connection was left open"


def record_task_threads(settings: Any, monkeypatch: pytest.MonkeyPatch) -> list[RecordedThread]:
    """Turn ``ARBITER_TASKS_IN_BACKGROUND`` on and record the threads it would start (returned, in order)."""
    settings.ARBITER_TASKS_IN_BACKGROUND = True
    made: list[RecordedThread] = []

    def thread(**kwargs: Any) -> RecordedThread:
        made.append(RecordedThread(**kwargs))
        return made[-1]

    monkeypatch.setattr(task_queue, "Thread", thread)
    return made
