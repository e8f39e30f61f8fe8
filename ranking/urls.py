"""Leaderboards (docs/protocol.md "Deployment leaderboard") and the planner: researcher pages, the published
page and their REST endpoints."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from ranking import api, plan_api, plan_views, views

app_name = "ranking"

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<slug:slug>/deployment-schedule/", views.schedule_page, name="schedule"),
    path("studies/<slug:slug>/leaderboards/", views.leaderboards_page, name="leaderboards"),
    path("studies/<slug:slug>/objective-summary/", views.objective_summary_view, name="objective-summary"),
    path("studies/<slug:slug>/leaderboards/<int:pk>/", views.leaderboard_detail, name="detail"),
    path("studies/<slug:slug>/leaderboards/<int:pk>/row/", views.leaderboard_row, name="row"),
    path(
        "studies/<slug:slug>/leaderboards/<int:pk>/publish/", views.leaderboard_publish_view, name="publish"
    ),
    path(
        "studies/<slug:slug>/leaderboards/<int:pk>/leaderboard.<str:fmt>",
        views.leaderboard_download,
        name="download",
    ),
    path("leaderboard/<str:token>/", views.leaderboard_public, name="public"),
    path(
        "leaderboard/<str:token>/leaderboard.json",
        views.leaderboard_public_download,
        {"fmt": "json"},
        name="public-json",
    ),
    path(
        "leaderboard/<str:token>/leaderboard.csv",
        views.leaderboard_public_download,
        {"fmt": "csv"},
        name="public-csv",
    ),
    path(
        "leaderboard/<str:token>/leaderboard.html",
        views.leaderboard_public_download,
        {"fmt": "html"},
        name="public-html",
    ),
    path("api/studies/<slug:slug>/leaderboards/", api.LeaderboardListApi.as_view(), name="api-list"),
    path(
        "api/studies/<slug:slug>/leaderboards/<int:pk>/",
        api.LeaderboardDetailApi.as_view(),
        name="api-detail",
    ),
    path("api/leaderboards/<str:token>/", api.LeaderboardPublicApi.as_view(), name="api-public"),
    # The planner (docs/protocol.md "Planning a study's size").
    path("plan/", plan_views.plan_page, name="plan"),
    path("studies/<slug:slug>/plan/", plan_views.plan_page, name="plan-study"),
    path("plan/<int:pk>/", plan_views.plan_detail, name="plan-detail"),
    path("plan/<int:pk>/status/", plan_views.plan_status, name="plan-status"),
    path("plan/<int:pk>/plan.<str:fmt>", plan_views.plan_download, name="plan-download"),
    path("api/plans/", plan_api.PlanListApi.as_view(), name="api-plans"),
    path("api/plans/<int:pk>/", plan_api.PlanDetailApi.as_view(), name="api-plan"),
]
