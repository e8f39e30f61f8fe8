"""The researcher's objective pages (docs/protocol.md "The per-page view of the objective scores"):
the scored candidates worst first, one candidate's blocks drawn on its page's ground truth and on
its render, and those two images. Researchers of the study only: a rater gets 403, another
study's researcher 404, and no URL here is ever given to a rater."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.media import read_media
from annotation.models import Candidate
from annotation.selectors.objective import DEFAULT_SORT, SORTS, objective_page_view, objective_scores_sorted
from annotation.selectors.studies import study_get_for_user
from annotation.services.objective_scores import objective_status
from annotation.views.decorators import researcher_required

PAGE_SIZE = 50


@researcher_required
@require_GET
def objective_pages(request: HttpRequest, slug: str) -> HttpResponse:
    """The scored candidates, worst first by the chosen score, 50 to a page."""
    study = study_get_for_user(user=request.user, slug=slug)
    by = request.GET.get("by", DEFAULT_SORT)
    if by not in SORTS:
        by = DEFAULT_SORT
    rows = Paginator(objective_scores_sorted(study=study, by=by), PAGE_SIZE).get_page(request.GET.get("page"))
    template = (
        "annotation/objective/pages.html#status"
        if request.headers.get("HX-Request")
        else "annotation/objective/pages.html"
    )
    response = render(
        request,
        template,
        {"study": study, "rows": rows, "by": by, "sorts": SORTS, "status": objective_status(study=study)},
    )
    response["Vary"] = "HX-Request"
    return response


@researcher_required
@require_POST
def objective_refresh(request: HttpRequest, slug: str) -> HttpResponse:
    """Score what is missing, in the background; the pages list polls the count."""
    from annotation.task_queue import task_queue
    from annotation.tasks import objective_scores_task

    study = study_get_for_user(user=request.user, slug=slug)
    task_queue(objective_scores_task, study.pk)
    return redirect("studies:objective", slug=study.slug)


@researcher_required
@require_GET
def objective_page(request: HttpRequest, slug: str, candidate: int) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    view = objective_page_view(
        study=study,
        candidate_id=candidate,
        truth_url=reverse(
            "studies:objective-image", kwargs={"slug": slug, "candidate": candidate, "side": "truth"}
        ),
        prediction_url=reverse(
            "studies:objective-image", kwargs={"slug": slug, "candidate": candidate, "side": "render"}
        ),
    )
    return render(request, "annotation/objective/page.html", {"study": study, "view": view})


@researcher_required
@require_GET
def objective_image(request: HttpRequest, slug: str, candidate: int, side: str) -> HttpResponse:
    """The page's reference (``truth``) or the candidate's image (``render``) as shown in the study."""
    study = study_get_for_user(user=request.user, slug=slug)
    found = (
        Candidate.objects.filter(pk=candidate, page__study=study, page__truth__isnull=False)
        .select_related("image", "page__image")
        .first()
    )
    if found is None:
        raise Http404("no such candidate")
    image = found.page.image if side == "truth" else found.image
    if image is None or not image.file or not image.file.name:
        raise Http404("no image")
    try:
        data = read_media(image.file.name)
    except FileNotFoundError:
        raise Http404("no image") from None
    response = HttpResponse(data, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    return response
