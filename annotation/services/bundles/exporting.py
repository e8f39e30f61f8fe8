"""Exporting a study as a bundle that imports back (docs/protocol.md "Files", docs/bundle-kinds.md
"Export"): ``study.json`` rebuilt from the rows, every image under a neutral name.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from django.db.models import F

from annotation.errors import ArbiterError
from annotation.kinds import design_of
from annotation.media import copy_media_to, media_exists
from annotation.models import (
    Candidate,
    CandidateBlocks,
    CandidateVersion,
    Comparison,
    Page,
    PageTruth,
    Predicate,
    StoredImage,
    Study,
    SuppliedGold,
    rater_page_options,
)
from annotation.progress import progress_step
from annotation.services.bundles.questionnaire_format import (
    BriefSpec,
    ItemSpec,
    PairSpec,
    PredicateSpec,
    QuestionnaireStudySpec,
    questionnaire_spec_to_json,
)
from annotation.services.bundles.reference_format import (
    SETTINGS_DEFAULTS,
    STUDY_JSON,
    AxisSpec,
    BlockRegion,
    CandidateSpec,
    ComparisonSpec,
    GoldSpec,
    MediaRegion,
    PageSpec,
    StudySpec,
    SystemSpec,
    TargetSpec,
    bundle_path_problem,
    study_spec_to_json,
)
from annotation.services.crowd_settings import CROWD_SETTINGS

if TYPE_CHECKING:
    pass


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

    def blocks(found: list[dict[str, Any]]) -> tuple[BlockRegion, ...]:
        return tuple(BlockRegion(type=b["type"], bbox_1000=tuple(b["bbox_1000"])) for b in found)  # type: ignore[arg-type]

    pages = list(study.pages.select_related("image", "original_image").order_by("position", "external_id"))
    truth = dict(PageTruth.objects.filter(page__study=study).values_list("page_id", "blocks"))
    dom_blocks = dict(CandidateBlocks.objects.filter(candidate__page__study=study).values_list("candidate_id", "blocks"))
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
            blocks=blocks(p.blocks),
            requirements=p.requirements or {},
            truth=truth.get(p.pk),
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
            blocks=blocks(c.blocks),
            version_date=_iso(dated[c.pk].date) if c.pk in dated else None,
            version_note=dated[c.pk].note if c.pk in dated else "",
            render_reason="" if c.rendered else c.render_reason,
            rule=c.rule or {},
            dom_blocks=dom_blocks.get(c.pk) if c.rendered else None,
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
        render=(study.options or {}).get("render"),
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
    dom_blocks = dict(CandidateBlocks.objects.filter(candidate__page__study=study).values_list("candidate_id", "blocks"))
    for c in candidates:
        if not c.external_id or original_of(c) is None:
            raise ArbiterError(
                f"candidate {c.page.external_id}/{c.system.external_id} has no item id or no image; "
                f"a {study.kind} bundle needs both"
            )
        name = _neutral_name(used, c.external_id)
        sources[name] = str(original_of(c).file.name)  # type: ignore[union-attr]
        items.append(
            ItemSpec(
                id=c.external_id, image=name, brief=c.page.external_id, system=c.system.external_id,
                metrics=c.metrics, rule=c.rule or {}, dom_blocks=dom_blocks.get(c.pk),
            )
        )
    predicates = Predicate.objects.filter(study=study).select_related("candidate").order_by("position", "external_id")
    comparisons = (
        Comparison.objects.filter(study=study).select_related("page", "candidate_a", "candidate_b").order_by("id")
    )
    design = design_of(study)
    defaults = design.bundle_option_defaults
    options: dict[str, Any] = {key: study.options.get(key, copy.deepcopy(default)) for key, default in defaults.items()}
    # An option without a default (a checklist's preference_study) is written only when the study has it.
    options.update({key: study.options[key] for key in design.bundle_options if key not in options and key in study.options})
    spec = QuestionnaireStudySpec(
        slug=study.slug,
        title=study.title,
        kind=study.kind,
        instructions_md=study.instructions_md,
        systems=tuple(SystemSpec(id=s.external_id, name=s.name) for s in study.systems.order_by("position", "external_id")),
        briefs=tuple(BriefSpec(id=p.external_id, text=p.text, requirements=p.requirements or {}) for p in pages),
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
        render=(study.options or {}).get("render"),
    )
    return spec, sources


def study_export_bundle(*, study: Study, path: Path) -> Path:
    """Write a bundle that :func:`study_import_bundle` takes back unchanged (docs/protocol.md "Files",
    docs/bundle-kinds.md "Study bundles of the other kinds").

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
