"""A comparison's three images for researchers (the disagreement lens's drill-down, docs/protocol.md
"The disagreement lens"): what raters and judges were shown, the neutralized variant when the
study neutralizes media. Researchers of the study only; raters never reach it (they see images
through their trials' own URLs, ``annotation.rater.images``)."""

from __future__ import annotations

from urllib.parse import quote

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.http import require_GET

from annotation.images import stored_image_path
from annotation.media import MEDIA_UNAVAILABLE_TEXT, MediaUnavailable, media_is_local, read_media
from annotation.models import Candidate, Comparison, Page, StoredImage
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required

SLOTS = ("reference", "a", "b")


def _shown(image: StoredImage | None, neutral: StoredImage | None, neutralize: bool) -> StoredImage | None:
    return (neutral or image) if neutralize else image


@researcher_required
@require_GET
def comparison_image(request: HttpRequest, slug: str, pk: int, slot: str) -> HttpResponseBase:
    study = study_get_for_user(user=request.user, slug=slug)
    if slot not in SLOTS:
        raise Http404("no such image")
    comparison = (
        Comparison.objects.filter(study=study, pk=pk)
        .select_related(
            "page__image",
            "page__neutralized_image",
            "candidate_a__image",
            "candidate_a__neutralized_image",
            "candidate_b__image",
            "candidate_b__neutralized_image",
        )
        .first()
    )
    if comparison is None:
        raise Http404("no such comparison")
    owner: Page | Candidate = (
        comparison.page
        if slot == "reference"
        else comparison.candidate_a
        if slot == "a"
        else comparison.candidate_b
    )
    image = _shown(owner.image, owner.neutralized_image, study.neutralize_media)
    return _image_response(image)


def _image_response(image: StoredImage | None) -> HttpResponseBase:
    if image is None:  # a failed render, or a pairwise study's page without a reference image
        raise Http404("no image")
    file = image.file.name or ""
    response: HttpResponseBase
    accel = settings.ARBITER_IMAGE_ACCEL_REDIRECT
    if accel:
        response = HttpResponse(content_type="image/png")
        response["X-Accel-Redirect"] = accel.rstrip("/") + "/" + quote(file)
    elif media_is_local():
        try:
            handle = stored_image_path(file).open("rb")
        except OSError:
            raise Http404 from None
        response = FileResponse(handle, content_type="image/png")
        if "Content-Disposition" in response:
            del response["Content-Disposition"]
    else:
        try:
            response = HttpResponse(read_media(file), content_type="image/png")
        except FileNotFoundError:
            raise Http404 from None
        except MediaUnavailable:  # the bucket is out of reach: a 503 that clears by itself, never a 500
            unavailable = HttpResponse(
                MEDIA_UNAVAILABLE_TEXT, status=503, content_type="text/plain; charset=utf-8"
            )
            unavailable["Retry-After"] = "5"
            return unavailable
    response["Cache-Control"] = "private, max-age=3600"
    return response


@researcher_required
@require_GET
def candidate_image(request: HttpRequest, slug: str, pk: int) -> HttpResponseBase:
    """One rendering of the study (a checklist question's item), as raters and judges were shown it."""
    study = study_get_for_user(user=request.user, slug=slug)
    candidate = (
        Candidate.objects.filter(page__study=study, pk=pk)
        .select_related("image", "neutralized_image")
        .first()
    )
    if candidate is None:
        raise Http404("no such rendering")
    return _image_response(_shown(candidate.image, candidate.neutralized_image, study.neutralize_media))
