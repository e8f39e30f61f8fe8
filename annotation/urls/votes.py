"""Human votes CSV exchange (docs/protocol.md "Files"): REST import and export."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from annotation.api.votes import GoldExportApi, VotesExportApi, VotesImportApi

app_name = "votes"

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/studies/<slug:slug>/votes/import/", VotesImportApi.as_view(), name="api-import"),
    path("api/studies/<slug:slug>/votes/export/", VotesExportApi.as_view(), name="api-export"),
    path("api/studies/<slug:slug>/votes/gold/", GoldExportApi.as_view(), name="api-gold-export"),
]
