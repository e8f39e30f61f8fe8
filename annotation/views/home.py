"""The landing page: researchers see their studies; everyone else the login form."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from annotation.roles import is_researcher, studies_for


def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("login")
    if not is_researcher(request.user):
        return render(request, "annotation/rater_home.html", {})
    studies = studies_for(request.user).order_by("slug")
    return render(request, "annotation/home.html", {"studies": studies})
