"""The researcher's judge-subset ablation page (issue 16 part 1): GET shows the form; POST checks the
parameters and answers at once with a "Computing the ablation…" indicator whose htmx request
(``?part=result``, ``hx-trigger="load"``) computes the report (bootstrap capped) on a request of its
own and swaps it in, as the report figures are drawn on requests of their own
(``calibration/services/report_figures.py``): the nested ablation of the demo takes 1.2 s on a quiet
machine (issue 40, "Work you can see"). ``?download=json|html`` with the same parameters returns it
as a file. Same service as the ``judge_ablation`` command."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_http_methods

from annotation.errors import ArbiterError, ValidationFailed
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required
from calibration.services.ablation import judge_ablation_report
from calibration.services.agreement import check_bootstrap_options
from stats.defaults import ABLATION_SEED

PAGE_RESAMPLES = 1000
MAX_PAGE_RESAMPLES = 20_000


def _check_page_options(bootstrap: Any, seed: Any) -> tuple[int, int]:
    """The page's resamples (at most ``MAX_PAGE_RESAMPLES``) and seed, or a one-line ``ValidationFailed``."""
    if str(bootstrap).strip().isdigit() and int(str(bootstrap)) > MAX_PAGE_RESAMPLES:
        raise ValidationFailed(
            f"at most {MAX_PAGE_RESAMPLES} resamples on the page (use the judge_ablation command)",
            field="bootstrap",
        )
    return check_bootstrap_options(bootstrap, seed, max_resamples=MAX_PAGE_RESAMPLES)


@researcher_required
@require_http_methods(["GET", "POST"])
def judge_ablation_page(request: HttpRequest, slug: str) -> HttpResponse:
    from calibration.ablation_plots import ablation_context, ablation_html

    study = study_get_for_user(user=request.user, slug=slug)
    params = request.POST if request.method == "POST" else request.GET
    context: dict[str, Any] = {
        "study": study,
        "bootstrap": params.get("bootstrap") or PAGE_RESAMPLES,
        "seed": params.get("seed") or ABLATION_SEED,
        "max_resamples": MAX_PAGE_RESAMPLES,
        "error": "",
    }
    download = request.GET.get("download")
    part = request.GET.get("part")
    if request.method == "GET" and download not in ("json", "html") and part != "result":
        return render(request, "calibration/judge_ablation_page.html", context)
    template = "calibration/judge_ablation_page.html"
    if part == "result" and getattr(request, "htmx", False):
        template += "#ablation-result"
    try:
        resamples, seed = _check_page_options(context["bootstrap"], context["seed"])
        if request.method == "POST":  # answer at once; the result's own request computes it
            query = urlencode({"bootstrap": resamples, "seed": seed, "part": "result"})
            return render(request, template, {**context, "pending_url": f"?{query}"})
        report = judge_ablation_report(study=study, resamples=resamples, seed=seed)
    except ArbiterError as exc:
        context["error"] = str(exc)
        # htmx swaps no 4xx answer: the fragment carries its error with a 200, replacing the indicator.
        status = 200 if template.endswith("#ablation-result") else exc.status_code
        return render(request, template, context, status=status)
    if download == "json":
        response = HttpResponse(
            json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n",
            content_type="application/json",
        )
    elif download == "html":
        body = ablation_html(report, title=f"Judge-subset ablation · {study.title}")
        response = HttpResponse(body, content_type="text/html; charset=utf-8")
    else:
        response = render(request, template, {**context, **ablation_context(report)})
        patch_vary_headers(response, ("HX-Request",))  # the fragment or the whole page at one URL
        return response
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-judge-ablation.{download}"'
    return response
