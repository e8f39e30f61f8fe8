"""The researcher's judge-subset ablation page (issue 16 part 1): GET shows the form, POST computes
the report (synchronously, bootstrap capped) and shows it; ``?download=json|html`` with the same
parameters returns it as a file. Same service as the ``judge_ablation`` command."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from annotation.errors import ArbiterError, ValidationFailed
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required
from calibration.services.ablation import judge_ablation_report
from stats.defaults import ABLATION_SEED

PAGE_RESAMPLES = 1000
MAX_PAGE_RESAMPLES = 20_000


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
    if request.method == "GET" and download not in ("json", "html"):
        return render(request, "calibration/judge_ablation_page.html", context)
    try:
        if (
            str(context["bootstrap"]).strip().isdigit()
            and int(str(context["bootstrap"])) > MAX_PAGE_RESAMPLES
        ):
            raise ValidationFailed(
                f"at most {MAX_PAGE_RESAMPLES} resamples on the page (use the judge_ablation command)",
                field="bootstrap",
            )
        report = judge_ablation_report(study=study, resamples=context["bootstrap"], seed=context["seed"])
    except ArbiterError as exc:
        context["error"] = str(exc)
        return render(request, "calibration/judge_ablation_page.html", context, status=exc.status_code)
    if download == "json":
        response = HttpResponse(
            json.dumps(report, indent=2, allow_nan=False, ensure_ascii=False) + "\n",
            content_type="application/json",
        )
    elif download == "html":
        body = ablation_html(report, title=f"Judge-subset ablation · {study.title}")
        response = HttpResponse(body, content_type="text/html; charset=utf-8")
    else:
        return render(
            request, "calibration/judge_ablation_page.html", {**context, **ablation_context(report)}
        )
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-judge-ablation.{download}"'
    return response
