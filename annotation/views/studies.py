"""Researcher pages for studies: bundle upload (SPEC §8), study overview, bundle download."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotation.errors import ArbiterError
from annotation.roles import is_researcher
from annotation.selectors.studies import study_get_for_user, study_overview
from annotation.services.bundles import study_export_to_temporary_zip, study_import_upload


def researcher_required(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """Logged-in researchers and admins only; anyone else logged in gets 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not is_researcher(request.user):
            raise PermissionDenied("researchers only")
        return view(request, *args, **kwargs)

    return wrapped


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
                study = study_import_upload(upload=upload, user=request.user)
            except ArbiterError as exc:
                error = str(exc)
            else:
                return redirect("studies:detail", slug=study.slug)
    status = 400 if error else 200
    return render(request, "annotation/study_import.html", {"error": error}, status=status)


@researcher_required
@require_GET
def study_detail(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    return render(
        request, "annotation/study_detail.html", {"study": study, "overview": study_overview(study=study)}
    )


@researcher_required
@require_GET
def study_export(request: HttpRequest, slug: str) -> FileResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    handle = study_export_to_temporary_zip(study=study)
    return FileResponse(handle, as_attachment=True, filename=f"{study.slug}.zip", content_type="application/zip")
