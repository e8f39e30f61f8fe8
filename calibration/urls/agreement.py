"""Agreement report (docs/protocol.md "Human reference and agreement"): researcher page, HTML download and
REST endpoint."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from calibration.api.agreement import AgreementReportApi
from calibration.views.agreement import agreement_download_html, agreement_page
from calibration.views.figures import agreement_figure

app_name = "agreement"

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<slug:slug>/agreement/", agreement_page, name="page"),
    path("studies/<slug:slug>/agreement/report.html", agreement_download_html, name="download-html"),
    path("studies/<slug:slug>/agreement/figures/<slug:key>/<slug:name>.svg", agreement_figure, name="figure"),
    path("api/studies/<slug:slug>/agreement/", AgreementReportApi.as_view(), name="api"),
]
