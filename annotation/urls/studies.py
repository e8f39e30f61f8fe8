"""Study pages for researchers and their REST endpoints (docs/protocol.md "Files" bundles)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from annotation.api import studies as api
from annotation.views import objective
from annotation.views import studies as views
from annotation.views.comparison_images import candidate_image, comparison_image

app_name = "studies"

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/import/", views.study_import, name="import"),
    path("studies/new/", views.study_new, name="new"),
    path("studies/new/runs/<str:token>/", views.study_new_run, name="new-run"),
    path("studies/new/runs/<str:token>/create/", views.study_new_run_create, name="new-run-create"),
    path("studies/new/runs/<str:token>/cancel/", views.study_new_run_cancel, name="new-run-cancel"),
    path("studies/<slug:slug>/", views.study_detail, name="detail"),
    path("studies/<slug:slug>/export/", views.study_export, name="export"),
    path(
        "studies/<slug:slug>/comparisons/<int:pk>/<str:slot>.png", comparison_image, name="comparison-image"
    ),
    path("studies/<slug:slug>/candidates/<int:pk>.png", candidate_image, name="candidate-image"),
    path("studies/<slug:slug>/texts/", views.study_texts_update, name="texts"),
    path("studies/<slug:slug>/failure-rule/", views.study_failure_rule_update, name="failure-rule"),
    path("studies/<slug:slug>/objective/", objective.objective_pages, name="objective"),
    path("studies/<slug:slug>/objective/refresh/", objective.objective_refresh, name="objective-refresh"),
    path("studies/<slug:slug>/objective/<int:candidate>/", objective.objective_page, name="objective-page"),
    path(
        "studies/<slug:slug>/objective/<int:candidate>/<str:side>.png", objective.objective_image,
        name="objective-image",
    ),
    path("api/studies/<slug:slug>/objective/", api.ObjectiveScoresApi.as_view(), name="api-objective"),
    path("api/studies/", api.StudyListApi.as_view(), name="api-list"),
    path("api/studies/import/", api.StudyImportApi.as_view(), name="api-import"),
    path("api/studies/new/", api.StudyNewApi.as_view(), name="api-new"),
    path("api/studies/new/runs/<str:token>/", api.NewStudyRunApi.as_view(), name="api-new-run"),
    path("api/studies/<slug:slug>/", api.StudyDetailApi.as_view(), name="api-detail"),
    path("api/studies/<slug:slug>/export/", api.StudyExportApi.as_view(), name="api-export"),
    path("api/studies/<slug:slug>/systems/", api.SystemListApi.as_view(), name="api-systems"),
    path("api/studies/<slug:slug>/pages/", api.PageListApi.as_view(), name="api-pages"),
    path("api/studies/<slug:slug>/comparisons/", api.ComparisonListApi.as_view(), name="api-comparisons"),
]
