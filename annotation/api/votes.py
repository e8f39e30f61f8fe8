"""REST endpoints for the human votes CSV (docs/protocol.md "Files"): import (multipart) and export (CSV
download).

Researchers only, scoped by ``annotation.roles.studies_for``: another study's slug is a 404.
Both call the same services as the ``import_votes`` / ``export_votes`` commands.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from annotation.errors import ValidationFailed
from annotation.models import Study
from annotation.services.votes_csv import gold_export_csv, votes_export_csv, votes_import_csv


class CSVRenderer(BaseRenderer):
    """Lets clients ask for ``text/csv``; errors (a dict) come out as their one-line message."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if isinstance(data, dict):
            data = data.get("detail", data)
        return str(data).encode(self.charset)


def _safe_name(name: str) -> str:
    """The uploaded file's base name, reduced to safe characters, for error messages."""
    base = Path(name or "votes.csv").name
    return re.sub(r"[^A-Za-z0-9._-]+", "_", base)[:100] or "votes.csv"


class VotesImportApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]
    parser_classes = [MultiPartParser]

    class VotesImportInput(serializers.Serializer):
        file = serializers.FileField(help_text='A human votes CSV (docs/protocol.md "Files").')

    class VotesImportOutput(serializers.Serializer):
        rows = serializers.IntegerField()
        main_votes = serializers.IntegerField()
        repeat_votes = serializers.IntegerField()
        blocks_created = serializers.IntegerField()
        block_items_created = serializers.IntegerField()
        raters_created = serializers.IntegerField()
        assignments_created = serializers.IntegerField()
        assignments_reused = serializers.IntegerField()
        trials_created = serializers.IntegerField()
        trials_answered = serializers.IntegerField()

    @extend_schema(
        request={"multipart/form-data": VotesImportInput},
        responses={
            201: VotesImportOutput,
            400: OpenApiResponse(description="one-line reason (file, line, field)"),
        },
        summary="Import a human votes CSV (all rows or nothing)",
    )
    def post(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationFailed("upload the votes CSV in the 'file' form field")
        with tempfile.TemporaryDirectory(prefix="arbiter-votes-") as tmp:
            path = Path(tmp) / _safe_name(upload.name or "")
            with path.open("wb") as fh:
                for chunk in upload.chunks():
                    fh.write(chunk)
            result = votes_import_csv(study=study, path=path, user=request.user)
        return Response(self.VotesImportOutput(result.as_dict()).data, status=status.HTTP_201_CREATED)


class VotesExportApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]
    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(
        responses={(200, "text/csv"): OpenApiTypes.STR},
        summary="Download the study's human votes CSV (voided assignments left out)",
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        return _csv_download(study_for_request(request, slug), votes_export_csv, "votes")


class GoldExportApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]
    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(
        responses={(200, "text/csv"): OpenApiTypes.STR},
        summary="Download the study's gold answers CSV (rater, expected, given, correct; voided assignments left out)",
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        return _csv_download(study_for_request(request, slug), gold_export_csv, "gold")


def _csv_download(study: Study, export: Callable[..., int], name: str) -> HttpResponse:
    with tempfile.TemporaryDirectory(prefix="arbiter-votes-") as tmp:
        path = Path(tmp) / f"{name}.csv"
        export(study=study, path=path)
        body = path.read_bytes()
    response = HttpResponse(body, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{name}.csv"'
    return response
