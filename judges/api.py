"""REST endpoints of the judges app: thin, one service each (docs/protocol.md "Judges and calibration")."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher, study_for_request
from annotation.errors import NotFound
from annotation.roles import is_admin
from judges.models import Judge
from judges.providers import REGISTRABLE
from judges.selectors import judge_progress
from judges.services.judges import judge_create
from judges.services.runs import judge_run_start


class JudgeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Judge
        fields = [
            "id", "name", "family", "provider", "model", "base_url", "api_key_env", "max_image_edge",
            "max_image_bytes", "max_request_bytes", "rate_per_second", "concurrency", "timeout_seconds",
            "max_invalid_retries", "max_transport_retries", "max_attempts", "temperature", "max_tokens",
            "api_version", "token_param", "send_temperature", "seed", "reasoning_effort", "structured_output",
            "price_input_per_mtok", "price_output_per_mtok", "batch_discount", "adapt_parameters",
            "learned_parameters",
        ]
        read_only_fields = ["learned_parameters"]


class JudgeListApi(APIView):
    """GET: the judge registry (researchers). POST: register a judge (admins only)."""

    permission_classes = [IsResearcher]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "JudgeCreateInput"

        name = serializers.CharField(max_length=120)
        family = serializers.CharField(max_length=80, required=False, allow_blank=True, default="")
        provider = serializers.ChoiceField(choices=list(REGISTRABLE), default="openai")
        model = serializers.CharField(max_length=200)
        base_url = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
        api_key_env = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
        max_image_edge = serializers.IntegerField(required=False, allow_null=True)
        max_image_bytes = serializers.IntegerField(required=False, allow_null=True)
        max_request_bytes = serializers.IntegerField(required=False, allow_null=True)
        rate = serializers.CharField(required=False, allow_blank=True, allow_null=True)
        concurrency = serializers.IntegerField(required=False, allow_null=True)
        timeout = serializers.FloatField(required=False, allow_null=True)
        # Parameters sent and prices (the add_judge flags of the same names).
        api_version = serializers.CharField(required=False, allow_blank=True, allow_null=True)
        token_param = serializers.CharField(required=False, allow_null=True)
        send_temperature = serializers.BooleanField(required=False, allow_null=True, default=None)
        temperature = serializers.FloatField(required=False, allow_null=True)
        seed = serializers.IntegerField(required=False, allow_null=True)
        reasoning_effort = serializers.CharField(required=False, allow_blank=True, allow_null=True)
        structured_output = serializers.BooleanField(required=False, allow_null=True, default=None)
        adapt_parameters = serializers.BooleanField(required=False, allow_null=True, default=None)
        max_tokens = serializers.IntegerField(required=False, allow_null=True)
        price_input_per_mtok = serializers.CharField(required=False, allow_null=True)
        price_output_per_mtok = serializers.CharField(required=False, allow_null=True)
        batch_discount = serializers.CharField(required=False, allow_null=True)

    @extend_schema(responses=JudgeSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(JudgeSerializer(Judge.objects.order_by("name"), many=True).data)

    @extend_schema(request=InputSerializer, responses={201: JudgeSerializer})
    def post(self, request: Request) -> Response:
        if not is_admin(request.user):
            return Response({"detail": "only admins configure judge endpoints"}, status=status.HTTP_403_FORBIDDEN)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        judge = judge_create(
            name=d["name"], family=d["family"], provider=d["provider"], model=d["model"], base_url=d["base_url"],
            api_key_env=d["api_key_env"], max_image_edge=d.get("max_image_edge"), max_image_bytes=d.get("max_image_bytes"),
            max_request_bytes=d.get("max_request_bytes"), rate_per_second=d.get("rate"),
            concurrency=d.get("concurrency"), timeout_seconds=d.get("timeout"), user=request.user,
            **{k: d.get(k) for k in ("api_version", "token_param", "send_temperature", "temperature", "seed",
                                     "reasoning_effort", "structured_output", "adapt_parameters", "max_tokens",
                                     "price_input_per_mtok",
                                     "price_output_per_mtok", "batch_discount")},
        )
        return Response(JudgeSerializer(judge).data, status=status.HTTP_201_CREATED)


class ProgressSerializer(serializers.Serializer):
    judge = serializers.CharField()
    family = serializers.CharField()
    provider = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    valid = serializers.IntegerField()
    invalid = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()
    input_tokens = serializers.IntegerField(allow_null=True)
    output_tokens = serializers.IntegerField(allow_null=True)
    cached_tokens = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.FloatField(allow_null=True)
    cost_per_comparison_usd = serializers.FloatField(allow_null=True)
    reasons = serializers.ListField(
        child=serializers.DictField(),
        help_text="failed and invalid calls grouped by reason: [{status, reason, calls}], most calls first",
    )


class StudyJudgeRunsApi(APIView):
    """GET: progress per judge. POST: queue a run (idempotent: finished calls are skipped)."""

    permission_classes = [IsResearcher]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "JudgeRunInput"

        judge = serializers.CharField()
        set = serializers.ChoiceField(choices=["human", "deployment"], required=False, allow_null=True, default=None)
        orders = serializers.ListField(child=serializers.ChoiceField(choices=["primary", "swapped"]), default=["primary", "swapped"])
        repeats = serializers.IntegerField(min_value=1, max_value=100, default=1)
        retry_failed = serializers.BooleanField(default=False)

    class RunSerializer(serializers.Serializer):
        class Meta:
            ref_name = "JudgeRunQueued"

        judge = serializers.CharField()
        calls = serializers.IntegerField()
        created = serializers.IntegerField()
        done = serializers.IntegerField()
        queued = serializers.IntegerField()

    @extend_schema(responses=ProgressSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        return Response([p.as_dict() for p in judge_progress(study=study)])

    @extend_schema(request=InputSerializer, responses={202: RunSerializer})
    def post(self, request: Request, slug: str) -> Response:
        study = study_for_request(request, slug)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        judge = Judge.objects.filter(name=d["judge"]).first()
        if judge is None:
            raise NotFound(f"no judge named {d['judge']!r}")
        plan = judge_run_start(
            study=study, judge=judge, set=d["set"], orders=d["orders"], repeats=d["repeats"],
            retry_failed=d["retry_failed"], user=request.user,
        )
        body = {"judge": plan.judge, "calls": plan.calls, "created": plan.created, "done": plan.done,
                "queued": len(plan.output_ids)}
        return Response(body, status=status.HTTP_202_ACCEPTED)
