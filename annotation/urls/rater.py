"""Rater-facing URLs: the study link, trials, votes, images, and the rater API.

Only opaque tokens appear in these paths (a study's link token, a trial's token).
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from annotation.rater import api, views
from annotation.rater.images import trial_image_view

app_name = "rater"

urlpatterns: list[URLPattern | URLResolver] = [
    path("s/<str:link_token>/", views.study_link, name="link"),
    path("s/<str:link_token>/instructions/", views.instructions, name="instructions"),
    path("s/<str:link_token>/pause/", views.pause, name="pause"),
    path("s/<str:link_token>/comprehension/", views.comprehension, name="comprehension"),
    path("s/<str:link_token>/break/", views.break_continue, name="break-continue"),
    path("s/<str:link_token>/comment/", views.end_comment, name="end-comment"),
    path("t/<str:trial_token>/vote/", views.trial_vote, name="vote"),
    path("t/<str:trial_token>/undo/", views.trial_undo, name="undo"),
    path("t/<str:trial_token>/revise/", views.trial_revise, name="revise"),
    path("t/<str:trial_token>/problem/", views.trial_problem, name="problem"),
    path("t/<str:trial_token>/<str:slot>.png", trial_image_view, name="image"),
    path("api/rater/<str:link_token>/trial/", api.TrialNextApi.as_view(), name="api-trial"),
    path(
        "api/rater/<str:link_token>/comprehension/",
        api.ComprehensionSubmitApi.as_view(),
        name="api-comprehension",
    ),
    path("api/rater/<str:link_token>/break/", api.BreakContinueApi.as_view(), name="api-break"),
    path("api/rater/trials/<str:trial_token>/vote/", api.VoteSubmitApi.as_view(), name="api-vote"),
    path("api/rater/trials/<str:trial_token>/revise/", api.VoteReviseApi.as_view(), name="api-revise"),
    path("api/rater/trials/<str:trial_token>/problem/", api.TrialProblemApi.as_view(), name="api-problem"),
]
