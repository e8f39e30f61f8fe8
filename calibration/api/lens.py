"""REST endpoint of the disagreement lens (docs/protocol.md "The disagreement lens"): the same JSON as
``judge_disagreement`` writes; ``pair``, ``condition``, ``page`` and ``page_size`` narrow its
drill-down."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from annotation.errors import ValidationFailed
from calibration.services.lens import CONDITIONS, disagreement_report, drilldown_select


class DisagreementApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        parameters=[
            OpenApiParameter("judge", str, required=True, description="the judge's name"),
            OpenApiParameter(
                "pair", str, description='drill-down: one pair of systems, "a | b" (ids sorted)'
            ),
            OpenApiParameter("condition", str, description="drill-down: " + ", ".join(CONDITIONS)),
            OpenApiParameter("page", int, description="drill-down page (with page_size; default: every row)"),
            OpenApiParameter("page_size", int, description="drill-down rows per page"),
        ],
        responses={200: OpenApiTypes.OBJECT},
        summary='The disagreement lens of a judge (docs/protocol.md "The disagreement lens")',
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        judge = (request.query_params.get("judge") or "").strip()
        if not judge:
            raise ValidationFailed("name the judge: ?judge=NAME", field="judge")
        report = disagreement_report(study=study, judge=judge)
        params = request.query_params
        if any(params.get(k) for k in ("pair", "condition", "page", "page_size")):
            chosen = drilldown_select(
                report,
                pair=params.get("pair", ""),
                condition=params.get("condition", ""),
                page=params.get("page") or 1,
                page_size=params.get("page_size") or len(report["drilldown"]) or 1,
            )
            report["drilldown"] = chosen.rows
            report["drilldown_page"] = {
                "total": chosen.total,
                "page": chosen.page,
                "pages": chosen.pages,
                "page_size": chosen.page_size,
                "pair": chosen.pair,
                "condition": chosen.condition,
            }
        return Response(report)
