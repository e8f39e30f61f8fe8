"""Study bundles (SPEC §8): import a folder or ``.zip`` whole or not at all, and export it back.

Import runs in three steps, and only the last writes anything:

1. open the bundle: a folder, or a ZIP whose entries are checked *before* any is read (count,
   declared total size, absolute paths, ``..``, links, encryption, duplicate names); members are
   read straight from the archive, never extracted, and never more than their cap;
2. validate ``study.json`` into a typed :class:`~annotation.services.bundles.reference_format.StudySpec`
   (every reference, id and box), check every image file is there, refuse a slug in use;
3. decode, check and re-encode every image (``annotation.images.clean_image``, in worker
   processes for big bundles; a bomb or a truncated file is refused), make the media-neutralized
   variants, stage the files, then write all rows in one transaction and publish the staged
   files just before it commits.

Any error raises :class:`~annotation.errors.ValidationFailed` (one line: file, JSON path, field)
and leaves the database and the media folder as they were.

Step 2 dispatches on ``kind``: ``pairwise_reference`` bundles (SPEC §8) become a ``StudySpec``;
``pairwise``, ``checklist`` and ``rating`` bundles (SPEC §11, docs/bundle-kinds.md) a
``QuestionnaireStudySpec``, written as brief → Page (text, no image), item → Candidate, comparison →
Comparison, predicate → Predicate. Export dispatches the same way.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
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
from annotation.kinds import design_of
from annotation.media import copy_media_to, media_exists
from annotation.models import (
    AuditEvent,
    Axis,
    Candidate,
    CandidateVersion,
    Comparison,
    ComparisonSet,
    Page,
    Predicate,
    StoredImage,
    Study,
    SuppliedGold,
    System,
    rater_page_options,
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
    read_capped,
)
from annotation.services.bundles.questionnaire_format import (
    KINDS,
    BriefSpec,
    ItemSpec,
    PairSpec,
    PredicateSpec,
    QuestionnaireStudySpec,
    questionnaire_spec_from_document,
    questionnaire_spec_to_json,
)
from annotation.services.bundles.reference_format import (
    SETTINGS_DEFAULTS,
    STUDY_JSON,
    AxisSpec,
    CandidateSpec,
    ComparisonSpec,
    GoldSpec,
    MediaRegion,
    PageSpec,
    StudySpec,
    SystemSpec,
    TargetSpec,
    bundle_path_problem,
    document_kind,
    load_json,
    study_spec_from_document,
    study_spec_to_json,
)
from annotation.services.crowd_settings import CROWD_SETTINGS, crowd_split

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from django.core.files.uploadedfile import UploadedFile

# study.json of 1,000 pages × 10 systems is a few MB; this leaves a wide margin.
STUDY_JSON_MAX_BYTES = 16 * 1024 * 1024

# --- reading a bundle ------------------------------------------------------------------------


class Bundle:
    """Read access to the files of a bundle, by bundle-relative path."""

    label: str

    def has(self, relative: str) -> bool:
        raise NotImplementedError

    def read(self, relative: str, *, limit: int) -> bytes:
        raise NotImplementedError

    def file_path(self, relative: str) -> str | None:
        """The checked file on disk behind ``relative`` (a worker process may read it), or None
        when the bytes come only through :meth:`read` (a ZIP member)."""
        return None

    def close(self) -> None:
        pass


class FolderBundle(Bundle):
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.label = str(root)
        # Each folder is resolved once and each checked file remembered: 10,000 images would
        # otherwise cost two full ``realpath`` walks each (the check, then the read).
        self._folders: dict[str, Path] = {}
        self._files: dict[str, Path] = {}

    def _path(self, relative: str) -> Path | None:
        known = self._files.get(relative)
        if known is not None:
            return known
        if bundle_path_problem(relative):
            return None
        folder, _, name = relative.rpartition("/")
        real_folder = self._folders.get(folder)
        if real_folder is None:
            real_folder = self._folders[folder] = (self.root / folder).resolve() if folder else self.root
        # A link inside the folder may not lead outside it (the folder's, or the file's own).
        if not name or not real_folder.is_relative_to(self.root):
            return None
        path = real_folder / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            path = path.resolve()
            if not path.is_relative_to(self.root) or not path.is_file():
                return None
        elif not stat.S_ISREG(mode):
            return None
        self._files[relative] = path
        return path

    def has(self, relative: str) -> bool:
        return self._path(relative) is not None

    def read(self, relative: str, *, limit: int) -> bytes:
        return read_capped(self._checked(relative), where=relative, limit=limit)

    def file_path(self, relative: str) -> str:
        return str(self._checked(relative))

    def _checked(self, relative: str) -> Path:
        path = self._path(relative)
        if path is None:
            raise ValidationFailed("no such file in the bundle", where=relative)
        return path


class ZipBundle(Bundle):
    """A ZIP bundle read member by member from the archive; nothing is extracted to disk."""

    def __init__(self, path: Path, *, label: str | None = None) -> None:
        self.label = label or path.name
        try:
            self.archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError) as exc:
            raise ValidationFailed(f"not a readable ZIP file ({_one_line(exc)})", where=self.label) from None
        try:
            self.members = self._check_entries()
        except BaseException:
            self.archive.close()
            raise

    def _check_entries(self) -> dict[str, zipfile.ZipInfo]:
        infos = self.archive.infolist()
        max_entries = int(settings.ARBITER_BUNDLE_MAX_ENTRIES)
        max_total = int(settings.ARBITER_BUNDLE_MAX_UNCOMPRESSED)
        if len(infos) > max_entries:
            raise ValidationFailed(f"the ZIP has {len(infos):,} entries, over the limit of {max_entries:,}", where=self.label)
        total = sum(info.file_size for info in infos)
        if total > max_total:
            raise ValidationFailed(
                f"the ZIP would unpack to {total:,} bytes, over the limit of {max_total:,}", where=self.label
            )
        members: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            name = info.filename
            problem = bundle_path_problem(name)
            if problem:
                raise ValidationFailed(f"unsafe ZIP entry: the path {problem}", where=f"{self.label}: {name!r}")
            # Unix mode bits live in the high 16 bits; whatever the "made by" system says, a link
            # (or a device, a FIFO) is refused rather than read as a file.
            mode = info.external_attr >> 16
            if stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise ValidationFailed(f"unsafe ZIP entry: {kind}", where=f"{self.label}: {name!r}")
            if info.flag_bits & 0x1:
                raise ValidationFailed("encrypted ZIP entries are not supported", where=f"{self.label}: {name!r}")
            if info.is_dir():
                continue
            key = name
            while key.startswith("./"):
                key = key[2:]
            if key in members:
                raise ValidationFailed("the ZIP holds this name twice", where=f"{self.label}: {name!r}")
            members[key] = info
        # study.json at the top, or inside one top-level folder (a zipped bundle folder).
        if STUDY_JSON not in members:
            nested = [n for n in members if n.count("/") == 1 and n.endswith("/" + STUDY_JSON)]
            if len(nested) != 1:
                raise ValidationFailed(f"no {STUDY_JSON} at the top of the ZIP", where=self.label)
            prefix = nested[0][: -len(STUDY_JSON)]
            members = {n[len(prefix):]: i for n, i in members.items() if n.startswith(prefix)}
        return members

    def has(self, relative: str) -> bool:
        return relative in self.members

    def read(self, relative: str, *, limit: int) -> bytes:
        info = self.members.get(relative)
        if info is None:
            raise ValidationFailed("no such file in the bundle", where=relative)
        if info.file_size > limit:
            raise ValidationFailed(f"the file is {info.file_size:,} bytes, over the {limit:,}-byte limit", where=relative)
        try:
            with self.archive.open(info) as member:
                # Never trust the header: read at most one byte past the cap.
                data = member.read(limit + 1)
        except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError, ValueError) as exc:
            raise ValidationFailed(f"the ZIP entry cannot be read ({_one_line(exc)})", where=relative) from None
        if len(data) > limit or len(data) != info.file_size:
            raise ValidationFailed("the ZIP entry's size does not match its header", where=relative)
        return data

    def close(self) -> None:
        self.archive.close()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@contextmanager
def open_bundle(path: Path, *, label: str | None = None) -> Iterator[Bundle]:
    """A folder or a ZIP file (recognized by content, not by name)."""
    shown = label or str(path)
    if path.is_dir():
        bundle: Bundle = FolderBundle(path)
    elif path.is_file():
        if path.stat().st_size == 0:
            raise ValidationFailed("the bundle file is empty", where=shown)
        if not zipfile.is_zipfile(path):
            raise ValidationFailed("not a ZIP file (a bundle is a folder or a .zip)", where=shown)
        bundle = ZipBundle(path, label=shown)
    else:
        raise ValidationFailed("no such file or folder", where=shown)
    try:
        yield bundle
    finally:
        bundle.close()


# --- validation ------------------------------------------------------------------------------


def study_spec_from_bundle(bundle: Bundle) -> StudySpec | QuestionnaireStudySpec:
    """Parse and check ``study.json`` and the presence of every image it names (no decoding)."""
    if not bundle.has(STUDY_JSON):
        raise ValidationFailed(f"no {STUDY_JSON} in the bundle", where=bundle.label)
    document = load_json(bundle.read(STUDY_JSON, limit=STUDY_JSON_MAX_BYTES))
    if document_kind(document) in KINDS:
        questionnaire_spec = questionnaire_spec_from_document(document)
        for item in questionnaire_spec.items:
            if not bundle.has(item.image):
                raise ValidationFailed(f"no file {item.image!r} in the bundle", where=f"{STUDY_JSON} {item.where}.image")
        return questionnaire_spec
    spec = study_spec_from_document(document)
    for page in spec.pages:
        if not bundle.has(page.image):
            raise ValidationFailed(f"no file {page.image!r} in the bundle", where=f"{STUDY_JSON} {page.where}.image")
    for candidate in spec.candidates:
        if candidate.image is not None and not bundle.has(candidate.image):
            raise ValidationFailed(
                f"no file {candidate.image!r} in the bundle", where=f"{STUDY_JSON} {candidate.where}.image"
            )
    return spec


def _slug_taken(slug: str) -> ValidationFailed:
    return ValidationFailed(f"a study with slug {slug!r} already exists", where=f"{STUDY_JSON} $.slug")


def _check_slug_free(slug: str) -> None:
    if Study.objects.filter(slug=slug).exists():
        raise _slug_taken(slug)


# --- images ----------------------------------------------------------------------------------


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


# --- import ----------------------------------------------------------------------------------


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
        **({"options": {"rater_page": rater_page}} if rater_page else {}),
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
                meta=p.meta,
                position=i,
            )
            for i, p in enumerate(spec.pages)
        ],
        batch_size=1000,
    )
    page_by_id = {p.external_id: p for p in pages}
    no_media = JSONText("[]")
    # Plain rows (10,000 candidates of 1,000 pages × 10 systems), their ids read back by page and system.
    rows_insert(
        Candidate,
        ("page_id", "system_id", "image_id", "original_image_id", "neutralized_image_id", "rendered", "media"),
        [
            (
                page_by_id[c.page].pk,
                system_by_id[c.system].pk,
                pk(images.variant(c.image, c.page)),
                pk(images.original(c.image)),
                pk(images.variant(c.image, c.page, c.media)) if c.media else None,
                c.rendered,
                [m.to_json() for m in c.media] if c.media else no_media,
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
    """Rows of a ``pairwise`` / ``checklist`` / ``rating`` bundle (SPEC §11, docs/bundle-kinds.md)."""
    _check_slug_free(spec.slug)
    stored = _stored_images([*images.originals.values(), *images.shown.values()])
    crowd_fields, rater_page = crowd_split(spec.crowd)
    study = Study.objects.create(
        slug=spec.slug,
        title=spec.title,
        kind=spec.kind,
        instructions_md=spec.instructions_md,
        options={**spec.options, "rater_page": rater_page} if rater_page else spec.options,
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
        [Page(study=study, external_id=b.id, text=b.text, position=i) for i, b in enumerate(spec.briefs)],
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
                external_id=item.id,
            )
            for item in spec.items
        ],
        batch_size=1000,
    )
    candidate_by_id = {c.external_id: c for c in candidates}
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
    """Import a study bundle (SPEC §8): a folder or a ``.zip``. All or nothing.

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
                raise ArbiterError(f"the import could not be saved ({_one_line(exc)})") from None
    return study


def study_import_upload(*, upload: UploadedFile, user: AbstractBaseUser | AnonymousUser | None = None) -> Study:
    """Import an uploaded ``.zip`` bundle (web form and REST API). Same rules as the command."""
    return with_uploaded_bundle(upload, lambda path, name: study_import_bundle(path=path, user=user, label=name))


def with_uploaded_bundle[T](upload: UploadedFile, read: Callable[[Path, str], T]) -> T:
    """``read(path, name)`` of an uploaded bundle, within the upload size cap, from a file on disk."""
    name = os.path.basename(upload.name or "bundle.zip")
    limit = int(settings.ARBITER_MAX_UPLOAD_BYTES)
    if upload.size is not None and upload.size > limit:
        raise ValidationFailed(f"the upload is {upload.size:,} bytes, over the {limit:,}-byte limit", where=name)
    if upload.size == 0:
        raise ValidationFailed("the bundle file is empty", where=name)
    temporary_path = getattr(upload, "temporary_file_path", None)
    if temporary_path is not None:
        return read(Path(temporary_path()), name)
    with tempfile.NamedTemporaryFile(prefix="arbiter-bundle-", suffix=".zip") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
        handle.flush()
        return read(Path(handle.name), name)


# --- export ----------------------------------------------------------------------------------

# Every image entry of an exported ZIP carries this time (the stored object has no file time of its own).
_EXPORT_TIME = (1980, 1, 1, 0, 0, 0)


def _neutral_name(used: set[str], *parts: str) -> str:
    """``images/<page>.png`` or ``images/<page>-<system>.png`` when the ids are file-name safe."""
    stem = "-".join(parts)
    safe = all(p and not bundle_path_problem(p) and "/" not in p and not p.startswith(".") for p in parts)
    name = f"images/{stem}.png" if safe and len(stem) <= 200 else f"images/{len(used) + 1:06d}.png"
    counter = 1
    while name in used:
        counter += 1
        name = f"images/{len(used) + counter:06d}.png"
    used.add(name)
    return name


def original_of(holder: Page | Candidate) -> StoredImage | None:
    """The image as uploaded (size and mode kept): what researchers and the bundle export get."""
    return holder.original_image or holder.image


def study_spec_from_db(study: Study) -> tuple[StudySpec, dict[str, StoredImage]]:
    """The study as a StudySpec; image references are ``#<StoredImage id>`` keys of the second value."""
    images: dict[str, StoredImage] = {}

    def ref(image: StoredImage | None, what: str) -> str:
        if image is None:
            raise ArbiterError(f"{what} has no image; a {study.kind} bundle needs one")
        key = f"#{image.pk}"
        images[key] = image
        return key

    def regions(media: list[dict[str, Any]]) -> tuple[MediaRegion, ...]:
        return tuple(MediaRegion(kind=m["kind"], bbox_1000=tuple(m["bbox_1000"])) for m in media)  # type: ignore[arg-type]

    pages = list(study.pages.select_related("image", "original_image").order_by("position", "external_id"))
    page_specs = tuple(
        PageSpec(
            id=p.external_id,
            image=ref(original_of(p), f"page {p.external_id!r}"),
            targets=tuple(
                TargetSpec(
                    axis=t["axis"],
                    role=t.get("role", ""),
                    bbox_1000=tuple(t["bbox_1000"]),  # type: ignore[arg-type]
                    description=t.get("description", ""),
                )
                for t in p.targets
            ),
            media=regions(p.media),
            meta=p.meta,
        )
        for p in pages
    )
    candidates = (
        Candidate.objects.filter(page__study=study)
        .select_related("page", "system", "image", "original_image")
        .order_by("page__position", "page__external_id", "system__position", "system__external_id")
    )
    # The current version's date and note (earlier versions stay in the database only).
    dated = {
        v.candidate_id: v
        for v in CandidateVersion.objects.filter(candidate__page__study=study, number=F("candidate__version"))
    }
    candidate_specs = tuple(
        CandidateSpec(
            page=c.page.external_id,
            system=c.system.external_id,
            image=ref(original_of(c), f"candidate {c.page.external_id}/{c.system.external_id}") if c.rendered else None,
            rendered=c.rendered,
            media=regions(c.media),
            version_date=_iso(dated[c.pk].date) if c.pk in dated else None,
            version_note=dated[c.pk].note if c.pk in dated else "",
        )
        for c in candidates
    )
    comparisons = (
        Comparison.objects.filter(study=study)
        .select_related("page", "candidate_a__system", "candidate_b__system")
        .order_by("id")
    )
    spec = StudySpec(
        slug=study.slug,
        title=study.title,
        kind=study.kind,
        instructions_md=study.instructions_md,
        axes=tuple(AxisSpec(id=a.axis_id, scope=a.scope, description=a.description, title=a.title) for a in study.axes.order_by("position")),
        systems=tuple(SystemSpec(id=s.external_id, name=s.name) for s in study.systems.order_by("position", "external_id")),
        pages=page_specs,
        candidates=candidate_specs,
        comparisons=tuple(
            ComparisonSpec(
                id=c.external_id,
                page=c.page.external_id,
                a=c.candidate_a.system.external_id,
                b=c.candidate_b.system.external_id,
                set=c.set,
            )
            for c in comparisons
        ),
        judge_prompt=study.judge_prompt,
        settings=study_settings(study),
        crowd=study_crowd_settings(study),
        gold=tuple(
            GoldSpec(id=g.external_id, page=g.page.external_id, answer=g.answer,
                     a=ref(g.original_a, f"gold {g.external_id!r}"), b=ref(g.original_b, f"gold {g.external_id!r}"))
            for g in SuppliedGold.objects.filter(study=study).select_related("page", "original_a", "original_b")
        ),
    )
    return spec, images


def _iso(day: datetime.date | None) -> str | None:
    return day.isoformat() if day is not None else None


def _export_plan(spec: StudySpec, images: dict[str, StoredImage]) -> tuple[StudySpec, dict[str, str]]:
    """The spec with bundle paths for its images, and the stored image (media key) behind every bundle path.

    Each page's and each candidate's image is written once, under a name made from its ids
    (``images/<page>.png``, ``images/<page>-<system>.png``), never under a stored name; two entries
    with identical pixels still get a file each, so the exported ``study.json`` reads naturally.
    """
    used: set[str] = set()
    sources: dict[str, str] = {}

    def assign(ref: str, *parts: str) -> str:
        name = _neutral_name(used, *parts)
        sources[name] = str(images[ref].file.name)
        return name

    pages = tuple(replace(p, image=assign(p.image, p.id)) for p in spec.pages)
    candidates = tuple(
        c if c.image is None else replace(c, image=assign(c.image, c.page, c.system)) for c in spec.candidates
    )
    gold = tuple(replace(g, a=assign(g.a, "gold", g.id, "a"), b=assign(g.b, "gold", g.id, "b")) for g in spec.gold)
    return replace(spec, pages=pages, candidates=candidates, gold=gold), sources


def study_settings(study: Study) -> dict[str, Any]:
    """The study's values of the bundle's ``settings`` keys."""
    return {key: getattr(study, key) for key in SETTINGS_DEFAULTS}


def study_crowd_settings(study: Study) -> dict[str, Any]:
    """The study's values of the bundle's ``crowd`` keys (the crowd settings page's, the rater
    page's settings included)."""
    return {**{key: getattr(study, key) for key in CROWD_SETTINGS}, **rater_page_options(study)}


def questionnaire_spec_from_db(study: Study) -> tuple[QuestionnaireStudySpec, dict[str, str]]:
    """A ``pairwise`` / ``checklist`` / ``rating`` study as a QuestionnaireStudySpec with bundle image paths,
    and the stored image (media key) behind every bundle path (``images/<item>.png``)."""
    used: set[str] = set()
    sources: dict[str, str] = {}
    pages = list(study.pages.order_by("position", "external_id"))
    candidates = list(
        Candidate.objects.filter(page__study=study)
        .select_related("page", "system", "image", "original_image")
        .order_by("page__position", "page__external_id", "system__position", "system__external_id")
    )
    items: list[ItemSpec] = []
    for c in candidates:
        if not c.external_id or original_of(c) is None:
            raise ArbiterError(
                f"candidate {c.page.external_id}/{c.system.external_id} has no item id or no image; "
                f"a {study.kind} bundle needs both"
            )
        name = _neutral_name(used, c.external_id)
        sources[name] = str(original_of(c).file.name)  # type: ignore[union-attr]
        items.append(
            ItemSpec(id=c.external_id, image=name, brief=c.page.external_id, system=c.system.external_id, metrics=c.metrics)
        )
    predicates = Predicate.objects.filter(study=study).select_related("candidate").order_by("position", "external_id")
    comparisons = (
        Comparison.objects.filter(study=study).select_related("page", "candidate_a", "candidate_b").order_by("id")
    )
    defaults = design_of(study).bundle_option_defaults
    options: dict[str, Any] = {key: study.options.get(key, copy.deepcopy(default)) for key, default in defaults.items()}
    spec = QuestionnaireStudySpec(
        slug=study.slug,
        title=study.title,
        kind=study.kind,
        instructions_md=study.instructions_md,
        systems=tuple(SystemSpec(id=s.external_id, name=s.name) for s in study.systems.order_by("position", "external_id")),
        briefs=tuple(BriefSpec(id=p.external_id, text=p.text) for p in pages),
        items=tuple(items),
        predicates=tuple(
            PredicateSpec(
                id=p.external_id,
                item=p.candidate.external_id,
                question=p.question,
                boxes=tuple(tuple(box) for box in p.boxes),  # type: ignore[misc]
                automatic=p.automatic or None,
                type=p.question_type or None,
            )
            for p in predicates
        ),
        comparisons=tuple(
            PairSpec(id=c.external_id, brief=c.page.external_id, a=c.candidate_a.external_id, b=c.candidate_b.external_id)
            for c in comparisons
        ),
        options=options,
        judge_prompt=study.judge_prompt,
        settings=study_settings(study),
        crowd=study_crowd_settings(study),
    )
    return spec, sources


def study_export_bundle(*, study: Study, path: Path) -> Path:
    """Write a bundle that :func:`study_import_bundle` takes back unchanged (SPEC §8, §11).

    A path ending in ``.zip`` gives a ZIP file (replaced atomically); any other path a folder,
    which must not exist yet or be empty. Each image is written once, under a neutral name.
    """
    path = Path(path)
    document_json: dict[str, Any]
    if not design_of(study).has_reference:
        questionnaire_spec, sources = questionnaire_spec_from_db(study)
        document_json = questionnaire_spec_to_json(questionnaire_spec)
    else:
        spec, images = study_spec_from_db(study)
        spec, sources = _export_plan(spec, images)
        document_json = study_spec_to_json(spec)
    for name, source in sources.items():
        if not media_exists(source):
            raise ArbiterError(f"{name}: the stored image {source.rsplit('/', 1)[-1]} is missing from the media storage")
    document = json.dumps(document_json, indent=1, ensure_ascii=False) + "\n"

    if path.suffix.lower() == ".zip":
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".export-", suffix=".zip", dir=path.parent)
        os.close(handle)
        try:
            with zipfile.ZipFile(temporary, "w") as archive:
                archive.writestr(STUDY_JSON, document, compress_type=zipfile.ZIP_DEFLATED)
                for i, (name, source) in enumerate(sources.items(), 1):
                    info = zipfile.ZipInfo(name, date_time=_EXPORT_TIME)
                    info.external_attr = 0o644 << 16
                    with archive.open(info, "w") as entry:
                        copy_media_to(source, entry)
                    progress_step("writing images", i, len(sources))
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return path

    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ArbiterError(f"{path}: the export folder already exists and is not empty")
    # Written beside the target and renamed into place, so a failed export leaves no half folder.
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary_dir = Path(tempfile.mkdtemp(prefix=".export-", dir=path.parent))
    try:
        (temporary_dir / "images").mkdir()
        for i, (name, source) in enumerate(sources.items(), 1):
            with (temporary_dir / name).open("wb") as target:
                copy_media_to(source, target)
            progress_step("writing images", i, len(sources))
        (temporary_dir / STUDY_JSON).write_text(document, encoding="utf-8")
        temporary_dir.chmod(0o755)
        os.replace(temporary_dir, path)
    except BaseException:
        shutil.rmtree(temporary_dir, ignore_errors=True)
        raise
    return path


def study_export_to_temporary_zip(*, study: Study) -> BinaryIO:
    """The study's ZIP bundle as an open, already unlinked temporary file (for downloads)."""
    directory = Path(tempfile.mkdtemp(prefix="arbiter-export-"))
    try:
        path = study_export_bundle(study=study, path=directory / f"{study.slug}.zip")
        return path.open("rb")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
