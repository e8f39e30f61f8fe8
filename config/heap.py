"""A web worker's start-up heap, loaded whole and then frozen out of the garbage collector.

A worker's heap after start-up holds objects that live as long as the process (Django, the URL
configuration with every view module it imports — numpy, scipy, statsmodels, pandas, matplotlib
for the reports — and the compiled templates). CPython's full collections traverse all of them,
besides the generation-1 collections that promote the requests in flight. ``gc.freeze()``
moves them to a permanent generation that no collection traverses; collections then only see
what requests allocate. The measurement it rests on: docs/decisions/0031-rater-hot-path.md and
docs/benchmarks-history.md, "The garbage collector".

Called by gunicorn once per worker, after the application is loaded (``post_worker_init`` in
``gunicorn.conf.py``). The setting ``ARBITER_GC_FREEZE`` (environment, default on) turns it off.
"""

from __future__ import annotations

import gc

# The templates every rater request renders, compiled once at start so they are frozen too (the
# cached loader keeps them; the kinds' question templates are included by the trial state).
RATER_TEMPLATES = (
    "annotation/rater/trial_base.html",
    "annotation/rater/_state.html",
    "annotation/rater/_done.html",
    "annotation/rater/_problem.html",
    "annotation/rater/trial_pairwise_reference.html",
    "annotation/rater/trial_pairwise.html",
    "annotation/rater/trial_checklist.html",
    "annotation/rater/trial_rating.html",
)


def load_and_freeze() -> int:
    """Import what the first requests would import, then freeze the heap; the objects frozen (0: off)."""
    from django.conf import settings

    if not settings.ARBITER_GC_FREEZE:
        return 0
    from django.template.loader import get_template
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (imports every view module)
    for name in RATER_TEMPLATES:
        get_template(name)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
