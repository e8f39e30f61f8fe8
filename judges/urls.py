"""Judges: the researcher page and its REST endpoints."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from judges import api, views

app_name = "judges"

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<slug:slug>/judges/", views.study_judges, name="study"),
    path("studies/<slug:slug>/judges/run/", views.study_judges_run, name="run"),
    path("api/judges/", api.JudgeListApi.as_view(), name="api-list"),
    path("api/studies/<slug:slug>/judge-runs/", api.StudyJudgeRunsApi.as_view(), name="api-runs"),
]
