"""REST endpoints of the planner (docs/protocol.md "Planning a study's size"), the API twin of
``plan_study`` and the ``/plan/`` page.

- ``GET/POST /api/plans/``: the caller's plan runs / start one (202; the simulation is a Celery
  task). Body: the command's inputs (``ranking.planning.PLAN_PARAMETERS``), ``pilot`` a study
  slug the caller may manage (another's is refused like an unknown one).
- ``GET /api/plans/<id>/``: status, progress and (when done) the plan's JSON, with its CSV curve.
Researchers and admins only; another researcher's run is a 404.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from annotation.api.pagination import paginated_response
from annotation.api.permissions import IsResearcher
from annotation.roles import studies_for
from ranking.planning import PLAN_BOUNDS, PLAN_PARAMETERS, study_plan_runs_for
from ranking.tasks import study_plan_start
from stats.defaults import ALLOCATIONS, PLAN_KINDS


class PlanOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    pilot = serializers.CharField(source="pilot.slug", allow_null=True, default=None)
    parameters = serializers.JSONField()
    status = serializers.CharField()
    progress = serializers.FloatField()
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class PlanDetailSerializer(PlanOutputSerializer):
    result = serializers.JSONField(help_text="the plan_study --json document (empty until done)")
    csv = serializers.CharField(help_text="the plan_study --csv curve (empty until done)")


class PlanStartSerializer(serializers.Serializer):
    target = serializers.ChoiceField(choices=list(PLAN_KINDS))
    k = serializers.IntegerField(
        min_value=PLAN_BOUNDS["k"][0],
        max_value=PLAN_BOUNDS["k"][1],
        required=False,
        help_text="top_k: how many best systems",
    )
    probability = serializers.FloatField(required=False, help_text="ranking targets: probability")
    width = serializers.FloatField(required=False, help_text="adjacent: 95% width in Elo points")
    half_width = serializers.FloatField(required=False, help_text="kappa/alpha/brier: 95% half-width")
    allocation = serializers.ChoiceField(choices=list(ALLOCATIONS), required=False)
    pilot = serializers.CharField(required=False, allow_blank=True, help_text="a pilot study's slug")
    systems = serializers.IntegerField(
        min_value=PLAN_BOUNDS["systems"][0],
        max_value=PLAN_BOUNDS["systems"][1],
        required=False,
        help_text="stated assumptions: number of systems",
    )
    elo_sd = serializers.FloatField(required=False)
    tie_rate = serializers.FloatField(required=False)
    rater_noise = serializers.FloatField(required=False)
    repeats = serializers.IntegerField(
        min_value=PLAN_BOUNDS["repeats"][0], max_value=PLAN_BOUNDS["repeats"][1], required=False
    )
    trials_per_rater = serializers.IntegerField(
        min_value=PLAN_BOUNDS["trials_per_rater"][0],
        max_value=PLAN_BOUNDS["trials_per_rater"][1],
        required=False,
    )
    raters_per_block = serializers.IntegerField(
        min_value=PLAN_BOUNDS["raters_per_block"][0],
        max_value=PLAN_BOUNDS["raters_per_block"][1],
        required=False,
    )
    judges = serializers.IntegerField(
        min_value=PLAN_BOUNDS["judges"][0], max_value=PLAN_BOUNDS["judges"][1], required=False
    )
    judge_accuracy = serializers.ListField(
        child=serializers.FloatField(),
        required=False,
        help_text="brier: each judge's human-majority agreement",
    )
    judge_outputs = serializers.IntegerField(
        min_value=PLAN_BOUNDS["judge_outputs"][0],
        max_value=PLAN_BOUNDS["judge_outputs"][1],
        required=False,
        help_text="brier: outputs per comparison and judge",
    )
    studies = serializers.IntegerField(
        min_value=PLAN_BOUNDS["studies"][0],
        max_value=PLAN_BOUNDS["studies"][1],
        required=False,
        help_text="simulated studies",
    )
    seed = serializers.IntegerField(
        min_value=PLAN_BOUNDS["seed"][0], max_value=PLAN_BOUNDS["seed"][1], required=False
    )
    assurance = serializers.FloatField(
        required=False, help_text="kappa/alpha: share of studies reaching the half-width (0: the mean)"
    )
    start_blocks = serializers.IntegerField(
        min_value=PLAN_BOUNDS["start_blocks"][0],
        max_value=PLAN_BOUNDS["start_blocks"][1],
        required=False,
        help_text="adaptive: uniform blocks before the allocator takes over",
    )
    round_votes = serializers.IntegerField(
        min_value=PLAN_BOUNDS["round_votes"][0],
        max_value=PLAN_BOUNDS["round_votes"][1],
        required=False,
        allow_null=True,
        help_text="adaptive: votes per re-allocation round (default: the serve-time refit, 50 serves)",
    )
    verify = serializers.IntegerField(
        min_value=PLAN_BOUNDS["verify"][0],
        max_value=PLAN_BOUNDS["verify"][1],
        required=False,
        help_text="fresh simulated studies that check the plan (default 200; 0: no check)",
    )


assert set(PlanStartSerializer().fields) == set(PLAN_PARAMETERS)  # the API takes the command's inputs


class PlanListApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]
    pagination_class = api_settings.DEFAULT_PAGINATION_CLASS

    @extend_schema(responses={200: PlanOutputSerializer(many=True)}, summary="Your sample-size plans, newest first")
    def get(self, request: Request) -> Response:
        return paginated_response(self, request, study_plan_runs_for(request.user), PlanOutputSerializer)

    @extend_schema(
        request=PlanStartSerializer,
        responses={202: PlanOutputSerializer, 400: OpenApiResponse(description="one-line reason")},
        summary="Plan a study's size by seeded simulation, as a background task",
    )
    def post(self, request: Request) -> Response:
        data = PlanStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = study_plan_start(
            values=dict(data.validated_data), pilots=studies_for(request.user), user=request.user
        )
        return Response(PlanOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class PlanDetailApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(responses={200: PlanDetailSerializer}, summary="One plan: status, progress, result")
    def get(self, request: Request, pk: int) -> Response:
        run = study_plan_runs_for(request.user).filter(pk=pk).first()
        if run is None:
            raise Http404("no such plan")
        return Response(PlanDetailSerializer(run).data)
