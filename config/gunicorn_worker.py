"""gunicorn's threaded worker, with the connections spread evenly over the processes.

A keep-alive connection stays with the process that accepted it, and each process gets about the
same share of the cores whatever it holds. gthread lets every process accept as soon as it is
woken, so which process gets a rater's connection depends on who wakes first; under the rater
benchmark at 50 raters the three processes held 25, 15 and 10 connections, and a rater on the
fullest one waited two and a half times as long per request as one on the emptiest: that was the
tail of the latency distribution (docs/benchmarks.md, "seventh pass").

Here each process writes its id and how many connections it holds into a small table shared by
all of them (an anonymous shared memory map, made when the master imports this module and
inherited by the processes it forks), and listens for new ones only while it holds no more than
the fewest any process holds, plus one. The fewest-holding process is always listening, so a new
connection never waits for a busy process; the counts stay within one or two of each other.

Nothing else about gthread changes: threads, keep-alive, timeouts, graceful stops.
"""

from __future__ import annotations

import mmap
import os
import struct

from gunicorn.workers.gthread import ThreadWorker

SLOTS = 64  # one per worker process alive at once, by its spawn number (``age``) modulo this
_ENTRY = struct.Struct("qq")  # (process id, connections held); process id 0: a free slot
_TABLE = struct.Struct(f"{2 * SLOTS}q")
_table = mmap.mmap(-1, _TABLE.size)  # MAP_SHARED | MAP_ANONYMOUS: shared with the forked workers


def _write(slot: int, pid: int, held: int) -> None:
    _ENTRY.pack_into(_table, slot * _ENTRY.size, pid, held)


def entries() -> list[tuple[int, int, int]]:
    """(slot, process id, connections held) of each worker the shared table lists."""
    values = _TABLE.unpack_from(_table)
    return [(i // 2, values[i], values[i + 1]) for i in range(0, len(values), 2) if values[i]]


def release(age: int) -> None:
    """Mark a worker's slot free: from the worker as it stops, and from the master when it exits."""
    _write(age % SLOTS, 0, 0)


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
        while True:
            slot, pid, fewest = min(entries(), key=lambda entry: entry[2])
            if mine <= fewest + 1:
                return True
            if _alive(pid):
                return False
            # A worker killed without its slot freed (no ``child_exit`` hook in the configuration
            # that started it) must not keep the others from listening.
            _write(slot, 0, 0)

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled and self._my_turn())

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Once round the main loop: after the events (an accept, a connection closed or kept) this
        # process's count is published and whether to listen is decided again.
        super().wait_for_and_dispatch_events(timeout)
        self.set_accept_enabled(self.nr_conns < self.worker_connections)
