"""Failed renders as leaderboard outcomes (docs/protocol.md "Failed renders in the leaderboard").

Pure module: no Django, no project app. Two rules:

- ``ambihtmlbench``: only rendered outputs are scored; a comparison where either candidate failed
  to render is left out, and failures add nothing.
- ``aescode``: failures stay in the denominator. On each page, every pair of systems of which
  exactly one rendered is one outcome won by the rendered one (p = 1 for it); a pair where both
  failed says nothing about which is better and is dropped (each of the two already loses to every
  rendered output of the page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

RULES = ("ambihtmlbench", "aescode")


@dataclass(frozen=True, eq=False)
class FailureOutcomes:
    """The outcomes the ``aescode`` rule adds: comparison ``k`` is system ``a[k]`` against ``b[k]``
    on ``pages[k]`` (``a`` before ``b`` in the systems' order), ``p[k]`` the outcome for ``a`` (1: a
    rendered and b failed, 0: the other way round)."""

    pages: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    p: np.ndarray


def failure_outcomes(rendered: Mapping[str, Mapping[int, bool]], *, rule: str) -> FailureOutcomes:
    """``rendered[page][system index]``: whether that system's output of the page rendered (systems
    without an output of the page are absent). Pages in sorted order, pairs by system index."""
    if rule not in RULES:
        raise ValueError(f"unknown failure rule {rule!r} (expected one of {', '.join(RULES)})")
    pages: list[str] = []
    a: list[int] = []
    b: list[int] = []
    p: list[float] = []
    if rule == "aescode":
        for page in sorted(rendered):
            flags = rendered[page]
            systems: Sequence[int] = sorted(flags)
            for i, first in enumerate(systems):
                for second in systems[i + 1 :]:
                    if flags[first] != flags[second]:
                        pages.append(page)
                        a.append(first)
                        b.append(second)
                        p.append(1.0 if flags[first] else 0.0)
    return FailureOutcomes(
        pages=tuple(pages),
        a=np.asarray(a, dtype=np.int64),
        b=np.asarray(b, dtype=np.int64),
        p=np.asarray(p, dtype=np.float64),
    )
