"""Reads about studies for researchers: scoping (annotation.roles.studies_for) and overview counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import Http404

from annotation.models import (
    Axis,
    Candidate,
    Comparison,
    ComparisonSet,
    NewStudyRun,
    Page,
    Predicate,
    Study,
    System,
)
from annotation.roles import is_admin, studies_for

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


def study_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Study]:
    """The studies a user may manage, by slug."""
    return studies_for(user).order_by("slug")


def study_get_for_user(*, user: AbstractBaseUser | AnonymousUser, slug: str) -> Study:
    """A study the user may manage; Http404 otherwise (other researchers' studies do not exist for them)."""
    study = studies_for(user).filter(slug=slug).first()
    if study is None:
        raise Http404("no such study")
    return study


def new_study_run_for_user(*, user: AbstractBaseUser | AnonymousUser, token: str) -> NewStudyRun:
    """An upload's run, for the researcher who uploaded it (or an admin); Http404 for anyone else."""
    run = NewStudyRun.objects.select_related("study").filter(token=token).first()
    if run is None or not (is_admin(user) or (run.created_by_id is not None and run.created_by_id == user.pk)):
        raise Http404("no such upload")
    return run


@dataclass(frozen=True)
class StudyOverview:
    """Counts for the researcher's study page (docs/protocol.md "The study model" entities)."""

    pages: int
    systems: int
    candidates: int
    failed_renders: int
    comparisons: int
    comparisons_by_set: dict[str, int]
    pages_with_media: int
    pages_with_targets: int
    axes: list[Axis]
    predicates: int = 0
    candidates_with_media: int = 0
    # Pages whose reference has no media regions while a candidate has some, in a study that
    # neutralizes: their reference shows real media beside boxes (decision 0060).
    pages_media_unequal: int = 0


def study_overview(*, study: Study) -> StudyOverview:
    candidates = Candidate.objects.filter(page__study=study).aggregate(
        total=Count("id"), failed=Count("id", filter=Q(rendered=False)), with_media=Count("id", filter=~Q(media=[]))
    )
    by_set = dict(
        Comparison.objects.filter(study=study).values_list("set").annotate(n=Count("id")).values_list("set", "n")
    )
    pages = Page.objects.filter(study=study)
    return StudyOverview(
        pages=pages.count(),
        systems=System.objects.filter(study=study).count(),
        candidates=candidates["total"],
        failed_renders=candidates["failed"],
        comparisons=sum(by_set.values()),
        comparisons_by_set={s.value: by_set.get(s.value, 0) for s in ComparisonSet},
        pages_with_media=pages.exclude(media=[]).count(),
        candidates_with_media=candidates["with_media"],
        pages_media_unequal=(
            pages.filter(media=[])
            .filter(Exists(Candidate.objects.filter(page=OuterRef("pk")).exclude(media=[])))
            .count()
            if study.neutralize_media and candidates["with_media"]
            else 0
        ),
        pages_with_targets=pages.exclude(targets=[]).count(),
        axes=list(study.axes.order_by("position")),
        predicates=Predicate.objects.filter(study=study).count(),
    )


@dataclass(frozen=True)
class RenderFailureRate:
    """One system's failed renders (docs/protocol.md "Failed renders in the leaderboard"): of its
    ``outputs`` (candidates), ``failed`` did not render."""

    system: str
    name: str
    outputs: int
    failed: int

    @property
    def rate(self) -> float:
        return self.failed / self.outputs if self.outputs else 0.0

    def to_json(self) -> dict[str, object]:
        return {"system": self.system, "name": self.name, "outputs": self.outputs, "failed": self.failed, "rate": self.rate}


def render_failure_rates(*, study: Study) -> list[RenderFailureRate]:
    """Per system of the study (in its order), its candidates and how many failed to render; one query."""
    return [
        RenderFailureRate(
            system=row.external_id,
            name=row.name,
            outputs=getattr(row, "n_candidates", 0),
            failed=getattr(row, "n_failed", 0),
        )
        for row in study_systems(study=study)
    ]


@dataclass(frozen=True)
class FailedRender:
    """One candidate that failed to render, and why (the renderer's one line; empty from a bundle without it)."""

    system: str
    page: str
    reason: str


def study_failed_renders(*, study: Study, limit: int = 100) -> list[FailedRender]:
    """The study's failed renders with their reasons, in page and system order (at most ``limit``)."""
    rows = (
        Candidate.objects.filter(page__study=study, rendered=False)
        .order_by("page__position", "page__external_id", "system__position", "system__external_id")
        .values_list("system__external_id", "page__external_id", "render_reason")[:limit]
    )
    return [FailedRender(system=system, page=page, reason=reason) for system, page, reason in rows]


def study_systems(*, study: Study) -> QuerySet[System]:
    return System.objects.filter(study=study).annotate(
        n_candidates=Count("candidates"),
        n_failed=Count("candidates", filter=Q(candidates__rendered=False)),
    ).order_by("position", "external_id")


def study_pages(*, study: Study) -> QuerySet[Page]:
    return Page.objects.filter(study=study).annotate(n_candidates=Count("candidates")).order_by("position", "external_id")


def study_comparisons(*, study: Study, set: str | None = None) -> QuerySet[Comparison]:
    comparisons = Comparison.objects.filter(study=study).select_related(
        "page", "candidate_a__system", "candidate_b__system"
    )
    if set:
        comparisons = comparisons.filter(set=set)
    return comparisons.order_by("id")


@dataclass(frozen=True)
class OriginalImages:
    """What one system's uploads were (researchers only; raters and judges see display variants)."""

    system: str
    images: int
    sizes: list[str]
    modes: list[str]
    shown_width: list[int]


def study_original_images(*, study: Study) -> list[OriginalImages]:
    """Per system: the original pixel sizes and colour modes of its candidates, and the shown widths."""
    rows = (
        Candidate.objects.filter(page__study=study, rendered=True)
        .order_by()
        .values_list(
            "system__external_id", "original_image__width", "original_image__height", "original_image__mode",
            "image__width", "image__height", "image__mode",
        )
    )
    by_system: dict[str, list[tuple[int, int, str, int]]] = {}
    for system, ow, oh, om, w, h, m in rows:
        if ow is None:  # never converted (see the blind_images command): the shown image is the original
            ow, oh, om = w, h, m
        if ow is None:
            continue
        by_system.setdefault(system, []).append((ow, oh, om or "?", w))
    out = []
    for system in sorted(by_system):
        images = by_system[system]
        out.append(
            OriginalImages(
                system=system,
                images=len(images),
                sizes=sorted({f"{w}×{h}" for w, h, _, _ in images})[:5],
                modes=sorted({m for _, _, m, _ in images}),
                shown_width=sorted({s for *_, s in images})[:5],
            )
        )
    return out
