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

The view modules import the report maths (the ``stats`` package: SciPy's ``stats``, statsmodels)
only when a report runs, so without this the first report page a worker served, or the first plan
form it checked, paid those imports: 0.6 s on a quiet machine, 1.2 s for the planner's, several
seconds on a busy one (issue 40, "Work you can see"). They are loaded here, before the freeze:
about 90-140 MB more per worker at start, which a worker reaches anyway once it shows a report.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil

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


def _import_report_maths() -> None:
    """Import every module of the ``stats`` package (a function of its own: its walk is freed before the freeze)."""
    import stats

    for module in pkgutil.walk_packages(stats.__path__, "stats."):
        importlib.import_module(module.name)


def load_and_freeze() -> int:
    """Import what the first requests would import, then freeze the heap; the objects frozen (0: off)."""
    from django.conf import settings

    if not settings.ARBITER_GC_FREEZE:
        return 0
    from django.template.loader import get_template
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (imports every view module)
    _import_report_maths()
    for name in RATER_TEMPLATES:
        get_template(name)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
