"""REST endpoint for the agreement report (docs/protocol.md "Human reference and agreement", "Report keys"):
the same JSON as the command writes."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from calibration.services.agreement import (
    DEFAULT_RESAMPLES,
    agreement_report_for_study,
    check_bootstrap_options,
)

MAX_API_RESAMPLES = 10_000


class AgreementReportApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "bootstrap",
                int,
                description=f"resamples (default {DEFAULT_RESAMPLES}, at most {MAX_API_RESAMPLES})",
            ),
            OpenApiParameter("seed", int, description="bootstrap seed (default: the study's seed)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
        summary='Agreement report (docs/protocol.md "Report keys"), computed now from the stored votes',
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        resamples, seed = check_bootstrap_options(
            request.query_params.get("bootstrap") or DEFAULT_RESAMPLES,
            request.query_params.get("seed") or study.seed,
            max_resamples=MAX_API_RESAMPLES,
        )
        return Response(agreement_report_for_study(study=study, resamples=resamples, seed=seed))
