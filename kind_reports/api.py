"""REST endpoint of ``kind_report`` (other study kinds (docs/study-kinds.md "The kind report")): the same JSON
as the command writes."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from annotation.errors import ValidationFailed
from calibration.services.agreement import check_bootstrap_options
from calibration.services.exclusion_rules import exclusion_rules_update, hygiene_rules
from kind_reports.services import (
    DEFAULT_RESAMPLES,
    kind_report_build,
)

MAX_API_RESAMPLES = 10_000


class KindReportApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "bootstrap",
                int,
                description=f"resamples (default {DEFAULT_RESAMPLES}, at most {MAX_API_RESAMPLES})",
            ),
            OpenApiParameter("seed", int, description="bootstrap seed (default: the study's seed)"),
            OpenApiParameter(
                "systems", str, description="rating studies: the two system ids compared, e.g. alpha,beta"
            ),
        ],
        responses={200: OpenApiTypes.OBJECT},
        summary='Kind report of a pairwise, checklist or rating study (docs/study-kinds.md "The kind report"), computed now from the stored votes',
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        resamples, seed = check_bootstrap_options(
            request.query_params.get("bootstrap") or DEFAULT_RESAMPLES,
            request.query_params.get("seed") or study.seed,
            max_resamples=MAX_API_RESAMPLES,
        )
        systems = request.query_params.get("systems") or None
        return Response(kind_report_build(study=study, resamples=resamples, seed=seed, systems=systems))


class RuleScoreApi(APIView):
    """AesCode's rule score of a study (docs/protocol.md "AesCode's rule score"): the JSON
    ``manage.py rule_score --json`` writes."""

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
        summary="Rule and its channels per system with brief-bootstrap intervals, and every output's result",
    )
    def get(self, request: Request, slug: str) -> Response:
        from kind_reports.rule import rule_score_report

        study = study_for_request(request, slug)
        resamples, seed = check_bootstrap_options(
            request.query_params.get("bootstrap") or DEFAULT_RESAMPLES,
            request.query_params.get("seed") or study.seed,
            max_resamples=MAX_API_RESAMPLES,
        )
        return Response(rule_score_report(study=study, resamples=resamples, seed=seed))


class ExclusionRulesApi(APIView):
    """A study's exclusion-rule settings (docs/study-kinds.md "The kind report" hygiene): read, or replace
    them whole."""

    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, summary="The effective exclusion-rule settings")
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        return Response(asdict(hygiene_rules(study)))

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        summary="Replace the exclusion-rule settings ({setting: number or null}; left out = default)",
    )
    def put(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        if not isinstance(request.data, dict):
            raise ValidationFailed("expected a JSON object of exclusion-rule settings", where="body")
        rules = exclusion_rules_update(study=study, values=request.data, actor=request.user)
        return Response(asdict(rules))
