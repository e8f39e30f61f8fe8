"""One figure at a time per process: matplotlib's style is process-wide state.

Matplotlib is not thread-safe (its FAQ, "Working with threads"): ``rc_context`` sets the global
``rcParams`` and puts back, on leaving, what it found on entering. Two threads drawing at once
(a page's figure request and a background plan or report run in the same web process) would
each draw with the other's style, or with none: without ``svg.hashsalt`` the SVG's ids come from
a random salt, so the same report would give other bytes. Every figure of the project is drawn
and saved inside ``drawing``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from matplotlib import rc_context

_LOCK = threading.RLock()


@contextmanager
def drawing(style: Any) -> Iterator[None]:
    """Hold the process's figure lock and matplotlib's ``style`` (re-entrant: a figure's helpers
    may enter it again)."""
    with _LOCK, rc_context(style):
        yield
