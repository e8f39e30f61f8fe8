"""``import_study --update``: replace candidates of an existing study (paper B.5 candidate versions).

The bundle is a whole ``study.json`` with its images (an ``export_study`` of the study with some
candidate images replaced, typically). It is validated like every import, whole and before
anything is written, and then it must equal the study in everything but candidates: kind, title,
instructions, judge prompt, settings, axes, systems (ids, names, order), pages (ids, order,
reference image pixels, targets, media, meta), the set of (page, system) candidates, and the
comparisons (every bundle comparison unchanged; a stored one may be absent only when it is a
``deployment`` comparison, as ``make_schedule`` adds them after the import). The first
difference is refused with one line naming it. Pair identities, quotas and orientations therefore
stay fixed; coefficient sets are not touched.

A candidate whose image pixels, ``rendered`` flag or media regions differ becomes a new version:
its earlier version is kept as a :class:`~annotation.models.CandidateVersion` row, the candidate's
fields take the new values and ``Candidate.version`` goes up by one. ``version_date`` and
``version_note`` of the bundle's candidate are recorded on the new version.

The write is one transaction that first sends ``annotation.signals.candidates_replacing`` (the
judges app refuses while judge calls run on a touched comparison) and then
``candidates_replaced`` (the judges app marks the touched comparisons' outputs superseded).
This app imports no other app.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.errors import NotFound, ValidationFailed
from annotation.images import staged_images
from annotation.models import (
    AuditEvent,
    Candidate,
    CandidateBlocks,
    CandidateVersion,
    Comparison,
    ComparisonSet,
    ObjectiveScore,
    Study,
)
from annotation.roles import studies_for
from annotation.services.bundles.exporting import study_crowd_settings, study_settings
from annotation.services.bundles.images import ImageInfo
from annotation.services.bundles.importing import StagedImages, _stage_images, _stored_images
from annotation.services.bundles.opening import open_bundle, study_spec_from_bundle
from annotation.services.bundles.reference_format import STUDY_JSON, CandidateSpec, StudySpec
from annotation.services.bundles.upload import with_uploaded_bundle
from annotation.services.trial_screens import trial_screens_forget
from annotation.signals import candidates_replaced, candidates_replacing

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from django.core.files.uploadedfile import UploadedFile

ONLY_CANDIDATES = "an update may change candidates only"


@dataclass(frozen=True)
class StudyUpdate:
    """What ``import_study --update`` did."""

    study: Study
    # (page id, system id, new version number) of every replaced candidate.
    replaced: tuple[tuple[str, str, int], ...]
    comparisons_touched: int
    human_comparisons_touched: int
    # What the apps built on annotation did, e.g. {"outputs_superseded": 40}.
    effects: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [
            f"{self.study.slug}: {len(self.replaced)} candidate(s) replaced",
            f"{self.comparisons_touched} comparison(s) touched ({self.human_comparisons_touched} of the human study)",
        ]
        parts += [f"{n} {name.replace('_', ' ')}" for name, n in sorted(self.effects.items())]
        return ", ".join(parts)


def _refuse(where: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"{message}; {ONLY_CANDIDATES}", where=f"{STUDY_JSON} {where}")


def _check_unchanged(spec: StudySpec, study: Study) -> dict[tuple[str, str], Candidate]:
    """Refuse the first difference outside candidates; the stored candidates by (page, system)."""
    if study.kind != spec.kind:
        raise _refuse("$.kind", f"kind {spec.kind!r} differs from the study's {study.kind!r}")
    for key, current in (("title", study.title), ("instructions_md", study.instructions_md), ("judge_prompt", study.judge_prompt)):
        if getattr(spec, key) != current:
            raise _refuse(f"$.{key}", "differs from the study's")
    stored_settings = study_settings(study)
    for key, value in spec.settings.items():
        if stored_settings.get(key) != value:
            raise _refuse(f"$.settings.{key}", f"{value!r} differs from the study's {stored_settings.get(key)!r}")
    # Crowd settings: only those the bundle gives are compared (they change on the settings page
    # or with PATCH /api/studies/<slug>/, so a bundle that leaves them out keeps the study's).
    stored_crowd = study_crowd_settings(study)
    for key, value in spec.crowd.items():
        if stored_crowd.get(key) != value:
            raise ValidationFailed(
                f"{value!r} differs from the study's {stored_crowd.get(key)!r}; {ONLY_CANDIDATES} "
                "(change crowd settings on the settings page or with PATCH /api/studies/<slug>/)",
                where=f"{STUDY_JSON} $.crowd.{key}",
            )

    _check_same_list(
        "axes", "axis",
        [(a.axis_id, a.scope, a.description) for a in study.axes.order_by("position")],
        [(a.id, a.scope, a.description) for a in spec.axes],
    )
    _check_same_list(
        "systems", "system",
        [(s.external_id, s.name) for s in study.systems.order_by("position", "external_id")],
        [(s.id, s.name) for s in spec.systems],
    )
    _check_pages(spec, study)
    stored = _check_candidates(spec, study)
    _check_comparisons(spec, study)
    return stored


def _check_same_list(key: str, what: str, old: list[tuple[str, ...]], new: list[tuple[str, ...]]) -> None:
    if len(old) != len(new):
        raise _refuse(f"$.{key}", f"{len(new)} {key}, the study has {len(old)}")
    for i, (before, after) in enumerate(zip(old, new, strict=True)):
        if before != after:
            raise _refuse(f"$.{key}[{i}]", f"{what} {after[0]!r} differs from the study's {what} {before[0]!r}")


def _check_pages(spec: StudySpec, study: Study) -> None:
    pages = list(study.pages.order_by("position", "external_id"))
    if len(pages) != len(spec.pages):
        raise _refuse("$.pages", f"{len(spec.pages)} pages, the study has {len(pages)}")
    for i, (page, new_page) in enumerate(zip(pages, spec.pages, strict=True)):
        if page.external_id != new_page.id:
            raise _refuse(f"$.pages[{i}].id", f"page {new_page.id!r} differs from the study's page {page.external_id!r}")
        for name, old_value, new_value in (
            ("targets", page.targets, [t.to_json() for t in new_page.targets]),
            ("media", page.media, [m.to_json() for m in new_page.media]),
            ("blocks", page.blocks, [b.to_json() for b in new_page.blocks]),
            ("meta", page.meta, new_page.meta),
            ("requirements", page.requirements, new_page.requirements),
        ):
            if old_value != new_value:
                raise _refuse(f"$.pages[{i}].{name}", f"page {page.external_id!r}: {name} differ from the study's")


def _check_candidates(spec: StudySpec, study: Study) -> dict[tuple[str, str], Candidate]:
    stored = {
        (c.page.external_id, c.system.external_id): c
        for c in Candidate.objects.filter(page__study=study).select_related("page", "system", "image", "original_image")
    }
    for c in spec.candidates:
        if (c.page, c.system) not in stored:
            raise _refuse(
                c.where, f"a new candidate for page {c.page!r} and system {c.system!r}; the study has none to replace"
            )
    missing = sorted(set(stored) - {(c.page, c.system) for c in spec.candidates})
    if missing:
        page_id, system_id = missing[0]
        raise _refuse("$.candidates", f"the candidate of page {page_id!r} and system {system_id!r} is missing")
    return stored


def _check_comparisons(spec: StudySpec, study: Study) -> None:
    comparisons = {
        c.external_id: c
        for c in Comparison.objects.filter(study=study).select_related("page", "candidate_a__system", "candidate_b__system")
    }
    listed: set[str] = set()
    for i, new in enumerate(spec.comparisons):
        old = comparisons.get(new.id)
        if old is None:
            raise _refuse(f"$.comparisons[{i}]", f"comparison {new.id!r} is not one of the study's")
        old_shape = (old.page.external_id, old.candidate_a.system.external_id, old.candidate_b.system.external_id, old.set)
        if old_shape != (new.page, new.a, new.b, new.set):
            raise _refuse(f"$.comparisons[{i}]", f"comparison {new.id!r} differs from the study's (page, a, b, set)")
        listed.add(new.id)
    for comparison_id in sorted(set(comparisons) - listed):
        if comparisons[comparison_id].set != ComparisonSet.DEPLOYMENT:
            raise _refuse("$.comparisons", f"comparison {comparison_id!r} of the study is missing")


def _candidate_changed(candidate: Candidate, spec: CandidateSpec, images: StagedImages) -> bool:
    new_sha = images.originals[spec.image].sha256 if spec.image is not None else None
    upload = candidate.original_image or candidate.image
    old_sha = upload.sha256 if upload is not None else None
    return (
        new_sha != old_sha
        or candidate.rendered != spec.rendered
        or candidate.media != [m.to_json() for m in spec.media]
    )


def _study_for_update(slug: str, user: AbstractBaseUser | None) -> Study:
    # Another researcher's study does not exist for this user (the command line sees every study).
    studies = Study.objects.all() if user is None else studies_for(user)
    study = studies.filter(slug=slug).first()
    if study is None:
        raise NotFound(f"{STUDY_JSON} $.slug: no study {slug!r} to update (import it without --update first)")
    return study


def study_update_bundle(
    *, path: Path, user: AbstractBaseUser | AnonymousUser | None = None, label: str | None = None
) -> StudyUpdate:
    """Replace the candidates that changed in the bundle (paper B.5). All or nothing."""
    if user is not None and not user.is_authenticated:
        user = None
    with open_bundle(Path(path), label=label) as bundle:
        spec = study_spec_from_bundle(bundle)
        if not isinstance(spec, StudySpec):
            raise ValidationFailed(
                f"--update takes pairwise_reference bundles; kind {spec.kind!r} has no candidate versions",
                where=f"{STUDY_JSON} $.kind",
            )
        study = _study_for_update(spec.slug, user)  # type: ignore[arg-type]
        stored = _check_unchanged(spec, study)
        with staged_images() as stage:
            images = _stage_images(bundle, spec, stage)
            pages = study.pages.select_related("image", "original_image").order_by("position", "external_id")
            for i, (page, new_page) in enumerate(zip(pages, spec.pages, strict=True)):
                # The upload is compared: ``image`` is the display variant raters see (SECURITY.md row 16).
                reference = page.original_image or page.image
                if reference is None or reference.sha256 != images.originals[new_page.image].sha256:
                    raise _refuse(f"$.pages[{i}].image", f"page {page.external_id!r}: the reference image differs")
            changed = [c for c in spec.candidates if _candidate_changed(stored[(c.page, c.system)], c, images)]
            if not changed:
                raise ValidationFailed(
                    "no candidate differs from the study's (image pixels, rendered, media); nothing to update",
                    where=f"{STUDY_JSON} $.candidates",
                )
            with transaction.atomic():
                result = _write_update(study, spec, changed, stored, images, user)  # type: ignore[arg-type]
                stage.publish()
    return result


def _write_update(
    study: Study,
    spec: StudySpec,
    changed: list[CandidateSpec],
    stored: dict[tuple[str, str], Candidate],
    images: StagedImages,
    user: AbstractBaseUser | None,
) -> StudyUpdate:
    Study.objects.select_for_update().filter(pk=study.pk).first()
    ids = [stored[(c.page, c.system)].pk for c in changed]
    # Re-read under lock: a concurrent update of the same candidates waits, then sees the new version.
    candidates = {c.pk: c for c in Candidate.objects.select_for_update().filter(pk__in=ids)}
    touched = list(
        Comparison.objects.filter(Q(candidate_a_id__in=ids) | Q(candidate_b_id__in=ids))
        .order_by("pk")
        .values_list("pk", "set")
    )
    comparison_ids = [pk for pk, _ in touched]
    candidates_replacing.send(sender=Study, study=study, comparison_ids=comparison_ids, candidate_ids=ids)

    def shown(c: CandidateSpec) -> tuple[ImageInfo | None, ImageInfo | None, ImageInfo | None]:
        """The upload, the display image and the neutralized display image of ``c``."""
        neutral = images.variant(c.image, c.page, c.media) if c.media else None
        return images.original(c.image), images.variant(c.image, c.page), neutral

    rows = _stored_images(info for c in changed for info in shown(c) if info is not None)
    now = timezone.now()
    have_rows = set(CandidateVersion.objects.filter(candidate_id__in=ids).values_list("candidate_id", "number"))
    versions: list[CandidateVersion] = []
    replaced: list[tuple[str, str, int]] = []
    for c in changed:
        candidate = candidates[stored[(c.page, c.system)].pk]
        if (candidate.pk, candidate.version) not in have_rows:
            # The version in force so far, kept before it is replaced (version 1: as imported).
            versions.append(
                CandidateVersion(
                    candidate=candidate,
                    number=candidate.version,
                    image_id=candidate.image_id,
                    original_image_id=candidate.original_image_id,
                    neutralized_image_id=candidate.neutralized_image_id,
                    rendered=candidate.rendered,
                    media=candidate.media,
                    activated_at=study.created_at if candidate.version == 1 else now,
                )
            )
        original, display, neutral_info = (rows[i.sha256] if i is not None else None for i in shown(c))
        candidate.version += 1
        candidate.image_id = display
        candidate.original_image_id = original
        candidate.neutralized_image_id = neutral_info
        candidate.rendered = c.rendered
        candidate.render_reason = c.render_reason
        candidate.media = [m.to_json() for m in c.media]
        candidate.blocks = [b.to_json() for b in c.blocks]
        candidate.rule = c.rule  # the new render's rule score (docs/protocol.md "AesCode's rule score")
        candidate.save(
            update_fields=[
                "version", "image", "original_image", "neutralized_image", "rendered", "render_reason", "media", "blocks",
                "rule",
            ]
        )
        # The new render's blocks for the objective scores (docs/protocol.md "Ground truth"); its
        # earlier score goes, and the next refresh scores the new version.
        CandidateBlocks.objects.filter(candidate=candidate).delete()
        ObjectiveScore.objects.filter(candidate=candidate).delete()
        if c.dom_blocks is not None:
            CandidateBlocks.objects.create(candidate=candidate, blocks=c.dom_blocks)
        versions.append(
            CandidateVersion(
                candidate=candidate,
                number=candidate.version,
                image_id=display,
                original_image_id=original,
                neutralized_image_id=neutral_info,
                rendered=c.rendered,
                media=candidate.media,
                date=datetime.date.fromisoformat(c.version_date) if c.version_date else None,
                note=c.version_note,
                activated_at=now,
            )
        )
        replaced.append((c.page, c.system, candidate.version))
    CandidateVersion.objects.bulk_create(versions, batch_size=1000)

    effects: dict[str, int] = {}
    for _, response in candidates_replaced.send(
        sender=Study, study=study, comparison_ids=comparison_ids, candidate_ids=ids
    ):
        if isinstance(response, dict):
            for name, n in response.items():
                effects[name] = effects.get(name, 0) + int(n)
    # The trials not shown yet show the new versions: their stored screens are made again (decision 0079).
    trial_screens_forget(study.pk)
    result = StudyUpdate(
        study=study,
        replaced=tuple(replaced),
        comparisons_touched=len(touched),
        human_comparisons_touched=sum(1 for _, s in touched if s == ComparisonSet.HUMAN),
        effects=effects,
    )
    AuditEvent.objects.create(
        actor=user,  # type: ignore[misc]
        actor_label=user.get_username() if user is not None else "command line",
        action="study.update_candidates",
        study=study,
        target=study.slug,
        details={
            "replaced": [f"{page}/{system}@v{version}" for page, system, version in replaced][:1000],
            "n_replaced": len(replaced),
            "comparisons_touched": result.comparisons_touched,
            "human_comparisons_touched": result.human_comparisons_touched,
            **effects,
        },
    )
    return result


def study_update_upload(*, upload: UploadedFile, user: AbstractBaseUser | AnonymousUser | None = None) -> StudyUpdate:
    """``study_update_bundle`` of an uploaded ``.zip`` (the upload page's "update existing study")."""
    return with_uploaded_bundle(upload, lambda path, name: study_update_bundle(path=path, user=user, label=name))
