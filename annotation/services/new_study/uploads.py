"""``new_study`` from an upload (the page and the API): a ZIP of folders, or holding a manifest,
unpacked with the bundle import's entry checks; the paths a request names stay inside it
(SECURITY.md)."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.text import slugify

from annotation.errors import ArbiterError, ValidationFailed, excerpt
from annotation.services.bundles.reference_format import bundle_path_problem, load_json
from annotation.services.new_study.create import new_study_create, new_study_plan
from annotation.services.new_study.options import (
    MEDIA_KEY,
    RENDER_KEY,
    REQUIREMENTS_KEY,
    merged_options,
    options_from_json,
    study_render_from_options,
    with_media_choice,
)
from annotation.services.new_study.plan import NewStudyInput, NewStudyPlan

REQUIREMENTS_FILE = "requirements.json"  # beside an upload's folders: the briefs' requirements

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from annotation.models import Study


@contextmanager
def unpacked_upload(archive: Path, *, name: str) -> Iterator[Path]:
    """A ZIP of folders unpacked into a temporary folder, with the bundle import's entry checks
    (count, total size, unsafe paths, links, encryption; SECURITY.md)."""
    max_entries = int(settings.ARBITER_BUNDLE_MAX_ENTRIES)
    max_total = int(settings.ARBITER_BUNDLE_MAX_UNCOMPRESSED)
    limit = int(settings.ARBITER_IMAGE_MAX_BYTES)
    try:
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, OSError):
        raise ValidationFailed("not a readable ZIP file", where=name) from None
    folder = Path(tempfile.mkdtemp(prefix="arbiter-new-study-"))
    try:
        with handle:
            infos = handle.infolist()
            if len(infos) > max_entries:
                raise ValidationFailed(f"the ZIP has {len(infos):,} entries, over the limit of {max_entries:,}", where=name)
            if sum(i.file_size for i in infos) > max_total:
                raise ValidationFailed(f"the ZIP would unpack to over {max_total:,} bytes", where=name)
            for info in infos:
                problem = bundle_path_problem(info.filename)
                mode = info.external_attr >> 16
                if problem:
                    raise ValidationFailed(f"unsafe ZIP entry: the path {problem}", where=f"{name}: {info.filename!r}")
                if (mode & 0o170000) not in (0, 0o100000, 0o040000) or info.flag_bits & 0x1:
                    raise ValidationFailed("unsafe ZIP entry: not a plain file", where=f"{name}: {info.filename!r}")
                if info.is_dir():
                    continue
                if info.file_size > limit:
                    raise ValidationFailed(f"over the {limit:,}-byte limit", where=f"{name}/{info.filename}")
                target = folder / info.filename
                target.parent.mkdir(parents=True, exist_ok=True)
                with handle.open(info) as member:
                    content = member.read(limit + 1)
                if len(content) != info.file_size:
                    raise ValidationFailed("the ZIP entry's size does not match its header", where=f"{name}/{info.filename}")
                target.write_bytes(content)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def upload_input(
    folder: Path,
    *,
    name: str,
    kind: str,
    manifest: str = "",
    reference: str = "",
    match: str | None = None,
    options: dict[str, Any],
    comparisons: str = "all",
    render_cache: Path | None = None,
    truth: str = "",
) -> NewStudyInput:
    """The input of an unpacked upload: its manifest (a path in the archive), or its top-level
    folders — ``reference`` names the references' folder, every other folder is a system.

    ``manifest`` and ``reference`` come from the request: each must name a path inside the upload
    (:func:`upload_path`), never a file of the server.
    """
    upload_fields_check(kind=kind, manifest=manifest, reference=reference)
    folder = folder.resolve()
    manifest_path = upload_path(folder, manifest, field="manifest") if manifest else None
    reference_path = upload_path(folder, reference, field="reference") if reference else None
    truth_path = upload_path(folder, truth, field="truth") if truth else None
    # One top-level folder holding everything (a zipped folder) is looked into; the reference
    # folder may then be named from inside it.
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and entries[0].is_dir() and manifest_path is None and entries[0] not in (reference_path, truth_path):
        folder = entries[0]
        if reference_path is not None and not reference_path.is_dir():
            reference_path = upload_path(folder, reference, field="reference")
        if truth_path is not None and not truth_path.is_dir():
            truth_path = upload_path(folder, truth, field="truth")
    if truth_path is not None and not truth_path.is_dir():
        raise ValidationFailed(f"{excerpt(truth)} names no folder in the .zip", where="truth")
    shown = (folder, name)
    options = _with_media_file(folder, options, name=name)
    options = _with_requirements_file(folder, options, name=name)
    if manifest_path is not None:
        return NewStudyInput(
            kind=kind, manifest=manifest_path, options=options, shown_root=shown, comparisons=comparisons,
            render_cache=render_cache, truth=truth_path,
        )
    folders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "__MACOSX")))
    systems = tuple((p.name, p) for p in folders if p not in (reference_path, truth_path))
    if not systems:
        raise ValidationFailed(
            "no system folder in the .zip (one folder per system"
            + (", beside the references' folder)" if reference_path is not None else ")"),
            where=name,
        )
    return NewStudyInput(
        kind=kind,
        reference=reference_path,
        systems=systems,
        match=match,
        options=options,
        shown_root=shown,
        comparisons=comparisons,
        render_cache=render_cache,
        truth=truth_path,
    )


def upload_fields_check(
    *, kind: str, manifest: str, reference: str, options: dict[str, Any] | None = None, truth: str = ""
) -> None:
    """The upload's fields, before anything is stored or read: a kind with references needs the
    references' folder named (or a manifest), and the render settings must hold (a page's time
    limit at most 60 s, ...); errors name the form's field or the option, not a command's flag."""
    from annotation.kinds import design_of
    from annotation.services.new_study.plan import KINDS

    if kind not in KINDS:
        raise ValidationFailed(f"unknown kind {excerpt(kind)} (expected one of: {', '.join(KINDS)})", where="kind")
    has_reference = design_of(kind).has_reference
    if manifest.strip():
        if reference.strip():
            raise ValidationFailed("give a manifest or the references' folder, not both", where="reference")
    elif has_reference and not reference.strip():
        raise ValidationFailed(
            f"a {kind} study needs its references: name their folder in the .zip (or give a manifest)",
            where="reference",
        )
    elif not has_reference and reference.strip():
        raise ValidationFailed(f"a {kind} study has no references; leave the field empty", where="reference")
    if truth.strip() and not has_reference:
        raise ValidationFailed(f"ground truth is scored against a page's candidates; a {kind} study has none", where="truth")
    if options and RENDER_KEY in options:
        study_render_from_options(options)


MEDIA_FILES = ("media.csv", "media.jsonl")  # a media table at the top of an upload


def _with_media_file(folder: Path, options: dict[str, Any], *, name: str) -> dict[str, Any]:
    """The options with the upload's own media table (``media.csv`` or ``media.jsonl`` beside its
    folders or manifest: docs/new-study.md "Media regions of PNG pages") as the ``media`` option;
    a table given both there and in the media field is refused."""
    for file_name in MEDIA_FILES:
        path = folder / file_name
        if not path.is_file() or path.is_symlink():
            continue
        where = f"{name}/{file_name}"
        if MEDIA_KEY in options:
            raise ValidationFailed("the media regions are given twice: in this file and in the media field", where=where)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ValidationFailed(f"not UTF-8 text (byte {exc.start})", where=where) from None
        return with_media_choice(options, media=text, where=where)
    return options


def _with_requirements_file(folder: Path, options: dict[str, Any], *, name: str) -> dict[str, Any]:
    """The options with the upload's ``requirements.json`` (beside its folders or manifest:
    ``{page id: requirements}``, docs/protocol.md "AesCode's rule score") as the ``requirements``
    option; given both there and in the options, it is refused."""
    path = folder / REQUIREMENTS_FILE
    if not path.is_file() or path.is_symlink():
        return options
    where = f"{name}/{REQUIREMENTS_FILE}"
    if REQUIREMENTS_KEY in options:
        raise ValidationFailed("the requirements are given twice: in this file and in the options", where=where)
    return {**options, REQUIREMENTS_KEY: load_json(path.read_bytes(), filename=where)}


def upload_path(folder: Path, value: str, *, field: str) -> Path:
    """``value`` (a name given with an upload) as a path inside the upload's ``folder``.

    Checked by the bundle paths' rule (no absolute path, no ``..``, no backslash or control
    character), then resolved (links followed) and required to stay inside ``folder``: a request
    can name only what it uploaded (SECURITY.md, row 29). The message names the field, not the
    value's target, and echoes at most a short escaped piece of the value.
    """
    problem = bundle_path_problem(value)
    if problem:
        raise ValidationFailed(
            f"{excerpt(value)} must name a path inside the uploaded .zip; the path {problem}", where=field
        )
    root = folder.resolve()
    path = (folder / value).resolve()
    if not path.is_relative_to(root):
        raise ValidationFailed(f"{excerpt(value)} must name a path inside the uploaded .zip", where=field)
    return root / path.relative_to(root)


def upload_options(
    *, options_json: str, slug: str = "", title: str = "", media: str = "", neutralize: str = ""
) -> dict[str, Any]:
    """The study.json keys of an upload (the page's and the API's fields): the options JSON, plus
    the slug and title fields. An empty slug is made from the title (``slugify``), unless the
    JSON gives one; a key given in both the JSON and a field is refused. ``media`` (typed rows of
    media regions) and ``neutralize`` (``no``) are the choice for image pages without media
    regions (:func:`~annotation.services.new_study.options.with_media_choice`)."""
    options = options_from_json(options_json, where="options")
    fields: dict[str, Any] = {}
    if title.strip():
        fields["title"] = title.strip()
    if slug.strip():
        fields["slug"] = slug.strip()
    elif "slug" not in options and fields.get("title"):
        fields["slug"] = slug_from_title(fields["title"])
    merged = merged_options([("options", options), ("the slug and title fields", fields)])
    return with_media_choice(merged, neutralize=neutralize, media=media, where="media")


def slug_from_title(title: str) -> str:
    """The slug a title suggests: Django's ``slugify`` (ASCII letters, digits, dashes), at most
    the 80 characters a study's slug holds."""
    return slugify(title)[:80].strip("-_")


def new_study_from_upload(
    *,
    upload: Any,
    kind: str,
    manifest: str = "",
    reference: str = "",
    match: str | None = None,
    options: dict[str, Any],
    comparisons: str = "all",
    dry_run: bool = False,
    user: AbstractBaseUser | AnonymousUser | None = None,
    render_cache: Path | None = None,
    truth: str = "",
) -> tuple[NewStudyPlan, Study | None]:
    """The upload page and the API: a ZIP of folders (or with a manifest inside) through the same
    plan and import as the command. Returns the plan and the study (None on a dry run).

    An error names the files as uploaded (``upload.zip/gpt/p1.html``), never the server's
    temporary folders (issue 50): the unpacked folder and ``render_cache`` are replaced by the
    upload's name and ``renders`` wherever a message would show them."""
    from annotation.services.bundles.upload import with_uploaded_bundle

    def run(path: Path, name: str) -> tuple[NewStudyPlan, Study | None]:
        with unpacked_upload(path, name=name) as folder:
            shown = {folder: name, path: name}
            if render_cache is not None:
                shown[render_cache] = "renders"
            try:
                data = upload_input(
                    folder, name=name, kind=kind, manifest=manifest, reference=reference, match=match,
                    options=options, comparisons=comparisons, render_cache=render_cache, truth=truth,
                )
                plan = new_study_plan(data=data)
                if dry_run:
                    return plan, None
                study, _ = new_study_create(data=data, plan=plan, user=user)
                if plan.truth:  # the objective scores, while the run's progress is shown
                    from annotation.services.objective_scores import objective_scores_refresh

                    objective_scores_refresh(study=study)
                return plan, study
            except ArbiterError as exc:
                message = str(exc)
                shown_message = without_server_paths(message, shown)
                if shown_message == message:
                    raise
                try:
                    shown_error = type(exc)(shown_message)
                except TypeError:  # a subclass whose constructor takes more
                    shown_error = ArbiterError(shown_message)
                raise shown_error from None

    return with_uploaded_bundle(upload, run)


def without_server_paths(text: str, shown: dict[Path, str]) -> str:
    """``text`` with each folder of ``shown`` (as given and resolved, longest first) replaced by the
    name the researcher knows it by."""
    names: dict[str, str] = {}
    for folder, name in shown.items():
        names[str(folder)] = name
        names[str(Path(folder).resolve())] = name
    for path in sorted(names, key=len, reverse=True):
        text = text.replace(path, names[path])
    return text
