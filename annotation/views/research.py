"""Researcher pages for the human schedule: progress (htmx polling), blocks, rater quality, actions.

Researchers of a study (and admins) see these pages; the actions that change the schedule —
scheduling, voiding, reopening a slot, assigning a named rater — are admin-only (SPEC §1).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.errors import ArbiterError
from annotation.models import Assignment, Block, Study
from annotation.roles import RATER, is_admin, studies_for
from annotation.selectors.progress import block_assignments, rater_quality, study_progress
from annotation.services.raters import assignment_void, rater_assign, slot_reopen, study_link_url
from annotation.services.scheduling import (
    blocks_schedule,
    default_rater_targets,
    schedulable_count,
    schedule_csv_text,
    unit_noun,
)
from annotation.views.rater import serving_origin

PAGE_SIZE = 50


def _study(request: HttpRequest, slug: str) -> Study:
    return get_object_or_404(studies_for(request.user), slug=slug)


def _admin_only(request: HttpRequest) -> None:
    if not is_admin(request.user):
        raise PermissionDenied("only an admin can change the schedule")


def _render(request: HttpRequest, template: str, context: dict[str, Any], partial: str | None = None) -> HttpResponse:
    if partial and getattr(request, "htmx", False):
        template = f"{template}#{partial}"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


@login_required
@require_GET
def study_raters(request: HttpRequest, slug: str) -> HttpResponse:
    """A study's schedule: per-block progress (polled), the study link, scheduling for admins."""
    study = _study(request, slug)
    progress = study_progress(study)
    context = {
        "study": study,
        "progress": progress,
        "totals": progress.totals,
        "link": study_link_url(study=study, origin=serving_origin(request)),
        "can_manage": is_admin(request.user),
        "eligible": schedulable_count(study) if not progress.blocks else None,
        "unit_noun": unit_noun(study),
    }
    return _render(request, "annotation/research/study.html", context, partial="progress")


@login_required
@require_GET
def block_detail(request: HttpRequest, slug: str, position: int) -> HttpResponse:
    study = _study(request, slug)
    block = get_object_or_404(Block, study=study, position=position)
    assignments = Paginator(block_assignments(block), PAGE_SIZE).get_page(request.GET.get("page"))
    progress = study_progress(study, block=block).blocks
    can_manage = is_admin(request.user)
    # Only admins assign named raters, so only they see the platform's rater accounts.
    raters = (
        get_user_model().objects.filter(groups__name=RATER, is_active=True).order_by("username")[:500]
        if can_manage
        else []
    )
    context = {
        "study": study, "sblock": block, "row": progress[0] if progress else None,
        "assignments": assignments, "can_manage": can_manage, "rater_users": raters,
    }
    return _render(request, "annotation/research/block.html", context, partial="assignments")


@login_required
@require_GET
def quality(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(request, slug)
    block = None
    raw_block = request.GET.get("block", "")
    if raw_block:
        if not raw_block.isdigit():
            raise Http404("no such block")
        block = get_object_or_404(Block, study=study, position=int(raw_block))
    rows = Paginator(rater_quality(study, block=block), PAGE_SIZE).get_page(request.GET.get("page"))
    blocks = Block.objects.filter(study=study).order_by("position")
    return render(request, "annotation/research/quality.html",
                  {"study": study, "rows": rows, "sblock": block, "blocks": blocks})


@login_required
@require_POST
def schedule(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(request, slug)
    _admin_only(request)
    try:
        blocks = int(request.POST.get("blocks", 8))
        raters = [int(x) for x in request.POST.get("raters", "").split(",") if x.strip()]
        checks = request.POST.get("checks", "").strip()
        blocks_schedule(
            study=study, blocks=blocks, block_size=int(request.POST.get("block_size", 234)),
            repeats=int(request.POST.get("repeats", 6)), min_gap=int(request.POST.get("min_gap", 20)),
            raters=raters or default_rater_targets(study, blocks), seed=int(request.POST.get("seed") or study.seed),
            checks=int(checks) if checks else None, actor=request.user,
        )
    except ValueError:
        messages.error(request, "Blocks, block size, repeats, min gap and seed are integers; raters is a list like 5,5,4.")
    except ArbiterError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Schedule created: every assignment is planned and waiting for raters.")
    return redirect(reverse("research:study", args=[study.slug]))


@login_required
@require_GET
def schedule_csv(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(request, slug)
    response = HttpResponse(schedule_csv_text(study=study), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-schedule.csv"'
    return response


def _assignment(request: HttpRequest, pk: int) -> Assignment:
    assignment = get_object_or_404(
        Assignment.objects.select_related("block__study"), pk=pk, block__study__in=studies_for(request.user)
    )
    _admin_only(request)
    return assignment


def _back(assignment: Assignment) -> HttpResponse:
    return redirect(reverse("research:block", args=[assignment.block.study.slug, assignment.block.position]))


@login_required
@require_POST
def void(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment(request, pk)
    try:
        assignment_void(assignment=assignment, actor=request.user, reason=request.POST.get("reason", ""))
        messages.success(request, f"Slot {assignment.slot} voided: its votes are kept but excluded from analysis.")
    except ArbiterError as exc:
        messages.error(request, str(exc))
    return _back(assignment)


@login_required
@require_POST
def reopen(request: HttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment(request, pk)
    try:
        slot_reopen(assignment=assignment, actor=request.user)
        messages.success(request, f"Slot {assignment.slot} reopened with the same plan; the next participant can take it.")
    except ArbiterError as exc:
        messages.error(request, str(exc))
    return _back(assignment)


@login_required
@require_POST
def assign(request: HttpRequest, slug: str, position: int) -> HttpResponse:
    study = _study(request, slug)
    _admin_only(request)
    block = get_object_or_404(Block, study=study, position=position)
    user = get_user_model().objects.filter(pk=request.POST.get("user") or 0, groups__name=RATER).first()
    if user is None:
        messages.error(request, "Choose a rater account (users in the rater group).")
    else:
        try:
            a = rater_assign(block=block, user=user, actor=request.user)
            messages.success(request, f"{user.get_username()} now has slot {a.slot} of {block.name}.")
        except ArbiterError as exc:
            messages.error(request, str(exc))
    return redirect(reverse("research:block", args=[study.slug, block.position]))

