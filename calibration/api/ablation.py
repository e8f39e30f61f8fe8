"""REST endpoint of the judge-subset ablation (issue 16 part 1): ``GET
/api/studies/<slug>/judge-ablation/?bootstrap=N&seed=N`` computes the report (nothing stored).
Researchers and admins; another study's slug is a 404. Same service as the command."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from annotation.errors import ValidationFailed
from calibration.api.calibration import API_MAX_RESAMPLES, _int_param
from calibration.services.ablation import judge_ablation_report
from stats.defaults import ABLATION_SEED

API_DEFAULT_RESAMPLES = 1000


class JudgeAblationApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "bootstrap", int, description=f"page-block resamples (default {API_DEFAULT_RESAMPLES})"
            ),
            OpenApiParameter("seed", int, description=f"bootstrap seed (default {ABLATION_SEED})"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="one-line reason")},
        summary="Compute the nested judge-subset ablation (paper B.4); nothing is stored",
    )
    def get(self, request: Request, slug: str) -> Response:

        study = study_for_request(request, slug)
        resamples = _int_param(request, "bootstrap", API_DEFAULT_RESAMPLES) or 0
        if resamples > API_MAX_RESAMPLES:
            raise ValidationFailed(
                f"at most {API_MAX_RESAMPLES} resamples per request (use the judge_ablation command)",
                field="bootstrap",
            )
        return Response(
            judge_ablation_report(
                study=study, resamples=resamples, seed=_int_param(request, "seed", ABLATION_SEED) or 0
            )
        )
