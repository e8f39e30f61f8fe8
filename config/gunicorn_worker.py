"""gunicorn's threaded worker, with the connections spread evenly over the processes.

A keep-alive connection stays with the process that accepted it, and each process gets about the
same share of the cores whatever it holds. gthread lets every process accept as soon as it is
woken, so which process gets a rater's connection depends on who wakes first; under the rater
benchmark at 50 raters the three processes held 25, 15 and 10 connections, and a rater on the
fullest one waited two and a half times as long per request as one on the emptiest: that was the
tail of the latency distribution (docs/benchmarks.md, "seventh pass").

Here each process writes its id, how many connections it holds and a heartbeat (the time of its
latest turn round the main loop) into a small table shared by all of them (an anonymous shared
memory map, made when the master imports this module and inherited by the processes it forks),
and listens for new ones only while it holds no more than the fewest any live process holds, plus
one. The fewest-holding process is always listening, so a new connection never waits for a busy
process; the counts stay within one or two of each other.

A process whose heartbeat is older than ``STALE_SECONDS`` does not count toward "the fewest": one
stopped (SIGSTOP, a debugger, a frozen container) or stuck would otherwise keep its low count in
the table while it cannot accept anything, and the others would stop listening until gunicorn's
timeout killed it (issue 32: 2-4 of 8 new connections failed within 5 s). Each loop turn waits
at most ``TURN_SECONDS`` for events, so a live process beats several times within that window; a
stopped one is ignored within ``STALE_SECONDS`` plus one turn, and counts again when it resumes.

Nothing else about gthread changes: threads, keep-alive, timeouts, graceful stops.
"""

from __future__ import annotations

import mmap
import os
import struct
import time

from gunicorn.workers.gthread import ThreadWorker

SLOTS = 64  # one per worker process alive at once, by its spawn number (``age``) modulo this
STALE_SECONDS = 1.0  # a heartbeat older than this: the process is not taking connections
TURN_SECONDS = 0.25  # the longest a worker's main loop waits for events before it beats again
# (process id, connections held, heartbeat: time.monotonic(), the same clock in every process);
# process id 0: a free slot
_ENTRY = struct.Struct("qqd")
_TABLE = struct.Struct("qqd" * SLOTS)
_table = mmap.mmap(-1, _TABLE.size)  # MAP_SHARED | MAP_ANONYMOUS: shared with the forked workers


def _write(slot: int, pid: int, held: int) -> None:
    _ENTRY.pack_into(_table, slot * _ENTRY.size, pid, held, time.monotonic())


def entries() -> list[tuple[int, int, int, float]]:
    """(slot, process id, connections held, heartbeat) of each worker the shared table lists."""
    values = _TABLE.unpack_from(_table)
    return [(i // 3, values[i], values[i + 1], values[i + 2]) for i in range(0, len(values), 3) if values[i]]


def release(age: int) -> None:
    """Mark a worker's slot free: from the worker as it stops, and from the master when it exits."""
    _ENTRY.pack_into(_table, (age % SLOTS) * _ENTRY.size, 0, 0, 0.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, under another user
    return True


class BalancedThreadWorker(ThreadWorker):  # type: ignore[misc]
    """gthread, listening for new connections only while this process holds no more than the fewest plus one."""

    def init_process(self) -> None:
        self._slot, self._pid = self.age % SLOTS, os.getpid()
        _write(self._slot, self._pid, 0)
        try:
            super().init_process()
        finally:
            release(self.age)

    def _my_turn(self) -> bool:
        mine = self.nr_conns
        _write(self._slot, self._pid, mine)
        fresh = time.monotonic() - STALE_SECONDS
        for slot, pid, held, beat in sorted(entries(), key=lambda entry: entry[2]):
            if mine <= held + 1:
                return True
            if not _alive(pid):
                # A worker killed without its slot freed (no ``child_exit`` hook in the configuration
                # that started it) must not keep the others from listening.
                release(slot)
            elif beat >= fresh:
                return False
            # Alive but silent (stopped, stuck): not counted until it beats again.
        return True

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled and self._my_turn())

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Once round the main loop: after the events (an accept, a connection closed or kept) this
        # process's count and heartbeat are published and whether to listen is decided again.
        super().wait_for_and_dispatch_events(min(timeout, TURN_SECONDS))
        self.set_accept_enabled(self.nr_conns < self.worker_connections)
