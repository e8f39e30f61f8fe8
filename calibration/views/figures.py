"""The agreement and calibration pages' figures, each an SVG on a request of its own.

The pages render their numbers at once and point each ``<img>`` here, so the browser shows the
page while the figures are drawn (``calibration.services.report_figures``; the kind-report page's
figures are served the same way by ``kind_reports.views``).
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.decorators.http import require_GET

from annotation.errors import ArbiterError, NotFound
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required
from calibration.selectors.coefficients import calibration_report_get
from calibration.services.agreement import PAGE_RESAMPLES, check_bootstrap_options
from calibration.services.report_figures import agreement_figure_svg, calibration_figure_svg
from calibration.views.agreement import MAX_PAGE_RESAMPLES


def svg_response(svg: bytes) -> HttpResponse:
    response = HttpResponse(svg, content_type="image/svg+xml")
    # The URL names the content the figure was drawn from (a report's hash or a stored report's id).
    response["Cache-Control"] = "private, max-age=86400"
    return response


@researcher_required
@require_GET
def agreement_figure(request: HttpRequest, slug: str, key: str, name: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        resamples, seed = check_bootstrap_options(
            request.GET.get("bootstrap") or PAGE_RESAMPLES,
            request.GET.get("seed") or study.seed,
            max_resamples=MAX_PAGE_RESAMPLES,
        )
        svg = agreement_figure_svg(study=study, key=key, name=name, resamples=resamples, seed=seed)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    except ArbiterError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    return svg_response(svg)


@researcher_required
@require_GET
def calibration_figure(request: HttpRequest, slug: str, report_id: int, name: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        stored = calibration_report_get(study=study, report_id=report_id)
        svg = calibration_figure_svg(study=study, stored=stored, name=name)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return svg_response(svg)
