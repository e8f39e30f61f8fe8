"""Leaderboard pages (docs/protocol.md "Deployment leaderboard"): researcher pages per study and the published
page (no login).

Researcher pages are scoped by ``annotation.roles.studies_for`` (another study is a 404). A
computation runs as a Celery task; running rows poll their own fragment with htmx
(``hx-trigger="every 2s"``, no inline script). The published page shows a leaderboard whose
``published`` flag is set, by its opaque public token, to anyone. A running leaderboard's own page
polls its status the same way and, once the result is in, is loaded again (``HX-Refresh``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from annotation.errors import ArbiterError
from annotation.models import Study
from annotation.selectors.studies import study_get_for_user
from annotation.views.studies import researcher_required
from calibration.models import CoefficientSet
from ranking.leaderboard import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    HUMAN_KINDS,
    MAX_RESAMPLES,
    objective_correlations,
)
from ranking.leaderboard_runs import leaderboard_publish
from ranking.models import Leaderboard
from ranking.objective_csv import objective_parse_csv
from ranking.rendering import leaderboard_context, leaderboard_csv, leaderboard_html, leaderboard_json
from ranking.schedule import deployment_schedule_create
from ranking.selectors import (
    leaderboard_get,
    leaderboard_published,
    leaderboards_for_study,
    schedule_state,
    study_system_ids,
)
from ranking.tasks import leaderboard_start
from ranking.versions import leaderboard_moment, leaderboard_version_sensitivity

MAX_OBJECTIVE_BYTES = 1024 * 1024


def _leaderboard(request: HttpRequest, slug: str, pk: int) -> tuple[Study, Leaderboard]:
    study = study_get_for_user(user=request.user, slug=slug)
    leaderboard = leaderboard_get(study=study, leaderboard_id=pk)
    if leaderboard is None:
        raise Http404("no such leaderboard")
    return study, leaderboard


def _objective_upload(request: HttpRequest, study: Study) -> dict[str, float] | None:
    upload = request.FILES.get("objective")
    if upload is None:
        return None
    if upload.size and upload.size > MAX_OBJECTIVE_BYTES:
        raise ArbiterError(f"{upload.name}: the objective CSV is larger than 1 MB")
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ArbiterError(f"{upload.name}: not UTF-8 text") from None
    return objective_parse_csv(
        text, source=upload.name or "objective.csv", systems=study_system_ids(study=study)
    )


@researcher_required
@require_http_methods(["GET", "POST"])
def leaderboards_page(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    error = ""
    form: dict[str, Any] = {
        "coefficients": request.POST.get("coefficients", ""),
        "bootstrap": request.POST.get("bootstrap", DEFAULT_RESAMPLES),
        "seed": request.POST.get("seed", DEFAULT_SEED),
        "use_human_labels": request.POST.get("use_human_labels") == "1",
        "model": request.POST.get("model", "bradley_terry"),
        "human": request.POST.get("human") == "1",
    }
    if request.method == "POST":
        try:
            leaderboard = leaderboard_start(
                study=study,
                # docs/protocol.md "Human leaderboard": the human votes themselves, no coefficient set.
                coefficient_set=None if form["human"] else str(form["coefficients"]),
                resamples=form["bootstrap"],
                seed=form["seed"],
                use_human_labels=bool(form["use_human_labels"]),
                objective=_objective_upload(request, study),
                user=request.user,
                model=form["model"],
            )
        except ArbiterError as exc:
            error = str(exc)
        else:
            messages.success(request, f"Leaderboard {leaderboard.pk} queued.")
            return redirect("ranking:leaderboards", slug=study.slug)
    context = {
        "study": study,
        "leaderboards": leaderboards_for_study(study=study),
        "coefficient_sets": CoefficientSet.objects.filter(study=study).order_by("-created_at", "-id"),
        "form": form,
        "error": error,
        "max_resamples": MAX_RESAMPLES,
        "human_kinds": HUMAN_KINDS,
    }
    return render(request, "ranking/leaderboards.html", context, status=400 if error else 200)


@researcher_required
@require_GET
def leaderboard_row(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """One row of the list (polled by htmx while the computation runs)."""
    study, leaderboard = _leaderboard(request, slug, pk)
    response = render(
        request, "ranking/leaderboards.html#leaderboard-row", {"study": study, "lb": leaderboard}
    )
    response["Cache-Control"] = "no-store"
    return response


@researcher_required
@require_GET
def leaderboard_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    study, leaderboard = _leaderboard(request, slug, pk)
    if getattr(request, "htmx", False) and leaderboard.status == Leaderboard.Status.DONE:
        # The running page's poll: the result is in, so the whole page is loaded again to show it.
        return HttpResponseClientRefresh()
    context: dict[str, Any] = {"study": study, "lb": leaderboard}
    status = 200
    if leaderboard.status == Leaderboard.Status.DONE:
        context.update(leaderboard_context(study=study, report=leaderboard.result))
        # Paper B.5: the version-sensitivity report against an earlier leaderboard of the study.
        # Judge leaderboards only: a leaderboard of human votes has no judge outputs to compare.
        context["earlier_leaderboards"] = (
            []
            if leaderboard.from_human_votes
            else [
                lb
                for lb in leaderboards_for_study(study=study).filter(
                    status=Leaderboard.Status.DONE, coefficient_set__isnull=False
                )
                if lb.pk != leaderboard.pk and leaderboard_moment(lb) < leaderboard_moment(leaderboard)
            ]
        )
        compare_to = request.GET.get("compare_to", "").strip()
        if compare_to:
            try:
                context["sensitivity"] = leaderboard_version_sensitivity(
                    study=study, leaderboard=leaderboard, compare_to=compare_to
                )
            except ArbiterError as exc:
                context["compare_error"] = str(exc)
                status = 400
    response = render(request, "ranking/leaderboard_detail.html", context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    if leaderboard.is_active:
        response["Cache-Control"] = "no-store"
    return response


@researcher_required
@require_POST
def leaderboard_publish_view(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    study, leaderboard = _leaderboard(request, slug, pk)
    publish = request.POST.get("published") == "1"
    try:
        leaderboard_publish(leaderboard=leaderboard, published=publish, user=request.user)
    except ArbiterError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Leaderboard {leaderboard.pk} {'published' if publish else 'unpublished'}."
        )
    target = request.POST.get("next")
    if target == "detail":
        return redirect("ranking:detail", slug=study.slug, pk=leaderboard.pk)
    return redirect("ranking:leaderboards", slug=study.slug)


def _download(leaderboard: Leaderboard, fmt: str, name: str) -> HttpResponse:
    if fmt not in ("json", "csv", "html"):
        raise Http404("unknown format")
    if leaderboard.status != Leaderboard.Status.DONE:
        raise Http404("the leaderboard has not finished")
    if fmt == "html":
        # The same self-contained report page the ``leaderboard --html`` command writes.
        html = leaderboard_html(study=leaderboard.study, report=leaderboard.result)
        response = HttpResponse(html, content_type="text/html; charset=utf-8")
    elif fmt == "csv":
        response = HttpResponse(leaderboard_csv(leaderboard.result), content_type="text/csv; charset=utf-8")
    else:
        response = HttpResponse(leaderboard_json(leaderboard.result), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@researcher_required
@require_GET
def leaderboard_download(request: HttpRequest, slug: str, pk: int, fmt: str) -> HttpResponse:
    study, leaderboard = _leaderboard(request, slug, pk)
    return _download(leaderboard, fmt, f"{study.slug}-leaderboard-{leaderboard.pk}")


@require_GET
def leaderboard_public(request: HttpRequest, token: str) -> HttpResponse:
    leaderboard = leaderboard_published(public_token=token)
    if leaderboard is None:
        raise Http404("no such leaderboard")
    context = {
        "leaderboard": leaderboard,
        **leaderboard_context(study=leaderboard.study, report=leaderboard.result),
    }
    return render(request, "ranking/leaderboard_public.html", context)


@require_GET
def leaderboard_public_download(request: HttpRequest, token: str, fmt: str) -> HttpResponse:
    leaderboard = leaderboard_published(public_token=token)
    if leaderboard is None:
        raise Http404("no such leaderboard")
    return _download(leaderboard, fmt, f"{leaderboard.study.slug}-leaderboard")


@researcher_required
@require_http_methods(["GET", "POST"])
def schedule_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The docs/protocol.md "Deployment leaderboard" deployment schedule: current quotas and a form to create
    it."""
    study = study_get_for_user(user=request.user, slug=slug)
    error = ""
    form: dict[str, Any] = {
        "comparisons": request.POST.get("comparisons", ""),
        "seed": request.POST.get("seed", DEFAULT_SEED),
        "replace": request.POST.get("replace") == "1",
    }
    if request.method == "POST":
        try:
            outcome = deployment_schedule_create(
                study=study,
                comparisons=form["comparisons"],
                seed=form["seed"],
                replace=bool(form["replace"]),
                user=request.user,
            )
        except ArbiterError as exc:
            error = str(exc)
        else:
            for line in outcome.lines():
                messages.success(request, line)
            return redirect("ranking:schedule", slug=study.slug)
    context = {"study": study, "state": schedule_state(study=study), "form": form, "error": error}
    return render(request, "ranking/schedule.html", context, status=400 if error else 200)


@researcher_required
@require_GET
def objective_summary_view(request: HttpRequest, slug: str) -> HttpResponse:
    """The study page's objective scores beside the human and judge rankings (an htmx fragment,
    docs/protocol.md "Objective scores beside the rankings")."""
    from ranking.objective_scores import objective_summary

    study = study_get_for_user(user=request.user, slug=slug)
    summary = objective_summary(
        study=study, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED, correlate=objective_correlations
    )
    return render(request, "ranking/objective_summary.html", {"study": study, "summary": summary})
