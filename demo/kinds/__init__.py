"""The demo kinds: one ``KindDemo`` per study kind, looked up with ``demo_of(kind)`` (``make_demo_study --kind``).

- ``pairwise_reference``: the reference demo of drawn pages (``demo.service``, ``demo.bundle``,
  ``demo.drawing``, ``demo.simulation``);
- ``pairwise``, ``checklist``, ``rating``: the docs/study-kinds.md "Demo studies" poster demos, one module
each (a
  ``PosterKind``: sizes, instructions, items, bundle section, truth, answers), on the shared
  ``plan`` (pure), ``drawing`` (pure), ``simulation`` (pure) and ``service`` (through the services).

A new kind is one module here (and its entry below); the study kind's facts come from
``annotation.kinds.design_of``.
"""

from __future__ import annotations

from demo.kinds import checklist, pairwise, pairwise_reference, rating
from demo.kinds.base import KindDemo, PosterKind
from demo.kinds.service import PosterDemo

POSTER_KINDS: dict[str, PosterKind] = {
    module.KIND.kind: module.KIND for module in (pairwise, checklist, rating)
}
DEMOS: dict[str, KindDemo] = {
    pairwise_reference.DEMO.kind: pairwise_reference.DEMO,
    **{kind: PosterDemo(poster) for kind, poster in POSTER_KINDS.items()},
}


def demo_of(kind: str) -> KindDemo:
    """The demo of a study kind; ``KeyError`` names the known kinds."""
    try:
        return DEMOS[kind]
    except KeyError:
        raise KeyError(f"no demo of study kind {kind!r}; known: {', '.join(DEMOS)}") from None


__all__ = ["DEMOS", "POSTER_KINDS", "KindDemo", "PosterKind", "demo_of"]
