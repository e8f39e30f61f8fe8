"""Importing a study bundle whole or not at all (docs/protocol.md "Files").

:func:`study_import_bundle` opens the bundle and checks ``study.json`` (:mod:`.opening`), refuses a
slug in use, decodes, checks and re-encodes every image (``annotation.images.clean_image``, in
worker processes for big bundles; a bomb or a truncated file is refused), makes the
media-neutralized variants, stages the files, then writes all rows in one transaction and publishes
the staged files just before it commits. Any error leaves the database and the media folder as
they were.

``pairwise_reference`` bundles become a ``StudySpec``; ``pairwise``, ``checklist`` and ``rating``
bundles (docs/bundle-kinds.md) a ``QuestionnaireStudySpec``, written as brief → Page (text, no
image), item → Candidate, comparison → Comparison, predicate → Predicate.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.errors import ArbiterError, ValidationFailed
from annotation.images import (
    CleanImage,
    ImageStaging,
    display_width,
    display_width_of,
    probe_width,
    staged_images,
)
from annotation.models import (
    AuditEvent,
    Axis,
    Candidate,
    CandidateBlocks,
    CandidateVersion,
    Comparison,
    ComparisonSet,
    Page,
    PageTruth,
    Predicate,
    StoredImage,
    Study,
    SuppliedGold,
    System,
)
from annotation.progress import progress_step
from annotation.services.bulk_rows import JSONText, rows_insert
from annotation.services.bundles.images import (
    IMAGE_WORKERS,
    ImageInfo,
    ImageJob,
    JobResult,
    Variant,
    image_pool,
    media_key,
    process_images,
)
from annotation.services.bundles.opening import (
    Bundle,
    FolderBundle,
    exception_line,
    open_bundle,
    study_spec_from_bundle,
)
from annotation.services.bundles.questionnaire_format import QuestionnaireStudySpec
from annotation.services.bundles.reference_format import (
    STUDY_JSON,
    MediaRegion,
    StudySpec,
)
from annotation.services.crowd_settings import crowd_split

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


def _slug_taken(slug: str) -> ValidationFailed:
    return ValidationFailed(f"a study with slug {slug!r} already exists", where=f"{STUDY_JSON} $.slug")


def _check_slug_free(slug: str) -> None:
    if Study.objects.filter(slug=slug).exists():
        raise _slug_taken(slug)


@dataclass
class StagedImages:
    """The staged originals (by bundle path) and shown variants (by bundle path and variant), and
    the display width of every page (the reference's width; one study-wide width for kinds)."""

    originals: dict[str, ImageInfo]
    shown: dict[tuple[str, Variant], ImageInfo]
    page_width: dict[str, int]

    def original(self, path: str | None) -> ImageInfo | None:
        return None if path is None else self.originals[path]

    def variant(self, path: str | None, page: str, media: Iterable[MediaRegion] = ()) -> ImageInfo | None:
        """The shown image of ``path`` on ``page``: neutralized when ``media`` is given."""
        if path is None:
            return None
        return self.shown.get((path, (self.page_width[page], media_key(media))))


def _stage_images(bundle: Bundle, spec: StudySpec | QuestionnaireStudySpec, stage: ImageStaging) -> StagedImages:
    """Clean every image once per path and make its shown variants once per (path, width, regions).

    Files are written to the staging folder as they are made; only their hashes stay in memory.
    Other kinds' items have no media regions, hence no neutralized variants.
    """
    max_bytes = int(settings.ARBITER_IMAGE_MAX_BYTES)
    wanted: dict[str, set[Variant]] = {path: set() for path in spec.image_paths()}
    page_width: dict[str, int] = {}
    if isinstance(spec, StudySpec):
        probed: dict[str, int] = {}
        for page in spec.pages:
            if page.image not in probed:
                probed[page.image] = display_width(probe_width(bundle.read(page.image, limit=max_bytes), where=page.image))
            width = page_width[page.id] = probed[page.image]
            wanted[page.image].add((width, ()))
            if page.media:
                wanted[page.image].add((width, media_key(page.media)))
        for candidate in spec.candidates:
            if candidate.image is not None:
                width = page_width[candidate.page]
                wanted[candidate.image].add((width, ()))
                if candidate.media:
                    wanted[candidate.image].add((width, media_key(candidate.media)))
        for gold in spec.gold:  # shown like a candidate of its page
            wanted[gold.a].add((page_width[gold.page], ()))
            wanted[gold.b].add((page_width[gold.page], ()))
    else:
        widths = [probe_width(bundle.read(path, limit=max_bytes), where=path) for path in wanted]
        width = display_width_of(widths) if widths else 1
        page_width = {brief.id: width for brief in spec.briefs}
        for path in wanted:
            wanted[path].add((width, ()))

    originals: dict[str, ImageInfo] = {}
    shown: dict[tuple[str, Variant], ImageInfo] = {}
    # On local disk the workers read the bundle's files and write the staged PNGs themselves: only
    # paths go out and hashes come back (a ZIP's members are read here and sent as bytes).
    local = stage.local_folders()
    folders = (str(local[0]), str(local[1])) if local is not None and isinstance(bundle, FolderBundle) else None

    def staged(image: CleanImage | ImageInfo) -> ImageInfo:
        if isinstance(image, ImageInfo):
            stage.add_written(image.sha256, image.relative_path)
            return image
        stage.add(image)
        return ImageInfo.of(image)

    def collect(batch: list[str], future: Future[list[JobResult]]) -> None:
        for path, (clean, variants) in zip(batch, future.result(), strict=True):
            originals[path] = staged(clean)
            for key, variant in variants.items():
                shown[(path, key)] = staged(variant)
        progress_step("cleaning images", len(originals), len(wanted))

    def job(path: str, keys: set[Variant]) -> ImageJob:
        if folders is not None:
            return ImageJob(where=path, variants=tuple(sorted(keys)), path=bundle.file_path(path))
        return ImageJob(where=path, variants=tuple(sorted(keys)), data=bundle.read(path, limit=max_bytes))

    # Batches of a few images per task, a few tasks per worker in flight: the pipes carry less
    # pickling per image, and only a few ZIP members' bytes are in memory at once.
    per_task = 8 if folders is not None else 2
    window = 3 * IMAGE_WORKERS
    pending: list[tuple[list[str], Future[list[JobResult]]]] = []
    paths = list(wanted)
    progress_step("cleaning images", 0, len(wanted))
    with image_pool(len(wanted)) as pool:
        try:
            for start in range(0, len(paths), per_task):
                batch = paths[start : start + per_task]
                jobs = [job(path, wanted[path]) for path in batch]
                pending.append((batch, pool.submit(process_images, jobs, folders)))
                while len(pending) >= window:
                    collect(*pending.pop(0))
            while pending:
                collect(*pending.pop(0))
        except BaseException:
            for _, future in pending:
                future.cancel()
            raise
    return StagedImages(originals=originals, shown=shown, page_width=page_width)


def _stored_images(infos: Iterable[ImageInfo]) -> dict[str, int]:
    """StoredImage ids by hash, inserting the missing rows as plain rows (``bulk_rows``): model
    instances for the 10,989 images of 1,000 pages × 10 systems cost more than the inserts."""
    by_sha = {info.sha256: info for info in infos}
    shas = list(by_sha)
    existing: dict[str, int] = {}
    for start in range(0, len(shas), 500):
        existing.update(StoredImage.objects.filter(sha256__in=shas[start : start + 500]).values_list("sha256", "pk"))
    new = [
        (sha, info.relative_path, info.width, info.height, info.size_bytes, info.mode)
        for sha, info in by_sha.items()
        if sha not in existing
    ]
    # ignore_conflicts: another import may have stored the same pixels meanwhile.
    rows_insert(
        StoredImage, ("sha256", "file", "width", "height", "size_bytes", "mode"), new,
        constants={"created_at": timezone.now()}, ignore_conflicts=True,
    )
    missing = [row[0] for row in new]
    for start in range(0, len(missing), 500):
        existing.update(StoredImage.objects.filter(sha256__in=missing[start : start + 500]).values_list("sha256", "pk"))
    return existing


def _insert_comparisons(study: Study, rows: Iterable[tuple[str, int, int, int, str]]) -> None:
    """Comparisons ``(id, page pk, candidate A pk, candidate B pk, set)`` as plain rows
    (``bulk_rows.rows_insert``): ``bulk_create`` of the 44,901 comparisons of 1,000 pages × 10
    systems spent most of its time building instances and compiling SQL batch by batch."""
    rows_insert(
        Comparison,
        ("external_id", "page_id", "candidate_a_id", "candidate_b_id", "set"),
        list(rows),
        constants={"study_id": study.pk, "created_at": timezone.now()},
    )


def _write_study(spec: StudySpec, images: StagedImages, user: AbstractBaseUser | None) -> Study:
    _check_slug_free(spec.slug)
    stored = _stored_images([*images.originals.values(), *images.shown.values()])

    def pk(info: ImageInfo | None) -> int | None:
        return None if info is None else stored[info.sha256]

    crowd_fields, rater_page = crowd_split(spec.crowd)
    study = Study.objects.create(
        slug=spec.slug,
        title=spec.title,
        kind=spec.kind,
        instructions_md=spec.instructions_md,
        judge_prompt=spec.judge_prompt,
        **spec.settings,
        **crowd_fields,
        options={
            **({"rater_page": rater_page} if rater_page else {}),
            **({"render": spec.render} if spec.render is not None else {}),
        },
        created_by=user,  # type: ignore[misc]
    )
    Axis.objects.bulk_create(
        Axis(study=study, axis_id=a.id, title=a.title, scope=a.scope, description=a.description, position=i)
        for i, a in enumerate(spec.axes)
    )
    systems = System.objects.bulk_create(
        [System(study=study, external_id=s.id, name=s.name, position=i) for i, s in enumerate(spec.systems)],
        batch_size=1000,
    )
    system_by_id = {s.external_id: s for s in systems}
    pages = Page.objects.bulk_create(
        [
            Page(
                study=study,
                external_id=p.id,
                image_id=pk(images.variant(p.image, p.id)),
                original_image_id=pk(images.original(p.image)),
                neutralized_image_id=pk(images.variant(p.image, p.id, p.media)) if p.media else None,
                targets=[t.to_json() for t in p.targets],
                media=[m.to_json() for m in p.media],
                blocks=[b.to_json() for b in p.blocks],
                meta=p.meta,
                requirements=p.requirements,
                position=i,
            )
            for i, p in enumerate(spec.pages)
        ],
        batch_size=1000,
    )
    page_by_id = {p.external_id: p for p in pages}
    # Ground truth (docs/protocol.md "Ground truth"), as given (a page made from HTML truth keeps
    # its blocks: the bundle holds the checked format, not the HTML).
    PageTruth.objects.bulk_create(
        [PageTruth(page=page_by_id[p.id], blocks=p.truth) for p in spec.pages if p.truth is not None],
        batch_size=500,
    )
    no_media = JSONText("[]")
    # Plain rows (10,000 candidates of 1,000 pages × 10 systems), their ids read back by page and system.
    rows_insert(
        Candidate,
        ("page_id", "system_id", "image_id", "original_image_id", "neutralized_image_id", "rendered", "render_reason",
         "media", "blocks", "rule"),
        [
            (
                page_by_id[c.page].pk,
                system_by_id[c.system].pk,
                pk(images.variant(c.image, c.page)),
                pk(images.original(c.image)),
                pk(images.variant(c.image, c.page, c.media)) if c.media else None,
                c.rendered,
                c.render_reason,
                [m.to_json() for m in c.media] if c.media else no_media,
                [b.to_json() for b in c.blocks] if c.blocks else no_media,
                c.rule,
            )
            for c in spec.candidates
        ],
    )
    page_ids = {p.pk: p.external_id for p in pages}
    system_ids = {s.pk: s.external_id for s in systems}
    candidate_by_key = {
        (page_ids[page_id], system_ids[system_id]): candidate_id
        for candidate_id, page_id, system_id in Candidate.objects.filter(page__study=study).values_list(
            "pk", "page_id", "system_id"
        )
    }
    CandidateBlocks.objects.bulk_create(
        [
            CandidateBlocks(candidate_id=candidate_by_key[(c.page, c.system)], blocks=c.dom_blocks)
            for c in spec.candidates
            if c.dom_blocks is not None
        ],
        batch_size=500,
    )

    def required(info: ImageInfo | None) -> int:
        image = pk(info)
        assert image is not None, "a gold entry's images are staged with the bundle's"
        return image

    SuppliedGold.objects.bulk_create(
        SuppliedGold(
            study=study, external_id=g.id, page_id=page_by_id[g.page].pk, answer=g.answer, position=i,
            image_a_id=required(images.variant(g.a, g.page)), image_b_id=required(images.variant(g.b, g.page)),
            original_a_id=required(images.original(g.a)), original_b_id=required(images.original(g.b)),
        )
        for i, g in enumerate(spec.gold)
    )
    # Version 1 gets a row only when the bundle dates or annotates it (paper B.5; bundles.update).
    CandidateVersion.objects.bulk_create(
        [
            CandidateVersion(
                candidate_id=candidate_by_key[(c.page, c.system)],
                number=1,
                image_id=pk(images.variant(c.image, c.page)),
                original_image_id=pk(images.original(c.image)),
                neutralized_image_id=pk(images.variant(c.image, c.page, c.media)) if c.media else None,
                rendered=c.rendered,
                media=[m.to_json() for m in c.media],
                date=datetime.date.fromisoformat(c.version_date) if c.version_date else None,
                note=c.version_note,
                activated_at=study.created_at,
            )
            for c in spec.candidates
            if c.version_date or c.version_note
        ],
        batch_size=1000,
    )
    _insert_comparisons(
        study,
        (
            (c.id, page_by_id[c.page].pk, candidate_by_key[(c.page, c.a)], candidate_by_key[(c.page, c.b)], c.set)
            for c in spec.comparisons
        ),
    )
    if user is not None:
        study.researchers.add(user)  # type: ignore[arg-type]
    AuditEvent.objects.create(
        actor=user,  # type: ignore[misc]
        actor_label=user.get_username() if user is not None else "command line",
        action="study.import",
        study=study,
        target=spec.slug,
        details={
            "axes": len(spec.axes),
            "systems": len(spec.systems),
            "pages": len(spec.pages),
            "candidates": len(spec.candidates),
            "comparisons": len(spec.comparisons),
            "images": len(stored),
        },
    )
    return study


def _write_kind_study(spec: QuestionnaireStudySpec, images: StagedImages, user: AbstractBaseUser | None) -> Study:
    """Rows of a ``pairwise`` / ``checklist`` / ``rating`` bundle
    (docs/bundle-kinds.md "Study bundles of the other kinds")."""
    _check_slug_free(spec.slug)
    stored = _stored_images([*images.originals.values(), *images.shown.values()])
    crowd_fields, rater_page = crowd_split(spec.crowd)
    study = Study.objects.create(
        slug=spec.slug,
        title=spec.title,
        kind=spec.kind,
        instructions_md=spec.instructions_md,
        options={
            **spec.options,
            **({"rater_page": rater_page} if rater_page else {}),
            **({"render": spec.render} if spec.render is not None else {}),
        },
        judge_prompt=spec.judge_prompt,
        **spec.settings,
        **crowd_fields,
        created_by=user,  # type: ignore[misc]
    )
    systems = System.objects.bulk_create(
        [System(study=study, external_id=s.id, name=s.name, position=i) for i, s in enumerate(spec.systems)],
        batch_size=1000,
    )
    system_by_id = {s.external_id: s for s in systems}
    pages = Page.objects.bulk_create(
        [
            Page(study=study, external_id=b.id, text=b.text, requirements=b.requirements, position=i)
            for i, b in enumerate(spec.briefs)
        ],
        batch_size=1000,
    )
    page_by_id = {p.external_id: p for p in pages}
    candidates = Candidate.objects.bulk_create(
        [
            Candidate(
                page=page_by_id[item.brief],
                system=system_by_id[item.system],
                image_id=stored[images.shown[(item.image, (images.page_width[item.brief], ()))].sha256],
                original_image_id=stored[images.originals[item.image].sha256],
                rendered=True,
                metrics=item.metrics,
                rule=item.rule,
                external_id=item.id,
            )
            for item in spec.items
        ],
        batch_size=1000,
    )
    candidate_by_id = {c.external_id: c for c in candidates}
    CandidateBlocks.objects.bulk_create(
        [
            CandidateBlocks(candidate=candidate_by_id[item.id], blocks=item.dom_blocks)
            for item in spec.items
            if item.dom_blocks is not None
        ],
        batch_size=500,
    )
    _insert_comparisons(
        study,
        (
            (c.id, page_by_id[c.brief].pk, candidate_by_id[c.a].pk, candidate_by_id[c.b].pk, ComparisonSet.HUMAN)
            for c in spec.comparisons
        ),
    )
    Predicate.objects.bulk_create(
        [
            Predicate(
                study=study,
                external_id=p.id,
                candidate=candidate_by_id[p.item],
                question=p.question,
                boxes=[list(box) for box in p.boxes],
                automatic=p.automatic or "",
                question_type=p.type or "",
                position=i,
            )
            for i, p in enumerate(spec.predicates)
        ],
        batch_size=1000,
    )
    if user is not None:
        study.researchers.add(user)  # type: ignore[arg-type]
    AuditEvent.objects.create(
        actor=user,  # type: ignore[misc]
        actor_label=user.get_username() if user is not None else "command line",
        action="study.import",
        study=study,
        target=spec.slug,
        details={
            "kind": spec.kind,
            "systems": len(spec.systems),
            "briefs": len(spec.briefs),
            "items": len(spec.items),
            "predicates": len(spec.predicates),
            "comparisons": len(spec.comparisons),
            "images": len(stored),
        },
    )
    return study


def study_import_bundle(*, path: Path, user: AbstractBaseUser | AnonymousUser | None = None, label: str | None = None) -> Study:
    """Import a study bundle (docs/protocol.md "Files"): a folder or a ``.zip``. All or nothing.

    ``label`` is how errors name the bundle file (an upload's name instead of a temp path).
    Raises ValidationFailed / Conflict with one line naming file, JSON path and field.
    """
    if user is not None and not user.is_authenticated:
        user = None
    with open_bundle(Path(path), label=label) as bundle:
        progress_step("checking study.json")
        spec = study_spec_from_bundle(bundle)
        _check_slug_free(spec.slug)
        with staged_images() as stage:
            images = _stage_images(bundle, spec, stage)
            progress_step("writing the study")
            try:
                with transaction.atomic():
                    if isinstance(spec, QuestionnaireStudySpec):
                        study = _write_kind_study(spec, images, user)
                    else:
                        study = _write_study(spec, images, user)
                    progress_step("publishing images")
                    stage.publish()
            except IntegrityError as exc:
                # A concurrent import of the same slug won the race; nothing of ours was kept.
                if Study.objects.filter(slug=spec.slug).exists():
                    raise _slug_taken(spec.slug) from None
                raise ArbiterError(f"the import could not be saved ({exception_line(exc)})") from None
    return study
