"""Group commit for the judge calls' small writes on SQLite (the claim, the result, a renewal).

On SQLite every autocommit write is its own transaction, and a WAL commit waits for an fsync of
the log (``synchronous=FULL``, the default: about 5 ms on the CI disk). Sixteen threads making two
writes per call then queue behind one file lock whose waiters poll with growing sleeps (SQLite's
busy handler: 1, 2, 5, 10, ... ms), and the writes, not the provider, set the pace.

:func:`committed` runs a write so that every write waiting at the same moment in this process
shares one transaction, hence one fsync: the first writer to arrive leads, takes everything queued
and runs each write in its own savepoint (one write's error is that write's alone), commits, and
wakes the others; a writer that arrived during the commit is woken to lead the next group.

Nothing is weakened: each caller gets its result only after the transaction holding its write is
committed and synced, exactly as with its own autocommit (a caller that would send an HTTP request
after its claim still sends it only once the claim is durable); a failed commit is every member's
error, and none of their writes is kept. Conditional UPDATEs stay conditional (their row counts
are read inside the transaction). On PostgreSQL, inside a transaction (``atomic``, tests), or on any
other backend, the write simply runs in place: PostgreSQL already shares WAL flushes between
concurrent commits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection, transaction


class _Pending:
    __slots__ = ("done", "error", "lead", "op", "result")

    def __init__(self, op: Callable[[], object]) -> None:
        self.op = op
        self.result: object = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.lead = False  # woken to lead the next group rather than with a result


class _GroupCommit:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._leading = False

    def run[T](self, op: Callable[[], T]) -> T:
        pending = _Pending(op)
        with self._lock:
            self._queue.append(pending)
            lead = not self._leading
            self._leading = True
        while not lead:
            pending.done.wait()
            if not pending.lead:
                break
            pending.lead, lead = False, True
            pending.done.clear()
        if lead:
            self._lead()
        if pending.error is not None:
            raise pending.error
        return pending.result  # type: ignore[return-value]

    def _lead(self) -> None:
        """Run one group (this thread's write is in it), then hand the lead to a waiting writer."""
        with self._lock:
            group, self._queue = self._queue, []
        try:
            with transaction.atomic():
                for member in group:
                    try:
                        with transaction.atomic():  # a savepoint: one write's error is its own
                            member.result = member.op()
                    except Exception as exc:
                        member.error = exc
        except BaseException as exc:  # the commit failed: no write of the group was kept
            for member in group:
                if member.error is None:
                    member.error = exc
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].lead = True
                    self._queue[0].done.set()
                else:
                    self._leading = False
            for member in group:
                member.done.set()


_group = _GroupCommit()


def committed[T](op: Callable[[], T]) -> T:
    """``op()`` (a small write), committed; on SQLite in autocommit, in a group with concurrent writes."""
    if connection.in_atomic_block:
        return op()  # the caller's transaction decides
    if connection.vendor != "sqlite":
        with transaction.atomic():  # the same all-or-nothing write as in a group, without the group
            return op()
    return _group.run(op)
