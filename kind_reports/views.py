"""Researcher page of ``kind_report`` (other study kinds (docs/study-kinds.md "The kind report")) and its JSON
and HTML downloads.

Computed on request from the stored votes with a moderate default bootstrap (``PAGE_RESAMPLES``);
``?bootstrap=&seed=&systems=`` change it. The downloads take the same query, so they carry exactly
the numbers on screen. A study without votes shows an empty state that says what to do next. The
figures are drawn on requests of their own (``kind_report_figure``), so the numbers show at once.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.errors import ArbiterError
from annotation.models import Study
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required
from calibration.services.agreement import check_bootstrap_options
from calibration.services.exclusion_rules import exclusion_rules_form_values, exclusion_rules_update
from calibration.services.report_figures import report_content_key, report_figure_svg, report_figures_keep
from calibration.views.figures import svg_response
from kind_reports.kinds import registered
from kind_reports.rendering import KIND_FIGURES, kind_context, kind_figure
from kind_reports.selectors import system_ids as study_system_ids
from kind_reports.services import (
    PAGE_RESAMPLES,
    KindReport,
    NoKindVotes,
    kind_report_compute,
    kind_report_html,
)

MAX_PAGE_RESAMPLES = 10_000


def _form(request: HttpRequest, study: Study) -> dict[str, str]:
    return {
        "bootstrap": request.GET.get("bootstrap") or str(PAGE_RESAMPLES),
        "seed": request.GET.get("seed") or str(study.seed),
        "systems": request.GET.get("systems", "").strip(),
    }


def _compute(study: Study, form: dict[str, str]) -> KindReport:
    resamples, seed = check_bootstrap_options(
        form["bootstrap"], form["seed"], max_resamples=MAX_PAGE_RESAMPLES
    )
    return kind_report_compute(study=study, resamples=resamples, seed=seed, systems=form["systems"] or None)


@researcher_required
@require_GET
def kind_report_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    form = _form(request, study)
    spec = registered(study)
    system_ids = study_system_ids(study=study)
    context: dict[str, object] = {
        "study": study,
        "form": form,
        "max_bootstrap": MAX_PAGE_RESAMPLES,
        "system_ids": system_ids,
        "default_systems": ",".join(system_ids[:2]),
        "query": urlencode({k: v for k, v in form.items() if v}),
        "compares_systems": spec is not None and spec.compares_systems,
        # A kind without a docs/study-kinds.md "The kind report" report (the reference kind) sets its rules on
        # the rater-quality page.
        "rule_settings": exclusion_rules_form_values(study) if spec is not None else [],
    }
    status = 200
    try:
        computed = _compute(study, form)
    except NoKindVotes as exc:
        context["empty"] = str(exc)
    except ArbiterError as exc:
        context["error"] = str(exc)
        status = exc.status_code
    else:
        # The figures are drawn on requests of their own (calibration.services.report_figures).
        key = report_content_key(computed.report)
        report_figures_keep(kind="kind-report", study=study, key=key, inputs={"report": computed.report})
        figures = {
            name: reverse("kind_report:figure", args=[study.slug, key, name]) + "?" + str(context["query"])
            for name in KIND_FIGURES
        }
        context.update(kind_context(study=study, report=computed.report, figures=figures))
    return render(request, "kind_reports/kind_page.html", context, status=status)


@researcher_required
@require_GET
def kind_report_figure(request: HttpRequest, slug: str, key: str, name: str) -> HttpResponse:
    """One figure of the page's report, as an SVG (the page shows its numbers first)."""
    study = study_get_for_user(user=request.user, slug=slug)
    if name not in KIND_FIGURES:
        raise Http404("no such figure")
    form = _form(request, study)

    def recompute() -> tuple[str, dict[str, object]]:
        report = _compute(study, form).report
        return report_content_key(report), {"report": report}

    try:
        svg = report_figure_svg(
            kind="kind-report", study=study, key=key, name=name,
            draw=lambda inputs: kind_figure(name, inputs["report"]), recompute=recompute,
        )
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    return svg_response(svg)


@researcher_required
@require_GET
def kind_report_download_json(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        computed = _compute(study, _form(request, study))
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    body = json.dumps(computed.report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-kind-report.json"'
    return response


@researcher_required
@require_GET
def kind_report_download_html(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        computed = _compute(study, _form(request, study))
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    response = HttpResponse(kind_report_html(computed), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-kind-report.html"'
    return response


@researcher_required
@require_POST
def exclusion_rules(request: HttpRequest, slug: str) -> HttpResponse:
    """Save the study's exclusion-rule settings (empty field = rule off); the report uses them."""
    study = study_get_for_user(user=request.user, slug=slug)
    names = [row["name"] for row in exclusion_rules_form_values(study)]
    # The rater-quality page of a reference study posts only its rules (next=quality); the
    # settings it leaves out take their defaults, as stored settings always do.
    from_quality = request.POST.get("next") == "quality"
    values = {n: request.POST.get(n, "") for n in names if not from_quality or n in request.POST}
    try:
        exclusion_rules_update(study=study, values=values, actor=request.user)
    except ArbiterError as exc:
        messages.error(request, f"Exclusion rules not saved: {exc}")
    else:
        messages.success(
            request,
            "Exclusion rules saved."
            if from_quality
            else "Exclusion rules saved; the report below applies them.",
        )
    if from_quality:
        return redirect(reverse("research:quality", args=[study.slug]))
    return redirect(reverse("kind_report:page", args=[study.slug]))
