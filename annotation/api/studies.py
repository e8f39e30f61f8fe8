"""REST endpoints for studies (docs/protocol.md "Files"): list, detail, bundle import/export, and researcher
lists.

Thin views: parse, call one selector or service, serialize. Researchers and admins only
(annotation.roles.is_researcher); a study the caller may not manage answers 404.
"""

from __future__ import annotations

from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from annotation.api.pagination import paginated_response
from annotation.api.permissions import IsResearcher
from annotation.errors import ValidationFailed
from annotation.models import ComparisonSet, NewStudyRun, rater_page_options
from annotation.render.settings import FAILURE_RULES
from annotation.selectors.studies import (
    new_study_run_for_user,
    study_comparisons,
    study_get_for_user,
    study_list_for_user,
    study_overview,
    study_pages,
    study_systems,
)
from annotation.services.bundles.exporting import study_export_to_temporary_zip
from annotation.services.bundles.update import study_update_upload
from annotation.services.bundles.upload import study_import_upload
from annotation.services.crowd_settings import CROWD_SETTINGS
from annotation.services.new_study.options import with_failure_rule
from annotation.services.new_study.plan import KINDS
from annotation.services.new_study.uploads import upload_fields_check, upload_options
from annotation.services.studies import study_settings_update
from annotation.tasks import new_study_run_start, new_study_run_start_from_dry_run

ERROR = inline_serializer("Error", fields={"detail": serializers.CharField()})


def _crowd_value(*, help_text: str) -> serializers.JSONField:
    """A crowd setting in a PATCH body: its JSON value unchanged, for ``crowd_settings_clean`` to check."""
    return serializers.JSONField(required=False, allow_null=True, help_text=help_text)


class ResearcherApi(APIView):
    permission_classes = [IsAuthenticated, IsResearcher]


class StudyListApi(ResearcherApi):
    pagination_class = api_settings.DEFAULT_PAGINATION_CLASS

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyListItem"

        slug = serializers.SlugField()
        title = serializers.CharField()
        kind = serializers.CharField()
        created_at = serializers.DateTimeField()

    @extend_schema(operation_id="studies_list", responses={200: OutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return paginated_response(self, request, study_list_for_user(user=request.user), self.OutputSerializer)


class StudyDetailApi(ResearcherApi):
    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyDetail"

        class AxisSerializer(serializers.Serializer):
            class Meta:
                ref_name = "StudyAxis"

            id = serializers.CharField(source="axis_id")
            scope = serializers.CharField()
            description = serializers.CharField()

        slug = serializers.SlugField()
        title = serializers.CharField()
        kind = serializers.CharField()
        instructions_md = serializers.CharField()
        judge_prompt = serializers.CharField()
        neutralize_media = serializers.BooleanField()
        # The crowd settings (the settings page's; PATCH takes the same keys).
        accepting_participants = serializers.BooleanField()
        completion_code = serializers.CharField()
        completion_url = serializers.CharField()
        screened_out_url = serializers.CharField()
        screened_out_code = serializers.CharField()
        end_comment = serializers.BooleanField()
        break_every = serializers.IntegerField()
        # The rater page's settings (issue 30; on the same settings page, PATCH takes them too).
        digit_keys = serializers.BooleanField()
        axes_from_verdict = serializers.BooleanField()
        mark_defaulted_axes = serializers.BooleanField()
        created_at = serializers.DateTimeField()
        axes = AxisSerializer(many=True)
        counts = inline_serializer(
            "StudyCounts",
            fields={
                "pages": serializers.IntegerField(),
                "systems": serializers.IntegerField(),
                "candidates": serializers.IntegerField(),
                "failed_renders": serializers.IntegerField(),
                "comparisons": serializers.IntegerField(),
                "comparisons_by_set": serializers.DictField(child=serializers.IntegerField()),
            },
        )

    @extend_schema(operation_id="studies_retrieve", responses={200: OutputSerializer, 404: ERROR})
    def get(self, request: Request, slug: str) -> Response:
        study = study_get_for_user(user=request.user, slug=slug)
        overview = study_overview(study=study)
        data = {
            "slug": study.slug,
            "title": study.title,
            "kind": study.kind,
            "instructions_md": study.instructions_md,
            "judge_prompt": study.judge_prompt,
            "neutralize_media": study.neutralize_media,
            **{name: getattr(study, name) for name in CROWD_SETTINGS},
            **rater_page_options(study),
            "created_at": study.created_at,
            "axes": overview.axes,
            "counts": {
                "pages": overview.pages,
                "systems": overview.systems,
                "candidates": overview.candidates,
                "failed_renders": overview.failed_renders,
                "comparisons": overview.comparisons,
                "comparisons_by_set": overview.comparisons_by_set,
            },
        }
        return Response(self.OutputSerializer(data).data)

    class UpdateSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyUpdate"

        title = serializers.CharField(required=False, max_length=200)
        instructions_md = serializers.CharField(required=False, allow_blank=True, max_length=50_000)
        judge_prompt = serializers.CharField(
            required=False, allow_blank=True, max_length=50_000, help_text="Empty: the project's default prompt."
        )
        neutralize_media = serializers.BooleanField(required=False)
        accepting_participants = _crowd_value(help_text="true/false: the participant link takes new participants.")
        # Crowd settings (issues 17, 29): JSON values passed as given to the one validator the
        # settings page and the bundle's ``crowd`` object use (annotation.services.crowd_settings),
        # so limits and messages are the same everywhere; the fields here only document the types.
        completion_code = _crowd_value(help_text="Text, at most 64 characters; empty: a new code per participant.")
        completion_url = _crowd_value(
            help_text="Empty, or an absolute http(s) URL (at most 500 characters); {code} is replaced by the code."
        )
        screened_out_url = _crowd_value(help_text="Empty, or an absolute http(s) URL (at most 500 characters).")
        screened_out_code = _crowd_value(help_text="Text, at most 64 characters.")
        end_comment = _crowd_value(help_text="true/false: an optional comment box on the end page.")
        break_every = _crowd_value(help_text="A break screen every N answered trials: a whole number 0 … 10000 (0: none).")
        digit_keys = _crowd_value(help_text="true/false: digit keys answer the highlighted question (rater page).")
        axes_from_verdict = _crowd_value(help_text="true/false: the 'v' key sets every axis to the verdict's side.")
        mark_defaulted_axes = _crowd_value(
            help_text="true/false: votes remember the axes set by the verdict key and left so (votes CSV)."
        )

    @extend_schema(
        operation_id="studies_partial_update",
        request=UpdateSerializer,
        responses={200: OutputSerializer, 400: ERROR, 404: ERROR},
    )
    def patch(self, request: Request, slug: str) -> Response:
        study = study_get_for_user(user=request.user, slug=slug)
        data = self.UpdateSerializer(data=request.data)
        # A key PATCH does not change is refused, not ignored: a scripted set-up that sends a
        # misspelt or page-only setting would otherwise get 200 and an unchanged study.
        takes = list(data.fields)
        unknown = [key for key in request.data if key not in takes] if isinstance(request.data, dict) else []
        if unknown:
            raise ValidationFailed(f"not a setting PATCH changes (it takes: {', '.join(takes)})", field=unknown[0])
        if not data.is_valid():
            field, problems = next(iter(data.errors.items()))
            raise ValidationFailed(str(problems[0]), field=field)
        study_settings_update(study=study, user=request.user, **data.validated_data)
        return self.get(request, slug)


class StudyImportApi(ResearcherApi):
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyImportRequest"

        file = serializers.FileField(help_text='A .zip study bundle (docs/protocol.md "Files"): study.json and its images.')
        update_existing = serializers.BooleanField(
            required=False, default=False,
            help_text="Replace the changed candidates of the existing study (paper B.5; docs/candidate-versions.md).",
        )

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyImported"

        slug = serializers.SlugField()
        title = serializers.CharField()

    class UpdateOutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyUpdated"

        slug = serializers.SlugField()
        replaced = serializers.ListField(child=serializers.CharField(), help_text="page/system@vN of each replaced candidate")
        comparisons_touched = serializers.IntegerField()
        human_comparisons_touched = serializers.IntegerField()
        outputs_superseded = serializers.IntegerField()

    @extend_schema(
        operation_id="studies_import",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 200: UpdateOutputSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
        description="Import a study bundle, all or nothing. A bad bundle (or a slug in use) answers 400 "
        "with one line naming the file, JSON path and field. With update_existing=true the bundle's study must "
        "exist: its changed candidates are replaced (200); a bundle changing anything else answers 400.",
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        if not serializer.is_valid():
            errors = serializer.errors.get("file") or ["a .zip bundle is required"]
            return Response({"detail": f"file: {errors[0]}"}, status=status.HTTP_400_BAD_REQUEST)
        if serializer.validated_data["update_existing"]:
            update = study_update_upload(upload=serializer.validated_data["file"], user=request.user)
            data = {
                "slug": update.study.slug,
                "replaced": [f"{page}/{system}@v{version}" for page, system, version in update.replaced],
                "comparisons_touched": update.comparisons_touched,
                "human_comparisons_touched": update.human_comparisons_touched,
                "outputs_superseded": update.effects.get("outputs_superseded", 0),
            }
            return Response(self.UpdateOutputSerializer(data).data, status=status.HTTP_200_OK)
        study = study_import_upload(upload=serializer.validated_data["file"], user=request.user)
        return Response(self.OutputSerializer(study).data, status=status.HTTP_201_CREATED)


class NewStudyRunApi(ResearcherApi):
    """An upload a worker makes into a study: its status, progress and result."""

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "NewStudyRun"

        run = serializers.CharField(help_text="the run's token")
        status = serializers.ChoiceField(choices=("queued", "running", "done", "failed", "cancelled"))
        stage = serializers.CharField(help_text="what the worker is doing")
        done = serializers.IntegerField(allow_null=True)
        total = serializers.IntegerField(allow_null=True)
        error = serializers.CharField(help_text="one line, when failed")
        slug = serializers.CharField(allow_null=True, help_text="the new study, when done (null on a dry run)")
        report = serializers.CharField(help_text="what new_study --dry-run prints, when done")
        progress = serializers.DictField(
            help_text="per group (each system, 'reference') pages rendered and failed; failures [file as uploaded, "
            "reason]; pages rendered by this run and kept from its dry run; the counts, when done"
        )
        dry_run = serializers.BooleanField()
        url = serializers.CharField(help_text="this run's address; POST to it makes a finished dry run into the study")

    @staticmethod
    def output(run: NewStudyRun) -> dict[str, object]:
        return {
            "run": run.token,
            "status": run.status,
            "stage": run.stage,
            "done": run.done,
            "total": run.total,
            "error": run.error,
            "slug": run.study.slug if run.study is not None else None,
            "report": run.report,
            "progress": run.progress,
            "dry_run": bool(run.parameters.get("dry_run")),
            "url": reverse("studies:api-new-run", kwargs={"token": run.token}),
        }

    @extend_schema(operation_id="studies_new_run", responses={200: OutputSerializer, 404: ERROR})
    def get(self, request: Request, token: str) -> Response:
        run = new_study_run_for_user(user=request.user, token=token)
        return Response(self.OutputSerializer(self.output(run)).data)

    @extend_schema(
        operation_id="studies_new_run_create",
        request=None,
        responses={202: OutputSerializer, 404: ERROR, 409: ERROR},
        description="Make a finished dry run into the study: its upload and renders are taken over, so nothing is "
        "uploaded or rendered again (202 with the new run). 409 when the dry run is not finished or was used.",
    )
    def post(self, request: Request, token: str) -> Response:
        dry_run = new_study_run_for_user(user=request.user, token=token)
        run = new_study_run_start_from_dry_run(dry_run=dry_run)
        return Response(self.OutputSerializer(self.output(run)).data, status=status.HTTP_202_ACCEPTED)


class StudyNewApi(ResearcherApi):
    """``new_study`` over HTTP: a ZIP of folders (or holding a manifest) becomes a study."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyNewRequest"

        kind = serializers.ChoiceField(choices=KINDS)
        file = serializers.FileField(
            help_text="A .zip of folders: one per system, plus the references' folder (pairwise_reference); "
            "or of a manifest and the files it lists. Files are images or .html pages (rendered first, with the "
            "options' render settings; docs/new-study.md \"HTML outputs\")."
        )
        manifest = serializers.CharField(
            required=False, default="", allow_blank=True,
            help_text="Path of a CSV/JSONL manifest inside the .zip (page, reference, system, image[, text]).",
        )
        reference = serializers.CharField(
            required=False, default="", allow_blank=True,
            help_text="Name of the references' folder in the .zip (pairwise_reference); every other folder is a system.",
        )
        truth = serializers.CharField(
            required=False, default="", allow_blank=True,
            help_text="Name of the ground truth's folder in the .zip (pairwise_reference; not a system): per page "
            "<page>.json {page: {width, height}, blocks: [{type, text, html?, latex?, bbox}]} or <page>.html, rendered "
            "with the study's settings. A page whose truth is refused is listed in the report and left without it "
            "(docs/protocol.md \"Ground truth\").",
        )
        match = serializers.CharField(
            required=False, default="", allow_blank=True,
            help_text="Regular expression over file names; its 'page' (or first) group is the page id.",
        )
        title = serializers.CharField(required=False, default="", allow_blank=True, max_length=200)
        slug = serializers.CharField(
            required=False, default="", allow_blank=True, max_length=80,
            help_text="The study's slug; empty: made from the title (or given in options).",
        )
        options = serializers.CharField(
            required=False, default="", allow_blank=True,
            help_text="JSON object of further study.json keys: instructions_md, axes, settings, options, …",
        )
        comparisons = serializers.ChoiceField(choices=("all", "none"), required=False, default="all")
        render_failures = serializers.ChoiceField(
            choices=FAILURE_RULES, required=False, allow_blank=True, default="",
            help_text="How failed renders count in the leaderboards: ambihtmlbench (the default) scores only rendered "
            "outputs, aescode counts a failed output as losing to a rendered one "
            "(docs/protocol.md \"Failed renders in the leaderboard\"). Kept as the render option's failure_rule.",
        )
        media = serializers.CharField(
            required=False, default="", allow_blank=True,
            help_text="CSV rows (or JSONL) of page, system, kind, x0, y0, x1, y1: the media regions of image pages "
            "(system empty: the reference; kind none: no media) (docs/new-study.md \"Media regions of PNG pages\").",
        )
        neutralize = serializers.ChoiceField(
            choices=("yes", "no"), required=False, allow_blank=True, default="",
            help_text="no: show every image's media as it is (settings.neutralize_media false).",
        )
        dry_run = serializers.BooleanField(required=False, default=False)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyNew"

        slug = serializers.CharField(allow_null=True, help_text="null on a dry run")
        counts = serializers.DictField(child=serializers.IntegerField())
        report = serializers.CharField(help_text="what new_study --dry-run prints")

    @extend_schema(
        operation_id="studies_new",
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 200: OutputSerializer, 202: NewStudyRunApi.OutputSerializer, 400: ERROR},
        description="Make a study from a .zip of folders or a manifest, as `manage.py new_study` does, and import it "
        "all or nothing. The upload is stored and made into a study in the background (a Celery worker, or without a "
        "broker the server's background queue): 202 with the run, whose progress and result "
        "`GET /api/studies/new/runs/<run>/` gives; `POST` there makes a finished dry run (dry_run=true: nothing "
        "written) into the study from the same upload and renders. A field error answers 400 with one line naming "
        "the field. Only when the server computes before answering (ARBITER_TASKS_IN_BACKGROUND=0, no broker) does "
        "this answer with the result: 201 (the study), 200 (a dry run's counts and report) or 400 (the error).",
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        if not serializer.is_valid():
            field, errors = next(iter(serializer.errors.items()))
            return Response({"detail": f"{field}: {errors[0]}"}, status=status.HTTP_400_BAD_REQUEST)
        values = serializer.validated_data
        options = with_failure_rule(
            upload_options(
                options_json=values["options"], slug=values["slug"], title=values["title"],
                media=values["media"], neutralize=values["neutralize"],
            ),
            values["render_failures"],
            where="render_failures",
        )
        upload_fields_check(
            kind=values["kind"], manifest=values["manifest"], reference=values["reference"], options=options,
            truth=values["truth"],
        )
        run = new_study_run_start(
            upload=values["file"],
            parameters={
                "kind": values["kind"],
                "manifest": values["manifest"],
                "reference": values["reference"],
                "truth": values["truth"],
                "match": values["match"],
                "options": options,
                "comparisons": values["comparisons"],
                "dry_run": values["dry_run"],
            },
            user=request.user,
        )
        if run.status == run.Status.FAILED:  # made at once (ARBITER_TASKS_IN_BACKGROUND=0, no broker)
            return Response({"detail": run.error}, status=status.HTTP_400_BAD_REQUEST)
        if run.status == run.Status.DONE:
            data = {"slug": run.study.slug if run.study else None, "counts": run.progress.get("counts", {}), "report": run.report}
            return Response(self.OutputSerializer(data).data, status=status.HTTP_201_CREATED if run.study else status.HTTP_200_OK)
        return Response(NewStudyRunApi.output(run), status=status.HTTP_202_ACCEPTED)


class StudyExportApi(ResearcherApi):
    @extend_schema(
        operation_id="studies_export",
        responses={(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="the bundle"), 404: ERROR},
    )
    def get(self, request: Request, slug: str) -> FileResponse:
        study = study_get_for_user(user=request.user, slug=slug)
        handle = study_export_to_temporary_zip(study=study)
        return FileResponse(handle, as_attachment=True, filename=f"{study.slug}.zip", content_type="application/zip")


class SystemListApi(ResearcherApi):
    pagination_class = api_settings.DEFAULT_PAGINATION_CLASS

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudySystem"

        id = serializers.CharField(source="external_id")
        name = serializers.CharField()
        candidates = serializers.IntegerField(source="n_candidates")
        failed_renders = serializers.IntegerField(source="n_failed")

    @extend_schema(operation_id="studies_systems_list", responses={200: OutputSerializer(many=True), 404: ERROR})
    def get(self, request: Request, slug: str) -> Response:
        study = study_get_for_user(user=request.user, slug=slug)
        return paginated_response(self, request, study_systems(study=study), self.OutputSerializer)


class PageListApi(ResearcherApi):
    pagination_class = api_settings.DEFAULT_PAGINATION_CLASS

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyPage"

        id = serializers.CharField(source="external_id")
        targets = serializers.JSONField()
        media = serializers.JSONField()
        meta = serializers.JSONField()
        candidates = serializers.IntegerField(source="n_candidates")

    @extend_schema(operation_id="studies_pages_list", responses={200: OutputSerializer(many=True), 404: ERROR})
    def get(self, request: Request, slug: str) -> Response:
        study = study_get_for_user(user=request.user, slug=slug)
        return paginated_response(self, request, study_pages(study=study), self.OutputSerializer)


class ComparisonListApi(ResearcherApi):
    pagination_class = api_settings.DEFAULT_PAGINATION_CLASS

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StudyComparison"

        id = serializers.CharField(source="external_id")
        page = serializers.CharField(source="page.external_id")
        a = serializers.CharField(source="candidate_a.system.external_id")
        b = serializers.CharField(source="candidate_b.system.external_id")
        set = serializers.CharField()

    @extend_schema(
        operation_id="studies_comparisons_list",
        parameters=[OpenApiParameter("set", str, enum=[s.value for s in ComparisonSet], required=False)],
        responses={200: OutputSerializer(many=True), 404: ERROR},
    )
    def get(self, request: Request, slug: str) -> Response:
        study = study_get_for_user(user=request.user, slug=slug)
        chosen = request.query_params.get("set") or None
        if chosen is not None and chosen not in ComparisonSet.values:
            return Response(
                {"detail": f"set: expected one of {', '.join(ComparisonSet.values)}, got {chosen!r}"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return paginated_response(self, request, study_comparisons(study=study, set=chosen), self.OutputSerializer)


class ObjectiveScoresApi(ResearcherApi):
    """docs/protocol.md "Objective scores beside the rankings": per system the objective scores with
    their page-bootstrap intervals, and how far the scoring is."""

    @extend_schema(
        operation_id="studies_objective",
        parameters=[
            OpenApiParameter("resamples", int, required=False, description="bootstrap resamples (default 2000)"),
            OpenApiParameter("seed", int, required=False, description="bootstrap seed (default 20260831)"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: ERROR, 404: ERROR},
        description="The study's objective scores against its ground truth (TEDS, TEDS-S, D_text, S_layout, S_obj "
        "per system, each with its 95 % interval over page resamples). `scored` < `to_score` while scores are being "
        "computed; POST scores the missing ones in the background (202).",
    )
    def get(self, request: Request, slug: str) -> Response:
        from annotation.services.objective_scores import objective_status, system_objective_scores

        study = study_get_for_user(user=request.user, slug=slug)
        try:
            resamples = int(request.query_params.get("resamples", 2000))
            seed = int(request.query_params.get("seed", 20260831))
        except ValueError:
            raise ValidationFailed("expected whole numbers", field="resamples") from None
        if not 1 <= resamples <= 100_000:
            raise ValidationFailed("expected 1 to 100000", field="resamples")
        state = objective_status(study=study)
        systems = system_objective_scores(study=study, resamples=resamples, seed=seed)
        return Response({
            "pages_with_truth": state.pages_with_truth,
            "to_score": state.to_score,
            "scored": state.scored,
            "unscored": state.unscored,
            "bootstrap": {"resamples": resamples, "seed": seed, "units": "pages"},
            "systems": [s.to_json() for s in systems],
        })

    @extend_schema(operation_id="studies_objective_refresh", request=None, responses={202: OpenApiTypes.OBJECT, 404: ERROR})
    def post(self, request: Request, slug: str) -> Response:
        from annotation.task_queue import task_queue
        from annotation.tasks import objective_scores_task

        study = study_get_for_user(user=request.user, slug=slug)
        task_queue(objective_scores_task, study.pk)
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)
