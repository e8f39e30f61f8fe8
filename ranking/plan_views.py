"""The planner page (docs/protocol.md "Planning a study's size"): researchers only.

``/plan/`` takes the ``plan_study`` command's inputs (stated assumptions, or one of the
researcher's studies as pilot; ``/studies/<slug>/plan/`` pre-fills that study) and queues the plan
on the task queue (``ranking.tasks.study_plan_start``); the run's page polls its own status
fragment with htmx (``hx-trigger="every 2s"``, no inline script) until the table, the figure (the
command's SVG, served as an image) and the JSON / CSV downloads are ready. Another researcher's run
is a 404. Nothing of a pilot study is written.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotation.errors import ArbiterError
from annotation.roles import studies_for
from annotation.selectors.studies import study_get_for_user
from annotation.views.studies import researcher_required
from ranking.models import StudyPlanRun
from ranking.planning import PLAN_PARAMETERS, study_plan_runs_for
from ranking.tasks import study_plan_start
from stats.defaults import PLAN_KINDS

TARGET_LABELS = {
    "top_k": "Top-k identified",
    "adjacent": "Adjacent systems separated",
    "kappa": "Fleiss κ half-width",
    "alpha": "Krippendorff α half-width",
    "brier": "Calibrated judge's Brier half-width",
}


def plan_source(post: Any) -> str:
    """``pilot`` when a pilot study is picked (whatever else the form says), else ``stated``."""
    return "pilot" if post.get("pilot") else post.get("source") or "stated"


def plan_form_values(post: Any) -> dict[str, Any]:
    """The form's fields as plan inputs: a pilot study, or the stated assumptions, never both.

    The study picked as pilot is the one planned from: the form's one "Assumptions from" menu
    offers the stated assumptions or a pilot, and an older form's ``source=stated`` beside a
    picked pilot no longer drops it.
    """
    values = {name: post.get(name, "") for name in PLAN_PARAMETERS if name in post}
    if plan_source(post) == "pilot":
        values.pop("systems", None)
    else:
        values.pop("pilot", None)
    return values


@researcher_required
@require_http_methods(["GET", "POST"])
def plan_page(request: HttpRequest, slug: str | None = None) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug) if slug else None
    pilots = studies_for(request.user)
    error = ""
    form: dict[str, Any] = {k: ("" if v is None else v) for k, v in PLAN_PARAMETERS.items()}
    form["source"] = "pilot" if study else "stated"
    form["pilot"] = study.slug if study else ""
    if request.method == "POST":
        form.update({k: v for k, v in request.POST.items() if k in form})
        form["source"] = plan_source(request.POST)
        try:
            run = study_plan_start(values=plan_form_values(request.POST), pilots=pilots, user=request.user)
        except ArbiterError as exc:
            error = str(exc)
        else:
            return redirect("ranking:plan-detail", pk=run.pk)
    context = {
        "study": study,
        "form": form,
        "error": error,
        "pilots": pilots.order_by("slug"),
        "targets": [(kind, TARGET_LABELS[kind]) for kind in PLAN_KINDS],
        "runs": study_plan_runs_for(request.user)[:20],
    }
    return render(request, "ranking/plan.html", context, status=400 if error else 200)


def _run(request: HttpRequest, pk: int) -> StudyPlanRun:
    run = study_plan_runs_for(request.user).filter(pk=pk).first()
    if run is None:
        raise Http404("no such plan")
    return run


def _run_context(run: StudyPlanRun) -> dict[str, Any]:
    result = run.result or {}
    return {
        "run": run,
        "target_label": TARGET_LABELS.get(run.parameters.get("target", ""), ""),
        "result": result,
        # The curve is a probability for ranking targets and for κ / α planned with an assurance.
        "is_ranking": result.get("target", {}).get("kind") in ("top_k", "adjacent")
        or (result.get("target", {}).get("kind") in ("kappa", "alpha") and result.get("target", {}).get("assurance")),
    }


@researcher_required
@require_GET
def plan_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "ranking/plan_detail.html", _run_context(_run(request, pk)))


@researcher_required
@require_GET
def plan_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's status and, once done, its result (polled by htmx while it runs)."""
    response = render(request, "ranking/plan_detail.html#plan-run", _run_context(_run(request, pk)))
    response["Cache-Control"] = "no-store"
    return response


@researcher_required
@require_GET
def plan_download(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    run = _run(request, pk)
    if run.status != StudyPlanRun.Status.DONE:
        raise Http404("the plan has not finished")
    if fmt == "json":
        response = HttpResponse(json.dumps(run.result, indent=2) + "\n", content_type="application/json")
    elif fmt == "csv":
        response = HttpResponse(run.csv, content_type="text/csv; charset=utf-8")
    elif fmt == "svg":
        return HttpResponse(run.svg, content_type="image/svg+xml")  # shown inline as the page's figure
    else:
        raise Http404("unknown format")
    response["Content-Disposition"] = f'attachment; filename="plan-{run.pk}.{fmt}"'
    return response
