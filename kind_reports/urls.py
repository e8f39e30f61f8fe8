"""kind_report (other study kinds (docs/study-kinds.md "The kind report")): researcher page, JSON and HTML
downloads, REST endpoint."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from kind_reports.api import ExclusionRulesApi, KindReportApi, RuleScoreApi
from kind_reports.views import (
    exclusion_rules,
    kind_report_download_html,
    kind_report_download_json,
    kind_report_figure,
    kind_report_page,
)

app_name = "kind_report"

urlpatterns: list[URLPattern | URLResolver] = [
    path("research/studies/<slug:slug>/kind-report/", kind_report_page, name="page"),
    path("research/studies/<slug:slug>/kind-report/rules/", exclusion_rules, name="rules"),
    path(
        "research/studies/<slug:slug>/kind-report/figures/<slug:key>/<slug:name>.svg",
        kind_report_figure,
        name="figure",
    ),
    path("research/studies/<slug:slug>/kind-report.json", kind_report_download_json, name="download-json"),
    path("research/studies/<slug:slug>/kind-report.html", kind_report_download_html, name="download-html"),
    path("api/studies/<slug:slug>/kind-report/", KindReportApi.as_view(), name="api"),
    path("api/studies/<slug:slug>/exclusion-rules/", ExclusionRulesApi.as_view(), name="api-rules"),
    path("api/studies/<slug:slug>/rule-score/", RuleScoreApi.as_view(), name="api-rule-score"),
]
