"""A memory limit over a render worker's whole browser (docs/rendering.md "Isolation").

V8's heap cap (``--max-old-space-size``) leaves out what a page allocates beside the JavaScript
heap: ArrayBuffers, WebAssembly memories, the DOM, decoded images. :class:`MemoryLimit` is a
thread that measures the browser's processes while a page renders (every :data:`POLL_S`; the
list of processes is read again every :data:`PROCESSES_S`) and, past the limit, kills them all
(SIGKILL): the page is then a failed render (``over the memory limit of N MB``) and the renderer
starts a new browser for the next page.

What is counted: each process's resident anonymous and shared memory (``RssAnon`` + ``RssShmem``
of ``/proc/<pid>/status``), what a page's allocations become; not the files the browser maps
(its code, fonts: the same for every page). Pages a forked process still shares with its zygote
are counted in each, so the figure errs high. A cgroup's ``memory.max`` would stop an allocation
at the limit itself; it needs a writable (delegated) cgroup v2 subtree, which neither this
project's machines (cgroup v1) nor a default container give (docs/decisions/0071-renderer-memory-and-determinism.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from annotation.render import chromium

POLL_S = 0.05
PROCESSES_S = 1.0
_FIELDS = (b"RssAnon:", b"RssShmem:")


def process_memory_kb(pid: int) -> int:
    """Resident anonymous + shared memory of one process in KiB (0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in lines if line.startswith(_FIELDS))


class MemoryLimit:
    """Watches the browser started with ``marker``; past ``limit_mb`` during a page, kills it.

    :meth:`arm` before a page, :meth:`disarm` after it: that returns the page's peak (MB) and
    whether the limit killed the browser. Nothing is measured between pages.
    """

    def __init__(self, marker: str, limit_mb: int) -> None:
        self.marker = marker
        self.limit_kb = limit_mb * 1024
        self._lock = threading.Lock()
        self._armed = threading.Event()
        self._stopped = threading.Event()
        self._peak_kb = 0
        self._over = False
        self._relist = True
        self._thread = threading.Thread(target=self._run, name=f"arbiter-memory-{marker[:8]}", daemon=True)
        self._thread.start()

    def arm(self) -> None:
        with self._lock:
            self._peak_kb, self._over, self._relist = 0, False, True  # the browser may be a new one
        self._armed.set()

    def disarm(self) -> tuple[int, bool]:
        self._armed.clear()
        with self._lock:  # a measurement under way finishes first
            # Rounded up: a peak past the limit (which is what kills) never reads as the limit.
            return -(-self._peak_kb // 1024), self._over

    def stop(self) -> None:
        self._stopped.set()
        self._armed.set()
        self._thread.join(5)

    def _run(self) -> None:
        pids: list[int] = []
        listed = 0.0
        while not self._stopped.is_set():
            self._armed.wait()
            with self._lock:
                if self._armed.is_set() and not self._over and not self._stopped.is_set():
                    if self._relist or time.monotonic() - listed > PROCESSES_S:
                        pids, listed = list(chromium.browser_processes(self.marker)), time.monotonic()
                        self._relist = False
                    used = sum(process_memory_kb(pid) for pid in pids)
                    self._peak_kb = max(self._peak_kb, used)
                    if used > self.limit_kb:
                        self._over = True
                        self._kill()
            time.sleep(POLL_S)

    def _kill(self) -> None:
        # Listed again: a process started since the last listing goes too.
        for pid in chromium.browser_processes(self.marker):
            with contextlib.suppress(OSError):  # ended meanwhile
                os.kill(pid, signal.SIGKILL)
