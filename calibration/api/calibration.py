"""REST endpoints of the calibration (docs/protocol.md "Judges and calibration"): compute a report, list /
import / read frozen sets.

Researchers and admins only (a rater gets 403), scoped by ``annotation.roles.studies_for``:
another study's slug is a 404. They call the same services as the ``calibrate``,
``import_coefficients`` and ``export_coefficients`` commands.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.parsers import BoundedJSONParser
from annotation.api.permissions import IsResearcher, study_for_request
from annotation.errors import ValidationFailed
from calibration.models import CoefficientSet
from calibration.selectors.coefficients import coefficient_set_get, coefficient_sets_for_study
from calibration.services.calibration import calibration_report_for_study
from calibration.services.coefficients import coefficient_set_document, coefficient_set_import
from stats.defaults import CALIBRATION_SEED

#: Resamples of an API report unless asked (the command's default, 5,000, takes seconds more).
API_DEFAULT_RESAMPLES = 1000
#: A request computes synchronously: cap its bootstrap (the command has no such cap).
API_MAX_RESAMPLES = 20_000


def _int_param(request: Request, name: str, default: int | None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValidationFailed(f"expected an integer, got {raw!r}", field=name) from None


class CoefficientSetSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # the set's origin: fit | import
    coefficients = serializers.DictField(child=serializers.FloatField())
    n_comparisons = serializers.SerializerMethodField()
    data_hash = serializers.CharField()
    frozen_by = serializers.CharField(source="frozen_by_label")
    created_at = serializers.DateTimeField()

    def get_n_comparisons(self, obj: CoefficientSet) -> int:
        return len(obj.comparison_ids or [])


class CalibrationReportApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "bootstrap", int, description=f"page-block resamples (default {API_DEFAULT_RESAMPLES})"
            ),
            OpenApiParameter("seed", int, description=f"bootstrap seed (default {CALIBRATION_SEED})"),
            OpenApiParameter(
                "pilot_size", int, description="committee pilot size (default: the paper's share)"
            ),
            OpenApiParameter(
                "judges", str, description="comma-separated judge names (default: all with outputs)"
            ),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="one-line reason")},
        summary='Compute the calibration report (docs/protocol.md "Judges and calibration"; its keys: docs/protocol.md "Report keys"); nothing is stored',
    )
    def get(self, request: Request, slug: str) -> Response:

        study = study_for_request(request, slug)
        judges_param = request.query_params.get("judges")
        judges = [j.strip() for j in judges_param.split(",") if j.strip()] if judges_param else None
        resamples = _int_param(request, "bootstrap", API_DEFAULT_RESAMPLES) or 0
        if resamples > API_MAX_RESAMPLES:
            raise ValidationFailed(
                f"at most {API_MAX_RESAMPLES} resamples per request (use the calibrate command)",
                field="bootstrap",
            )
        report = calibration_report_for_study(
            study=study,
            resamples=resamples,
            seed=_int_param(request, "seed", CALIBRATION_SEED) or 0,
            pilot_size=_int_param(request, "pilot_size", None),
            judges=judges,
        )
        return Response(report)


class CoefficientSetListApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]
    parser_classes = [BoundedJSONParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "CoefficientSetImportInput"

        name = serializers.CharField(help_text="name of the frozen set")
        coefficients = serializers.DictField(child=serializers.FloatField(), help_text="{judge: beta}")
        provenance = serializers.DictField(required=False, help_text="as written by export_coefficients")

    @extend_schema(
        responses={200: CoefficientSetSummarySerializer(many=True)}, summary="The study's frozen sets"
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        sets = coefficient_sets_for_study(study=study)
        return Response(CoefficientSetSummarySerializer(sets, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={
            201: CoefficientSetSummarySerializer,
            400: OpenApiResponse(description="one-line reason (JSON path)"),
            409: OpenApiResponse(description="the name is already frozen in this study"),
        },
        summary='Import a frozen set from {"name", "coefficients"} (validated whole, all or nothing)',
    )
    def post(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        # The service validates the raw document (JSON paths in its messages), not the serializer.
        cs = coefficient_set_import(study=study, data=request.data, user=request.user)
        return Response(CoefficientSetSummarySerializer(cs).data, status=status.HTTP_201_CREATED)


class CoefficientSetDetailApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="One frozen set in the export format (name, coefficients, provenance)",
    )
    def get(self, request: Request, slug: str, name: str) -> Response:
        study = study_for_request(request, slug)
        cs = coefficient_set_get(study=study, name=name)
        return Response(coefficient_set_document(coefficient_set=cs))
