"""Researcher pages for studies: bundle upload (docs/protocol.md "Files"), study overview, bundle download."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.errors import ArbiterError
from annotation.kinds import design_of
from annotation.render.settings import FAILURE_RULE_NAMES, failure_rule_of
from annotation.selectors.allocation import allocation_context
from annotation.selectors.problems import study_problem_reports
from annotation.selectors.studies import (
    new_study_run_for_user,
    render_failure_rates,
    study_failed_renders,
    study_get_for_user,
    study_original_images,
    study_overview,
)
from annotation.services.bundles.exporting import study_export_to_temporary_zip
from annotation.services.bundles.update import study_update_upload
from annotation.services.bundles.upload import study_import_upload
from annotation.services.new_study.options import with_failure_rule
from annotation.services.new_study.plan import KINDS
from annotation.services.new_study.uploads import upload_fields_check, upload_options
from annotation.services.new_study_runs import new_study_run_cancel, runs_on_workers
from annotation.services.studies import study_failure_rule_update as failure_rule_update
from annotation.services.studies import study_settings_update
from annotation.tasks import new_study_run_start, new_study_run_start_from_dry_run
from annotation.views.decorators import researcher_required


@researcher_required
@require_http_methods(["GET", "POST"])
def study_import(request: HttpRequest) -> HttpResponse:
    error = ""
    if request.method == "POST":
        upload = request.FILES.get("bundle")
        if upload is None:
            error = "Choose a .zip study bundle to upload."
        else:
            try:
                if request.POST.get("update"):
                    update = study_update_upload(upload=upload, user=request.user)
                    messages.success(request, update.summary())
                    study = update.study
                else:
                    study = study_import_upload(upload=upload, user=request.user)
            except ArbiterError as exc:
                error = str(exc)
            else:
                messages.success(request, f"Imported {study.title} ({study.slug}). Next: schedule blocks on its raters page.")
                return redirect("studies:detail", slug=study.slug)
    status = 400 if error else 200
    return render(request, "annotation/study_import.html", {"error": error}, status=status)


@researcher_required
@require_http_methods(["GET", "POST"])
def study_new(request: HttpRequest) -> HttpResponse:
    """new_study from the browser: a .zip of folders (or with a manifest inside), a dry run first.

    The upload is stored and made into a study in the background (a worker, or without a broker
    the server's background queue); the run's page shows its progress. Nothing is rendered here."""
    error = ""
    form = {
        key: request.POST.get(key, "")
        for key in (
            "kind", "title", "slug", "manifest", "reference", "match", "options", "comparisons", "render_failures",
            "media", "neutralize", "truth",
        )
    }
    if request.method == "POST":
        upload = request.FILES.get("archive")
        if upload is None:
            error = "Choose a .zip of folders (or of a manifest and its files) to upload."
        else:
            try:
                options = with_failure_rule(
                    upload_options(
                        options_json=form["options"], slug=form["slug"], title=form["title"],
                        media=form["media"], neutralize=form["neutralize"],
                    ),
                    form["render_failures"],
                    where="render_failures",
                )
                upload_fields_check(
                    kind=form["kind"] or "pairwise_reference", manifest=form["manifest"], reference=form["reference"],
                    options=options, truth=form["truth"],
                )
                run = new_study_run_start(
                    upload=upload,
                    parameters={
                        "kind": form["kind"] or "pairwise_reference",
                        "manifest": form["manifest"],
                        "reference": form["reference"],
                        "truth": form["truth"],
                        "match": form["match"],
                        "options": options,
                        "comparisons": form["comparisons"] or "all",
                        "dry_run": bool(request.POST.get("dry_run")),
                    },
                    user=request.user,
                )
            except ArbiterError as exc:
                error = str(exc)
            else:
                if run.status == run.Status.FAILED:  # made at once (ARBITER_TASKS_IN_BACKGROUND=0): shown here
                    error = run.error
                elif run.status == run.Status.DONE and run.study is not None:
                    messages.success(request, f"Created {run.study.title} ({run.study.slug}). Next: schedule blocks on its raters page.")
                    return redirect("studies:detail", slug=run.study.slug)
                else:
                    return redirect("studies:new-run", token=run.token)
    status = 400 if error else 200
    return render(
        request, "annotation/study_new.html", {"error": error, "form": form, "kinds": KINDS, "failure_rules": FAILURE_RULE_NAMES}, status=status
    )


@researcher_required
@require_GET
def study_new_run(request: HttpRequest, token: str) -> HttpResponse:
    """An upload being made into a study: its progress, polled by htmx while it runs; then the
    dry-run report with the button that makes the study, the error, or the way to the new study."""
    run = new_study_run_for_user(user=request.user, token=token)
    template = "annotation/study_new_run.html#run-progress" if request.headers.get("HX-Request") else "annotation/study_new_run.html"
    response = render(request, template, {"run": run, "on_workers": runs_on_workers()})
    if request.headers.get("HX-Request") and run.status == run.Status.DONE and run.study is not None:
        response["HX-Redirect"] = reverse("studies:detail", kwargs={"slug": run.study.slug})
    response["Cache-Control"] = "no-store"
    response["Vary"] = "HX-Request"
    return response


@researcher_required
@require_POST
def study_new_run_create(request: HttpRequest, token: str) -> HttpResponse:
    """The real run of a finished dry run: its upload and renders, not uploaded or rendered again."""
    dry_run = new_study_run_for_user(user=request.user, token=token)
    try:
        run = new_study_run_start_from_dry_run(dry_run=dry_run)
    except ArbiterError as exc:
        messages.error(request, str(exc))
        return redirect("studies:new-run", token=dry_run.token)
    if run.status == run.Status.DONE and run.study is not None:
        messages.success(request, f"Created {run.study.title} ({run.study.slug}). Next: schedule blocks on its raters page.")
        return redirect("studies:detail", slug=run.study.slug)
    return redirect("studies:new-run", token=run.token)


@researcher_required
@require_POST
def study_new_run_cancel(request: HttpRequest, token: str) -> HttpResponse:
    run = new_study_run_for_user(user=request.user, token=token)
    if new_study_run_cancel(run=run):
        messages.success(request, "Cancelled: nothing was written.")
    return redirect("studies:new-run", token=run.token)


@researcher_required
@require_GET
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    problems_total, problems = study_problem_reports(study=study)
    overview = study_overview(study=study)
    # Per system, the share of its outputs that failed to render, for a study made from HTML or
    # one with failed renders (docs/protocol.md "Failed renders in the leaderboard").
    shows_failures = bool((study.options or {}).get("render")) or overview.failed_renders > 0
    return render(
        request, "annotation/study_detail.html",
        {
            "study": study,
            "design": design_of(study),
            "overview": overview,
            "render_failures": render_failure_rates(study=study) if shows_failures else [],
            "failure_rule": FAILURE_RULE_NAMES[failure_rule_of(study.options)],
            "failure_rules": FAILURE_RULE_NAMES,
            "failed_renders": study_failed_renders(study=study) if shows_failures else [],
            "originals": study_original_images(study=study),
            "problems": problems,
            "problems_total": problems_total,
            **allocation_context(study),
        },
    )


@researcher_required
@require_GET
def study_export(request: HttpRequest, slug: str) -> FileResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    handle = study_export_to_temporary_zip(study=study)
    return FileResponse(handle, as_attachment=True, filename=f"{study.slug}.zip", content_type="application/zip")


@researcher_required
@require_POST
def study_texts_update(request: HttpRequest, slug: str) -> HttpResponse:
    """Edit the instructions and the judge prompt template (docs/protocol.md "Judges and calibration": study
    data, editable)."""
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        study_settings_update(
            study=study,
            user=request.user,
            instructions_md=request.POST.get("instructions_md", study.instructions_md),
            judge_prompt=request.POST.get("judge_prompt", study.judge_prompt),
        )
    except ArbiterError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Saved. Judge calls queued from now on use this prompt.")
    return redirect("studies:detail", slug=study.slug)


@researcher_required
@require_POST
def study_failure_rule_update(request: HttpRequest, slug: str) -> HttpResponse:
    """Change the failure rule of the study's leaderboards (docs/protocol.md "Failed renders in the leaderboard")."""
    study = study_get_for_user(user=request.user, slug=slug)
    try:
        changed = failure_rule_update(study=study, user=request.user, rule=request.POST.get("failure_rule", ""))
    except ArbiterError as exc:
        messages.error(request, str(exc))
    else:
        if changed:
            messages.success(
                request, f"Failed renders now follow the {FAILURE_RULE_NAMES[failure_rule_of(study.options)]} rule in "
                "leaderboards computed from now on."
            )
    return redirect("studies:detail", slug=study.slug)
