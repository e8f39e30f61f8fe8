"""Researcher page: run judges on a study and watch their progress (htmx polling)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.errors import ArbiterError
from annotation.kinds import design_of
from annotation.selectors.studies import study_get_for_user
from judges.models import Judge
from judges.selectors import judge_progress, judges_callable
from judges.services.runs import judge_outputs_run_in_background, judge_run_start, tasks_run_eagerly


@login_required
@vary_on_headers("HX-Request")
def study_judges(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    progress = judge_progress(study=study)
    context = {
        "study": study,
        "progress": progress,
        "running": any(p.pending for p in progress),
        "judges": judges_callable(),
        # What one call is about, for the cost per unit: a comparison, or one rendering.
        "unit_label": "rendering" if design_of(study).judge_plan(study).unit == "candidate" else "comparison",
    }
    template = "judges/study_judges.html"
    if getattr(request, "htmx", False):
        template += "#progress"
    return render(request, template, context)


@login_required
@require_POST
def study_judges_run(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    judge_pk = request.POST.get("judge", "")
    judge = get_object_or_404(Judge, pk=int(judge_pk) if judge_pk.isdigit() else 0)
    # No broker (the embedded default, make run): the calls run in a thread of this process after
    # the response, so the page shows their progress instead of answering when all are done.
    in_background = tasks_run_eagerly() and settings.ARBITER_JUDGES_IN_BACKGROUND
    try:
        repeats = int(request.POST.get("repeats") or 1)
        plan = judge_run_start(
            study=study,
            judge=judge,
            set=request.POST.get("set") or None,
            orders=request.POST.getlist("orders") or ["primary", "swapped"],
            repeats=repeats,
            retry_failed=bool(request.POST.get("retry_failed")),
            user=request.user,
            dispatch=not in_background,
        )
    except (ArbiterError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect("judges:study", slug=study.slug)
    if in_background and plan.output_ids:
        transaction.on_commit(lambda: judge_outputs_run_in_background(output_ids=plan.output_ids))
    messages.success(
        request, f"{judge.name}: {len(plan.output_ids)} calls queued ({plan.done} already done, {plan.created} new)."
    )
    return redirect("judges:study", slug=study.slug)
