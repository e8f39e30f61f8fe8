"""Opening a study bundle: a folder, or a ZIP whose entries are checked before any is read (count,
declared total size, absolute paths, ``..``, links, encryption, duplicate names); members are read
straight from the archive, never extracted, and never more than their cap. Then ``study.json`` is
read into a typed spec and every image it names is looked up (docs/protocol.md "Files",
docs/bundle-kinds.md for the other kinds). Any error is a one-line
:class:`~annotation.errors.ValidationFailed`.
"""

from __future__ import annotations

import os
import stat
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from annotation.errors import ValidationFailed
from annotation.services.bundles.images import read_capped
from annotation.services.bundles.questionnaire_format import (
    KINDS,
    QuestionnaireStudySpec,
    questionnaire_spec_from_document,
)
from annotation.services.bundles.reference_format import (
    STUDY_JSON,
    StudySpec,
    bundle_path_problem,
    document_kind,
    load_json,
    study_spec_from_document,
)

if TYPE_CHECKING:
    pass


# study.json of 1,000 pages × 10 systems is a few MB; this leaves a wide margin.
STUDY_JSON_MAX_BYTES = 16 * 1024 * 1024


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
            raise ValidationFailed(f"not a readable ZIP file ({exception_line(exc)})", where=self.label) from None
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
            raise ValidationFailed(f"the ZIP entry cannot be read ({exception_line(exc)})", where=relative) from None
        if len(data) > limit or len(data) != info.file_size:
            raise ValidationFailed("the ZIP entry's size does not match its header", where=relative)
        return data

    def close(self) -> None:
        self.archive.close()


def exception_line(exc: BaseException) -> str:
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
