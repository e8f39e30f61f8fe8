"""The disagreement lens (docs/protocol.md "The disagreement lens"): researcher page and REST endpoint."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from calibration.api.lens import DisagreementApi
from calibration.views.lens import disagreement_page

app_name = "lens"

urlpatterns: list[URLPattern | URLResolver] = [
    path("studies/<slug:slug>/disagreement/", disagreement_page, name="page"),
    path("api/studies/<slug:slug>/disagreement/", DisagreementApi.as_view(), name="api"),
]
