"""``new_study``'s two steps: :func:`new_study_plan` reads everything and writes nothing;
:func:`new_study_create` writes the bundle, imports it all or nothing and keeps it."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from annotation.errors import ArbiterError, ValidationFailed
from annotation.kinds import design_of
from annotation.progress import progress_step
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.bundles.reference_format import STUDY_JSON
from annotation.services.new_study.html_outputs import render_html_sources
from annotation.services.new_study.inputs import (
    read_briefs,
    read_folders,
    read_manifest,
    read_media_option,
    read_predicates,
    read_requirements,
)
from annotation.services.new_study.options import MEDIA_KEY, REQUIREMENTS_KEY
from annotation.services.new_study.plan import KINDS, NewStudyInput, NewStudyPlan, Source
from annotation.services.new_study.sources import place_source, probe_source
from annotation.services.new_study.truth import read_truth

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from annotation.models import Study


def new_study_plan(*, data: NewStudyInput) -> NewStudyPlan:
    """Read the folders or the manifest and every image header; writes nothing."""
    if data.kind not in KINDS:
        raise ValidationFailed(f"unknown kind {data.kind!r} (expected one of: {', '.join(KINDS)})", where="kind")
    design = design_of(data.kind)
    for key in design.new_study_makes:
        if key in data.options:
            raise ValidationFailed(f"new_study makes {key!r} from the files; leave it out of the options", where=f"option {key}")
    if data.comparisons not in ("all", "none"):
        raise ValidationFailed("expected all or none", where="--comparisons")
    if data.manifest is not None and (data.systems or data.reference is not None):
        raise ValidationFailed("give a manifest or folders (--reference, --system), not both", where=str(data.manifest))
    if not design.has_reference and data.reference is not None:
        raise ValidationFailed(f"a {data.kind} study has no reference images", where="--reference")
    options = dict(data.options)
    media = options.pop(MEDIA_KEY, None)  # the regions of image pages go to them, not into study.json
    if media is not None and not design.has_reference:
        raise ValidationFailed(f"a {data.kind} study shows no media regions", where=f"option {MEDIA_KEY}")
    requirements = options.pop(REQUIREMENTS_KEY, None)  # each page gets its own (docs/protocol.md "AesCode's rule score")
    plan = NewStudyPlan(
        kind=data.kind, options=options, pages=[], systems=[], references={}, images={},
        comparisons=data.comparisons,
    )
    if data.manifest is not None:
        read_manifest(data, plan)
    else:
        if not data.systems:
            raise ValidationFailed("give at least one --system NAME=FOLDER (or a manifest)", where="--system")
        if design.has_reference and data.reference is None:
            raise ValidationFailed(f"a {data.kind} study needs its reference folder", where="--reference")
        read_folders(data, plan)
    read_briefs(data, plan)
    read_predicates(data, plan)
    read_requirements(requirements, plan)
    plan.wants_truth = data.truth is not None
    from annotation.render.pages import RenderPool

    # One set of render workers for every folder, width and the ground truth: a browser starts at
    # the run's first page, not at each folder's (none for a study without HTML).
    with RenderPool() as pool:
        render_html_sources(plan, cache=data.render_cache, pool=pool)
        read_truth(data, plan, pool=pool)
    read_media_option(media, plan)
    sources = [*plan.references.values(), *plan.images.values(), *plan.stray_sources]
    for i, source in enumerate(sources, 1):
        if source.url is None or not plan.errors:
            plan.probes[source.label] = probe_source(source)
        progress_step("reading image headers", i, len(sources))
    return plan


# --- the real run ------------------------------------------------------------------------------


def new_study_write_bundle(*, plan: NewStudyPlan, folder: Path) -> Path:
    """Write ``study.json`` and the images (linked or copied as they are) into an empty ``folder``."""
    (folder / "images").mkdir(parents=True)
    paths = plan.bundle_paths()
    for i, (relative, source) in enumerate(paths.items(), 1):
        place_source(source, folder / relative)
        progress_step("writing the bundle", i, len(paths))
    (folder / STUDY_JSON).write_text(json.dumps(plan.document(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def _archive_root(keep_bundle: Path | None) -> Path:
    return Path(keep_bundle) if keep_bundle is not None else Path(settings.ARBITER_BUNDLE_ARCHIVE)


def _named_in_sources(error: ValidationFailed, paths: dict[str, Source]) -> ArbiterError:
    """An import error about ``images/000012.png`` names the researcher's file instead."""
    message = str(error)
    for relative, source in paths.items():
        if message.startswith(relative + ":") or f"{relative!r}" in message:
            return ValidationFailed(message.replace(relative, source.label, 1).split(": ", 1)[-1], where=source.label)
    return error


def new_study_create(
    *,
    data: NewStudyInput,
    user: AbstractBaseUser | AnonymousUser | None = None,
    keep_bundle: Path | None = None,
    plan: NewStudyPlan | None = None,
) -> tuple[Study, Path]:
    """Plan, write the bundle, import it all or nothing; the study and where its bundle is kept."""
    plan = plan or new_study_plan(data=data)
    error = plan.first_error()
    if error:
        raise ArbiterError(error)
    root = _archive_root(keep_bundle)
    root.mkdir(parents=True, exist_ok=True)
    slug = str(plan.options.get("slug", "study"))
    staging = Path(tempfile.mkdtemp(prefix=".new-study-", dir=root))
    try:
        new_study_write_bundle(plan=plan, folder=staging / "bundle")
        try:
            study = study_import_bundle(path=staging / "bundle", user=user)
            plan.created = study.slug
        except ValidationFailed as exc:
            raise _named_in_sources(exc, plan.bundle_paths()) from None
        finally:
            plan.close()  # the rendered pages are in the bundle now
        from django.utils import timezone

        kept = root / f"{re.sub(r'[^-A-Za-z0-9_]', '_', slug)}-{timezone.now():%Y%m%dT%H%M%S}"
        n = 1
        while kept.exists():
            n += 1
            kept = kept.with_name(f"{kept.name.split('~')[0]}~{n}")
        os.replace(staging / "bundle", kept)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return study, kept
