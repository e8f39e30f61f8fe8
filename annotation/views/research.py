"""Researcher pages for the human schedule: progress (htmx polling), blocks, rater quality, actions.

Researchers of a study (and admins) see these pages; the actions that change the schedule —
scheduling, voiding, reopening a slot, assigning a named rater — are admin-only
(docs/protocol.md "Who does what").
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
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.errors import ArbiterError
from annotation.kinds import design_of
from annotation.models import RATER_PAGE_DEFAULTS, Assignment, Block, Vote, rater_page_options
from annotation.roles import RATER, is_admin, studies_for
from annotation.selectors.allocation import allocation_context
from annotation.selectors.participants import participants_csv_text
from annotation.selectors.progress import block_assignments, quality_rules, rater_quality, study_progress
from annotation.selectors.studies import study_get_for_user
from annotation.services.accounts import rater_account_create
from annotation.services.adaptive_allocation import study_schedule
from annotation.services.participants import assignment_void, rater_assign, slot_reopen, study_link_url
from annotation.services.scheduling import (
    default_rater_targets,
    schedulable_count,
    schedule_command,
    schedule_csv_text,
    schedule_proposal,
    unit_noun,
)
from annotation.services.studies import study_settings_update
from annotation.views.links import serving_origin

PAGE_SIZE = 50


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
    study = study_get_for_user(user=request.user, slug=slug)
    progress = study_progress(study)
    context = {
        "study": study,
        "progress": progress,
        "totals": progress.totals,
        "link": study_link_url(study=study, origin=serving_origin(request)),
        "can_manage": is_admin(request.user),
        "eligible": schedulable_count(study) if not progress.blocks else None,
        "unit_noun": unit_noun(study),
        "design": design_of(study),
        "can_edit": True,  # researchers of the study edit its crowd settings (like its texts)
        "blocks": [row.block for row in progress.blocks],
        **allocation_context(study),
        "rater_page": rater_page_options(study),
    }
    eligible = context["eligible"]
    if isinstance(eligible, int):
        context["proposal"] = schedule_proposal(study, eligible)
        context["schedule_command"] = schedule_command(study, context["proposal"])
    return _render(request, "annotation/research/study.html", context, partial="progress")


@login_required
@require_GET
def block_detail(request: HttpRequest, slug: str, position: int) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
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
    study = study_get_for_user(user=request.user, slug=slug)
    block = None
    raw_block = request.GET.get("block", "")
    if raw_block:
        if not raw_block.isdigit():
            raise Http404("no such block")
        block = get_object_or_404(Block, study=study, position=int(raw_block))
    rows = Paginator(rater_quality(study, block=block), PAGE_SIZE).get_page(request.GET.get("page"))
    blocks = Block.objects.filter(study=study).order_by("position")
    rules = quality_rules(study)
    rule_fields = [
        {"name": name, "label": label, "value": "" if rules[name] is None else rules[name], "hint": hint}
        for name, label, hint in REFERENCE_RULE_FIELDS
    ] if design_of(study).has_reference else []
    return render(request, "annotation/research/quality.html",
                  {"study": study, "design": design_of(study), "rows": rows, "sblock": block, "blocks": blocks,
                   "rule_fields": rule_fields})


# The exclusion rules of the reference kind, as the quality page's settings form shows them.
REFERENCE_RULE_FIELDS = (
    ("min_median_response_ms", "Too fast: median response below (ms)", "empty: off"),
    ("straightline_share", "Straight-lining: one answer on at least this share", "0–1; empty: off"),
    ("straightline_min_trials", "… counted from this many answers", "a whole number"),
    ("min_repeat_agreement", "Hidden repeats: agreement below", "0–1; empty: off"),
    ("max_position_bias", "Position bias: left share further from 0.5 than", "0–0.5; empty: off"),
    ("position_min_trials", "… counted from this many A/B answers", "a whole number"),
)


# The schedule form's own words for the command-line flags and fields a scheduling error names.
SCHEDULE_FORM_WORDS = {
    "blocks": "Blocks", "block_size": "Block size", "repeats": "Hidden repeats per assignment",
    "min_gap": "Minimum gap", "raters": "Raters per block", "checks": "Attention checks per assignment",
    "gold": "Gold trials per assignment", "allocation": "Allocation", "target_k": "Adaptive: top k", "seed": "Seed",
}


def schedule_error_words(exc: ArbiterError) -> str:
    """A scheduling error as the form says it: "Block size" rather than ``--block-size``."""
    field = getattr(exc, "field", "")
    message = str(exc)
    if field and field in SCHEDULE_FORM_WORDS:
        message = message.replace(f"field '{field}': ", f"{SCHEDULE_FORM_WORDS[field]}: ", 1)
    for name, words in SCHEDULE_FORM_WORDS.items():
        message = message.replace(f"--{name.replace('_', '-')}", f"“{words}”")
    return message


@login_required
@require_POST
def schedule(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    _admin_only(request)
    try:
        blocks = int(request.POST.get("blocks", 8))
        raters = [int(x) for x in request.POST.get("raters", "").split(",") if x.strip()]
        checks = request.POST.get("checks", "").strip()
        made = study_schedule(
            study=study, blocks=blocks, block_size=int(request.POST.get("block_size", 234)),
            repeats=int(request.POST.get("repeats", 6)), min_gap=int(request.POST.get("min_gap", 20)),
            raters=raters or default_rater_targets(study, blocks), seed=int(request.POST.get("seed") or study.seed),
            checks=int(checks) if checks else None, gold=int(request.POST.get("gold") or 0),
            allocation=request.POST.get("allocation") or "uniform",
            target_k=int(request.POST.get("target_k") or 3), actor=request.user,
        )
    except ValueError:
        messages.error(
            request,
            "Blocks, block size, repeats, min gap, gold trials, top k and seed are integers; raters is a list like 5,5,4.",
        )
    except ArbiterError as exc:
        messages.error(request, schedule_error_words(exc))
    else:
        n_blocks = len(made)
        messages.success(
            request, f"Schedule created: {n_blocks} block{'s' if n_blocks != 1 else ''}, every assignment "
            "planned and waiting for raters. Share the participant link below.",
        )
    return redirect(reverse("research:study", args=[study.slug]))


@login_required
@require_GET
def schedule_csv(request: HttpRequest, slug: str) -> HttpResponse:
    study = study_get_for_user(user=request.user, slug=slug)
    return _csv_download(schedule_csv_text(study=study), f"{study.slug}-schedule.csv")


def _csv_download(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
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
@require_http_methods(["GET", "POST"])
def void(request: HttpRequest, pk: int) -> HttpResponse:
    """Void an assignment: a confirmation page that asks for the reason, then the void itself."""
    assignment = _assignment(request, pk)
    reason = request.POST.get("reason", "").strip() if request.method == "POST" else ""
    error = ""
    if request.method == "POST":
        if not reason:
            error = "Give a reason for voiding (it is kept in the audit log)."
        else:
            try:
                assignment_void(assignment=assignment, actor=request.user, reason=reason)
                messages.success(request, f"Slot {assignment.slot} voided: its votes are kept but excluded from analysis.")
            except ArbiterError as exc:
                messages.error(request, str(exc))
            return _back(assignment)
    answered = Vote.objects.filter(trial__assignment=assignment).count()
    return render(request, "annotation/research/void_confirm.html", {
        "study": assignment.block.study, "assignment": assignment, "answered": answered, "error": error,
        "reason": reason,
    }, status=400 if error else 200)


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
    study = study_get_for_user(user=request.user, slug=slug)
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


# --- study settings, rater accounts and participants from the study pages (issue 17) -------------

CROWD_TEXT_FIELDS = ("completion_code", "completion_url", "screened_out_url", "screened_out_code")


@login_required
@require_POST
def crowd_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """Open/close the study and edit the crowd settings (audited by the settings service)."""
    study = study_get_for_user(user=request.user, slug=slug)
    changes: dict[str, Any] = {name: request.POST.get(name, "") for name in CROWD_TEXT_FIELDS}
    changes["end_comment"] = request.POST.get("end_comment") == "on"
    changes["accepting_participants"] = request.POST.get("accepting_participants") == "on"
    if request.POST.get("rater_page") == "1":  # the form shows the rater-page settings (issue 30)
        changes.update({name: request.POST.get(name) == "on" for name in RATER_PAGE_DEFAULTS})
    raw_break = request.POST.get("break_every", "").strip()
    try:
        changes["break_every"] = int(raw_break) if raw_break else 0
    except ValueError:
        # Not a number: the text goes to the one validator, whose message the API and bundle give.
        changes["break_every"] = raw_break
    try:
        study_settings_update(study=study, user=request.user, **changes)
    except ArbiterError as exc:
        messages.error(request, str(exc))
    else:
        state = "open to participants" if study.accepting_participants else "closed to new participants"
        messages.success(request, f"Settings saved; the study is {state}.")
    return redirect(reverse("research:study", args=[study.slug]))


@login_required
@require_POST
def rater_create(request: HttpRequest, slug: str) -> HttpResponse:
    """Create a rater account (admin), optionally with a place in a block; show its set-password link."""
    study = study_get_for_user(user=request.user, slug=slug)
    _admin_only(request)
    block = None
    raw_block = request.POST.get("block", "").strip()
    if raw_block:
        block = Block.objects.filter(study=study, position=int(raw_block) if raw_block.isdigit() else -1).first()
        if block is None:
            messages.error(request, "Choose one of this study's blocks (or none).")
            return redirect(reverse("research:study", args=[study.slug]))
    try:
        invite = rater_account_create(
            study=study, username=request.POST.get("username", ""), email=request.POST.get("email", ""),
            block=block, actor=request.user,
        )
    except ArbiterError as exc:
        messages.error(request, str(exc))
        return redirect(reverse("research:study", args=[study.slug]))
    placed = f" and given slot {invite.assignment.slot} of {block.name}" if invite.assignment and block else ""
    messages.success(
        request,
        f"Rater account {invite.user.get_username()} created{placed}. Send them this one-time link to choose "
        f"a password: {serving_origin(request)}{invite.set_password_path}",
    )
    return redirect(reverse("research:study", args=[study.slug]))


@login_required
@require_GET
def participants_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Participants with their crowd-platform ids (PROLIFIC_PID, STUDY_ID, SESSION_ID), codes and comments."""
    study = study_get_for_user(user=request.user, slug=slug)
    return _csv_download(participants_csv_text(study=study), f"{study.slug}-participants.csv")
