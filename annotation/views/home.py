"""The landing page: researchers see their studies; rater accounts their studies; others the login form."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from annotation.roles import is_researcher, studies_for
from annotation.selectors.progress_list import rater_account_studies, studies_progress


def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("login")
    if not is_researcher(request.user):
        return render(request, "annotation/rater_home.html", {"studies": rater_account_studies(user=request.user)})
    studies = list(studies_for(request.user).order_by("slug"))
    progress = studies_progress(studies=studies)
    for study in studies:
        study.progress = progress.get(study.pk)  # type: ignore[attr-defined]
    return render(request, "annotation/home.html", {"studies": studies})
