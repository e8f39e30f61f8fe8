"""The researcher's calibration page (docs/protocol.md "Judges and calibration"): the last report, recompute,
freeze, download.

GET shows the study's latest stored report; when there is none it computes one with a small
bootstrap (``PAGE_RESAMPLES``) and stores it. POST ``action=recompute`` computes a new report with
the chosen bootstrap and seed; POST ``action=freeze`` freezes the coefficients of the report shown
(by id) under a name. Same services as the ``calibrate`` command. The figures are drawn on
requests of their own (``calibration.views.figures``), so the tables show at once.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotation.errors import ArbiterError, ValidationFailed
from annotation.models import Study
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required
from calibration.models import CalibrationReport
from calibration.selectors.coefficients import (
    calibration_report_get,
    calibration_report_latest,
    calibration_report_staleness,
    coefficient_sets_for_study,
)
from calibration.services.calibration import calibration_run, coefficient_set_freeze
from stats.defaults import CALIBRATION_SEED

#: Resamples of the report computed when the page is first opened (fast; recompute for more).
PAGE_RESAMPLES = 200
MAX_PAGE_RESAMPLES = 20_000


def _form_int(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = (request.POST.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationFailed(f"expected an integer, got {raw!r}", field=name) from None
    if not low <= value <= high:
        raise ValidationFailed(f"expected {low}…{high}, got {value}", field=name)
    return value


def _render(
    request: HttpRequest,
    study: Study,
    stored: CalibrationReport | None,
    *,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    from calibration.calibration_plots import CALIBRATION_FIGURES, calibration_context

    context: dict[str, Any] = {
        "study": study,
        "stored": stored,
        "error": error,
        "coefficient_sets": coefficient_sets_for_study(study=study),
        "page_resamples": PAGE_RESAMPLES,
        "default_seed": CALIBRATION_SEED,
    }
    if stored is not None:
        context["staleness"] = calibration_report_staleness(study=study, stored=stored)
        figures = {
            name: reverse("calibration:figure", args=[study.slug, stored.pk, name]) for name in CALIBRATION_FIGURES
        }
        context.update(calibration_context(stored.report, figures=figures))
    return render(request, "calibration/calibration_page.html", context, status=status)


@researcher_required
@require_http_methods(["GET", "POST"])
def calibration_page(request: HttpRequest, slug: str) -> HttpResponse:

    study = study_get_for_user(user=request.user, slug=slug)
    if request.method == "POST":
        return _post(request, study)
    stored = calibration_report_latest(study=study)
    if stored is None:
        try:
            _, stored, _ = calibration_run(
                study=study, resamples=PAGE_RESAMPLES, seed=CALIBRATION_SEED, user=request.user
            )
        except ArbiterError as exc:
            return _render(request, study, None, error=str(exc))
    return _render(request, study, stored)


def _post(request: HttpRequest, study: Study) -> HttpResponse:

    action = request.POST.get("action")
    latest = calibration_report_latest(study=study)
    try:
        if action == "recompute":
            resamples = _form_int(request, "bootstrap", PAGE_RESAMPLES, 1, MAX_PAGE_RESAMPLES)
            seed = _form_int(request, "seed", CALIBRATION_SEED, 0, 2**63 - 1)
            calibration_run(study=study, resamples=resamples, seed=seed, user=request.user)
            messages.success(request, f"Recomputed with {resamples} resamples, seed {seed}.")
        elif action == "freeze":
            report_id = _form_int(request, "report", 0, 1, 2**63 - 1)
            stored = calibration_report_get(study=study, report_id=report_id)
            cs = coefficient_set_freeze(
                study=study, name=request.POST.get("name", ""), report=stored.report, user=request.user
            )
            messages.success(request, f"Frozen as {cs.name!r}.")
        else:
            raise ValidationFailed("unknown action (expected recompute or freeze)", field="action")
    except ArbiterError as exc:
        return _render(request, study, latest, error=str(exc), status=exc.status_code)
    return redirect("calibration:page", slug=study.slug)


@researcher_required
@require_GET
def calibration_download(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    """The latest stored report as self-contained HTML or JSON (without per-comparison predictions)."""
    from calibration.calibration_plots import calibration_html

    study = study_get_for_user(user=request.user, slug=slug)
    stored = calibration_report_latest(study=study)
    if stored is None:
        return redirect("calibration:page", slug=study.slug)
    if fmt == "html":
        body = calibration_html(stored.report, title=f"Calibration · {study.title}")
        response = HttpResponse(body, content_type="text/html; charset=utf-8")
    else:
        body = json.dumps(stored.report, indent=2, allow_nan=False, ensure_ascii=False) + "\n"
        response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-calibration.{fmt}"'
    return response
