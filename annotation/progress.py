"""Progress of long commands on a terminal (issue 17): shown when stderr is a TTY, silent otherwise.

Services report what they are doing with :func:`progress_step` (a stage, optionally ``done`` of
``total``); it does nothing unless a command installed a reporter with :func:`terminal_progress`.
The reporter redraws one status line on stderr (stage, count, elapsed seconds) at most a few
times a second, and clears it when the command ends, so stdout and logs stay clean. Plain
Python: no Django, no threads in the services.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

Reporter = Callable[[str, int | None, int | None], None]
_reporter: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar("arbiter_progress", default=None)
REFRESH_SECONDS = 0.25


Detail = dict[str, Any]
_detail: contextvars.ContextVar[Callable[[Detail], None] | None] = contextvars.ContextVar(
    "arbiter_progress_detail", default=None
)


def progress_detail(detail: Detail) -> None:
    """Say more than a stage and a count (per system, pages rendered and failed, and why): a run's
    page shows it; a terminal does not (no-op without a detail reporter)."""
    reporter = _detail.get()
    if reporter is not None:
        reporter(detail)


def progress_step(stage: str, done: int | None = None, total: int | None = None) -> None:
    """Say what a long operation is doing (no-op without a terminal reporter)."""
    reporter = _reporter.get()
    if reporter is not None:
        reporter(stage, done, total)


def is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


class _Line:
    """One redrawn status line, plus a ticker so the elapsed time moves during a long step."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self.started = time.monotonic()
        self.stage = "starting"
        self.count = ""
        self.last_draw = 0.0
        self.width = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.ticker = threading.Thread(target=self._tick, name="arbiter-progress", daemon=True)

    def update(self, stage: str, done: int | None, total: int | None) -> None:
        with self.lock:
            new_stage = stage != self.stage
            self.stage = stage
            if done is not None and total:
                self.count = f" {done:,}/{total:,} ({100 * done // total}%)"
            elif done is not None:
                self.count = f" {done:,}"
            else:
                self.count = ""
            if new_stage or time.monotonic() - self.last_draw >= REFRESH_SECONDS or (total and done == total):
                self._draw()

    def _tick(self) -> None:
        while not self.stopped.wait(1.0):
            with self.lock:
                self._draw()

    def _draw(self) -> None:
        self.last_draw = time.monotonic()
        text = f"{self.label}: {self.stage}{self.count} · {self.last_draw - self.started:.0f} s"
        pad = max(self.width - len(text), 0)
        self.width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def close(self) -> None:
        self.stopped.set()
        with self.lock:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


@contextmanager
def terminal_progress(label: str, stream: TextIO | None = None) -> Iterator[bool]:
    """Show progress on ``stream`` (default stderr) while the block runs, if it is a terminal.

    Yields whether progress is shown.
    """
    stream = stream if stream is not None else sys.stderr
    if not is_terminal(stream):
        yield False
        return
    line = _Line(stream, label)
    line.ticker.start()
    try:
        with progress_reported(line.update):
            yield True
    finally:
        line.close()


@contextmanager
def progress_reported(reporter: Reporter, detail: Callable[[Detail], None] | None = None) -> Iterator[None]:
    """Send every :func:`progress_step` to ``reporter`` (and every :func:`progress_detail` to
    ``detail``) while the block runs (the terminal line above; a new study run's row;
    ``benchmarks/bench_new_study.py`` times each stage with it)."""
    token = _reporter.set(reporter)
    detail_token = _detail.set(detail)
    try:
        yield
    finally:
        _detail.reset(detail_token)
        _reporter.reset(token)
