"""Schedule API: create the block plan, export it as CSV, read progress, void / reopen slots."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import study_for_request
from annotation.models import Assignment
from annotation.roles import is_admin, studies_for
from annotation.selectors.progress import study_progress
from annotation.services.adaptive_allocation import study_schedule
from annotation.services.participants import assignment_void, slot_reopen
from annotation.services.scheduling import default_rater_targets, schedule_csv_text


def _require_admin(request: Request) -> None:
    if not is_admin(request.user):
        raise PermissionDenied("only an admin can change the schedule")


class ScheduleApi(APIView):
    class ScheduleInput(serializers.Serializer):
        blocks = serializers.IntegerField(default=8)
        block_size = serializers.IntegerField(default=234)
        repeats = serializers.IntegerField(required=False, help_text="hidden repeats per assignment; default: the study's")
        min_gap = serializers.IntegerField(required=False, help_text="trials between an original and its repeat; default: the study's")
        raters = serializers.ListField(
            child=serializers.IntegerField(), required=False,
            help_text="rater target per block; default 5,5,5,5,5,4,2,2 (checklist: k per block; pairwise, rating: 3)",
        )
        seed = serializers.IntegerField(required=False)
        checks = serializers.IntegerField(
            required=False, help_text="attention checks per assignment (pairwise, checklist, rating; default 2)"
        )
        gold = serializers.IntegerField(
            default=0,
            help_text="gold trials per assignment (pairwise_reference: the reference against a degraded copy)",
        )
        allocation = serializers.ChoiceField(
            choices=["uniform", "adaptive"], default="uniform",
            help_text="adaptive (pairwise kinds): these blocks are the uniform start, later blocks follow the fit",
        )
        target_k = serializers.IntegerField(default=3, help_text="adaptive: the top-k the allocator targets")

    class ScheduledBlock(serializers.Serializer):
        name = serializers.CharField()
        position = serializers.IntegerField()
        size = serializers.IntegerField()
        target_raters = serializers.IntegerField()
        seed = serializers.IntegerField()

    @extend_schema(request=ScheduleInput, responses={201: ScheduledBlock(many=True)}, summary="Schedule blocks (admin)")
    def post(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        _require_admin(request)
        body = self.ScheduleInput(data=request.data)
        body.is_valid(raise_exception=True)
        data: dict[str, Any] = dict(body.validated_data)
        data.setdefault("seed", study.seed)
        data.setdefault("repeats", study.hidden_repeats)
        data.setdefault("min_gap", study.min_gap)
        if "raters" not in data:
            data["raters"] = default_rater_targets(study, data["blocks"])
        blocks = study_schedule(study=study, actor=request.user, **data)
        out = [{"name": b.name, "position": b.position, "size": b.items.count(), "target_raters": b.target_raters,
                "seed": b.seed} for b in blocks]
        return Response(self.ScheduledBlock(out, many=True).data, status=status.HTTP_201_CREATED)


class ScheduleExportApi(APIView):
    @extend_schema(responses={(200, "text/csv"): OpenApiResponse(description="the schedule CSV")},
                   summary="The full plan as CSV")
    def get(self, request: Request, slug: str) -> HttpResponse:
        study = study_for_request(request, slug)
        response = HttpResponse(schedule_csv_text(study=study), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-schedule.csv"'
        return response


class ProgressApi(APIView):
    class BlockProgressOut(serializers.Serializer):
        block = serializers.CharField(source="block.name")
        size = serializers.IntegerField()
        target = serializers.IntegerField()
        open = serializers.IntegerField()
        active = serializers.IntegerField()
        started = serializers.IntegerField()
        finished = serializers.IntegerField()
        voided = serializers.IntegerField()
        planned_trials = serializers.IntegerField()
        votes = serializers.IntegerField()
        coverage = serializers.FloatField()

    @extend_schema(responses=BlockProgressOut(many=True), summary="Live progress per block")
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        return Response(self.BlockProgressOut(study_progress(study).blocks, many=True).data)


class _AssignmentAction(APIView):
    class AssignmentOut(serializers.Serializer):
        id = serializers.IntegerField()
        block = serializers.CharField(source="block.name")
        slot = serializers.IntegerField()
        state = serializers.CharField()

    def _assignment(self, request: Request, pk: int) -> Assignment:
        assignment = get_object_or_404(
            Assignment.objects.select_related("block__study"), pk=pk, block__study__in=studies_for(request.user)
        )
        _require_admin(request)
        return assignment


class AssignmentVoidApi(_AssignmentAction):
    class AssignmentVoidInput(serializers.Serializer):
        reason = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(request=AssignmentVoidInput, responses=_AssignmentAction.AssignmentOut, summary="Void an assignment (admin)")
    def post(self, request: Request, pk: int) -> Response:
        assignment = self._assignment(request, pk)
        body = self.AssignmentVoidInput(data=request.data)
        body.is_valid(raise_exception=True)
        voided = assignment_void(assignment=assignment, actor=request.user, reason=body.validated_data["reason"])
        return Response(self.AssignmentOut(voided).data)


class SlotReopenApi(_AssignmentAction):
    @extend_schema(request=None, responses={201: _AssignmentAction.AssignmentOut}, summary="Reopen a voided slot (admin)")
    def post(self, request: Request, pk: int) -> Response:
        copy = slot_reopen(assignment=self._assignment(request, pk), actor=request.user)
        return Response(self.AssignmentOut(copy).data, status=status.HTTP_201_CREATED)
