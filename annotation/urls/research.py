"""Researcher pages and the schedule API for the human study
(docs/protocol.md "Who does what", "Planning the human study")."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from annotation.api import schedule as api
from annotation.views import research as views

app_name = "research"

urlpatterns: list[URLPattern | URLResolver] = [
    path("research/studies/<slug:slug>/raters/", views.study_raters, name="study"),
    path("research/studies/<slug:slug>/raters/quality/", views.quality, name="quality"),
    path("research/studies/<slug:slug>/schedule/", views.schedule, name="schedule"),
    path("research/studies/<slug:slug>/settings/", views.crowd_settings, name="settings"),
    path("research/studies/<slug:slug>/raters/new/", views.rater_create, name="rater-create"),
    path("research/studies/<slug:slug>/participants.csv", views.participants_csv, name="participants-csv"),
    path("research/studies/<slug:slug>/schedule.csv", views.schedule_csv, name="schedule-csv"),
    path("research/studies/<slug:slug>/blocks/<int:position>/", views.block_detail, name="block"),
    path("research/studies/<slug:slug>/blocks/<int:position>/assign/", views.assign, name="assign"),
    path("research/assignments/<int:pk>/void/", views.void, name="void"),
    path("research/assignments/<int:pk>/reopen/", views.reopen, name="reopen"),
    path("api/studies/<slug:slug>/schedule/", api.ScheduleApi.as_view(), name="api-schedule"),
    path("api/studies/<slug:slug>/schedule/export/", api.ScheduleExportApi.as_view(), name="api-schedule-export"),
    path("api/studies/<slug:slug>/progress/", api.ProgressApi.as_view(), name="api-progress"),
    path("api/assignments/<int:pk>/void/", api.AssignmentVoidApi.as_view(), name="api-void"),
    path("api/assignments/<int:pk>/reopen/", api.SlotReopenApi.as_view(), name="api-reopen"),
]
