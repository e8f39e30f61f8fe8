"""REST endpoints for leaderboards (docs/protocol.md "Deployment leaderboard", "Report keys").

- ``GET/POST /api/studies/<slug>/leaderboards/``: a study's leaderboards / start one (202; the
  computation is a Celery task): from judges (``coefficients``) or from the human votes
  (``human: true``, docs/protocol.md "Human leaderboard"). Researchers and admins, scoped by ``studies_for``: another
  study's slug is a 404.
- ``GET /api/studies/<slug>/leaderboards/<id>/``: status, progress and (when done) the result.
- ``GET /api/leaderboards/<public_token>/``: the docs/protocol.md "Report keys" JSON of a published
leaderboard, to
  anyone (no login); unpublished or unknown tokens are a 404.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from ranking.leaderboard import DEFAULT_RESAMPLES, DEFAULT_SEED
from ranking.models import Leaderboard, RankingModel
from ranking.selectors import leaderboard_get, leaderboard_published, leaderboards_for_study
from ranking.tasks import leaderboard_start


class LeaderboardOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    coefficients = serializers.SerializerMethodField(help_text="the coefficient set's name; null for human votes")
    outcomes = serializers.SerializerMethodField(help_text='"judge proxy" or "human votes"')
    resamples = serializers.IntegerField()
    seed = serializers.IntegerField()
    use_human_labels = serializers.BooleanField()
    model = serializers.CharField(source="ranking_model")
    status = serializers.CharField()
    progress = serializers.FloatField()
    error = serializers.CharField()
    published = serializers.BooleanField()
    public_token = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_coefficients(self, leaderboard: Leaderboard) -> str | None:
        return None if leaderboard.coefficient_set is None else leaderboard.coefficient_set.name

    def get_outcomes(self, leaderboard: Leaderboard) -> str:
        return "human votes" if leaderboard.from_human_votes else "judge proxy"


class LeaderboardDetailSerializer(LeaderboardOutputSerializer):
    result = serializers.JSONField()


class LeaderboardStartSerializer(serializers.Serializer):
    coefficients = serializers.CharField(
        required=False, help_text="name of a frozen coefficient set of the study (or human: true)"
    )
    human = serializers.BooleanField(
        default=False,
        help_text='rank the study\'s human votes, no coefficient set (docs/protocol.md "Human leaderboard")',
    )
    bootstrap = serializers.IntegerField(default=DEFAULT_RESAMPLES, help_text="bootstrap resamples")
    seed = serializers.IntegerField(default=DEFAULT_SEED, help_text="bootstrap seed")
    use_human_labels = serializers.BooleanField(default=False)
    model = serializers.ChoiceField(
        choices=RankingModel.values,
        default=RankingModel.BRADLEY_TERRY.value,
        help_text='bradley_terry (docs/protocol.md "Deployment leaderboard") or davidson (ties modelled; compared with Bradley–Terry)',
    )
    objective = serializers.DictField(
        child=serializers.FloatField(), required=False, help_text="objective leaderboard {system: score}"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("human") == bool(attrs.get("coefficients")):
            raise serializers.ValidationError("give either coefficients (a frozen set's name) or human: true")
        return attrs


class LeaderboardListApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        responses={200: LeaderboardOutputSerializer(many=True)}, summary="The study's leaderboards"
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        return Response(LeaderboardOutputSerializer(leaderboards_for_study(study=study), many=True).data)

    @extend_schema(
        request=LeaderboardStartSerializer,
        responses={202: LeaderboardOutputSerializer, 400: OpenApiResponse(description="one-line reason")},
        summary='Start computing a leaderboard (docs/protocol.md "Deployment leaderboard") as a background task',
    )
    def post(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        data = LeaderboardStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = data.validated_data
        leaderboard = leaderboard_start(
            study=study,
            coefficient_set=None if values["human"] else values["coefficients"],
            resamples=values["bootstrap"],
            seed=values["seed"],
            use_human_labels=values["use_human_labels"],
            objective=values.get("objective"),
            user=request.user,
            model=values["model"],
        )
        return Response(LeaderboardOutputSerializer(leaderboard).data, status=status.HTTP_202_ACCEPTED)


class LeaderboardDetailApi(APIView):
    permission_classes = [permissions.IsAuthenticated, IsResearcher]

    @extend_schema(
        responses={200: LeaderboardDetailSerializer}, summary="One leaderboard: status, progress, result"
    )
    def get(self, request: Request, slug: str, pk: int) -> Response:
        study = study_for_request(request, slug)
        leaderboard = leaderboard_get(study=study, leaderboard_id=pk)
        if leaderboard is None:
            raise Http404("no such leaderboard")
        return Response(LeaderboardDetailSerializer(leaderboard).data)


class LeaderboardPublicApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [permissions.AllowAny]

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT}, summary="A published leaderboard's JSON (docs/protocol.md \"Report keys\"; public)"
    )
    def get(self, request: Request, token: str) -> Response:
        leaderboard: Leaderboard | None = leaderboard_published(public_token=token)
        if leaderboard is None:
            raise Http404("no such leaderboard")
        return Response(leaderboard.result)
