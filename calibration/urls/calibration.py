"""Calibration (docs/protocol.md "Judges and calibration"): the researcher page, its downloads, and the REST
endpoints."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from calibration.api.ablation import JudgeAblationApi
from calibration.api.calibration import CalibrationReportApi, CoefficientSetDetailApi, CoefficientSetListApi
from calibration.views.ablation import judge_ablation_page
from calibration.views.calibration import calibration_download, calibration_page
from calibration.views.figures import calibration_figure

app_name = "calibration"

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<slug:slug>/calibration/", calibration_page, name="page"),
    path(
        "studies/<slug:slug>/calibration/report.html",
        calibration_download,
        {"fmt": "html"},
        name="download-html",
    ),
    path(
        "studies/<slug:slug>/calibration/report.json",
        calibration_download,
        {"fmt": "json"},
        name="download-json",
    ),
    path(
        "studies/<slug:slug>/calibration/figures/<int:report_id>/<slug:name>.svg",
        calibration_figure,
        name="figure",
    ),
    path("studies/<slug:slug>/judge-ablation/", judge_ablation_page, name="ablation"),
    path("api/studies/<slug:slug>/calibration/", CalibrationReportApi.as_view(), name="api-report"),
    path("api/studies/<slug:slug>/judge-ablation/", JudgeAblationApi.as_view(), name="api-ablation"),
    path("api/studies/<slug:slug>/coefficients/", CoefficientSetListApi.as_view(), name="api-coefficients"),
    path(
        "api/studies/<slug:slug>/coefficients/<str:name>/",
        CoefficientSetDetailApi.as_view(),
        name="api-coefficient-set",
    ),
]
