"""Researcher page for the agreement report (docs/protocol.md "Human reference and agreement") and its
self-contained HTML download.

Computed on request from the stored votes (voided assignments excluded) with a smaller default
bootstrap than the command; ``?bootstrap=&seed=`` change it. The page answers at once; its numbers
come on an htmx request of their own, and each figure on another (``calibration.views.figures``).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotation.errors import ArbiterError
from annotation.models import Study
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required
from calibration.reports import AGREEMENT_FIGURES, agreement_context
from calibration.services.agreement import (
    PAGE_RESAMPLES,
    agreement_report_compute,
    agreement_report_html,
    check_bootstrap_options,
)
from calibration.services.report_figures import agreement_figures_prepare

MAX_PAGE_RESAMPLES = 10_000


def _options(request: HttpRequest, study: Study) -> tuple[int, int]:
    return check_bootstrap_options(
        request.GET.get("bootstrap") or PAGE_RESAMPLES,
        request.GET.get("seed") or study.seed,
        max_resamples=MAX_PAGE_RESAMPLES,
    )


@researcher_required
@require_GET
def agreement_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The page answers at once with its form and "Computing the agreement…"; the numbers come on
    the page's own htmx request (``?part=body``), which computes them. The first one in a worker
    also pays the statistics' imports (about a second), so the page never waits for them."""
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        resamples, seed = _options(request, study)
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    query = urlencode({"bootstrap": resamples, "seed": seed})
    if request.GET.get("part") != "body":
        return render(request, "calibration/agreement_page.html", {
            "study": study, "resamples": resamples, "seed": seed, "query": query,
            "max_bootstrap": MAX_PAGE_RESAMPLES,
        })
    try:
        agreement = agreement_report_compute(study=study, resamples=resamples, seed=seed)
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    key = agreement_figures_prepare(agreement=agreement)
    figures = {
        name: reverse("agreement:figure", args=[study.slug, key, name]) + "?" + query
        for name in AGREEMENT_FIGURES
    }
    context = agreement_context(study=study, report=agreement.report, figures=figures)
    return render(request, "calibration/agreement_body.html", context)


@researcher_required
@require_GET
def agreement_download_html(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        resamples, seed = _options(request, study)
        agreement = agreement_report_compute(study=study, resamples=resamples, seed=seed)
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    response = HttpResponse(agreement_report_html(agreement), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-agreement.html"'
    return response
