"""``new_study``: a study from the researcher's own folders or manifest (issue 29).

The researcher has one folder of images per system (plus the references for
``pairwise_reference``), or a CSV / JSONL manifest listing them. This module turns either into
the same bundle ``import_study`` reads (``study.json`` + images, docs/protocol.md "Files" and
docs/bundle-kinds.md), then imports it through
:func:`~annotation.services.bundles.importing.study_import_bundle`, all or nothing, and keeps the bundle for
the record.

Three steps:

1. :func:`new_study_plan` reads the folders or the manifest and each image's header (format, size,
   colour mode; no pixels): pages, systems, the images of each, and what looks wrong — pages
   missing a system's image (with a ``--match`` hint when a stray file has the page's number
   under another separator), stray files (a file not named like an image, ``notes.txt``, is one:
   listed and left out), duplicate stems, image-named files that are not images, size and
   colour-mode outliers. It writes nothing (``--dry-run`` prints :meth:`NewStudyPlan.report`).
2. :meth:`NewStudyPlan.document` is the ``study.json``: the files' pages, systems and images plus
   the options (every other top-level bundle key, passed through unchanged, so whatever the
   bundle validator accepts, ``new_study`` accepts).
3. :func:`new_study_create` refuses a plan with errors (one line naming the file), writes the
   bundle (images hard-linked or copied, never changed), imports it and moves the bundle into
   ``ARBITER_BUNDLE_ARCHIVE/<slug>-<UTC time>/`` (or ``keep_bundle``). A failed import leaves no
   bundle, no rows and no media files.

Page ids are file stems, or the first (or ``page``-named) group of ``--match``. A page of
``pairwise_reference`` missing a system's image is that system's failed render (``rendered:
false``, docs/protocol.md "Files"); the other kinds have no failed renders, so the page simply has no item of
it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import tempfile
import time
import weakref
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import regex
from django.conf import settings
from django.utils.text import slugify
from PIL import Image

from annotation.errors import ArbiterError, ValidationFailed, excerpt, excerpt_path
from annotation.images import ALLOWED_FORMATS
from annotation.progress import progress_step
from annotation.services.bundles.images import read_capped
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.bundles.questionnaire_format import KINDS as QUESTIONNAIRE_KINDS
from annotation.services.bundles.questionnaire_format import questionnaire_spec_from_document
from annotation.services.bundles.reference_format import (
    STUDY_JSON,
    bundle_path_problem,
    document_kind,
    load_json,
    study_spec_from_document,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from annotation.models import Study

KINDS = ("pairwise_reference", "pairwise", "checklist", "rating")
# Keys new_study makes from the files; an option may not give them.
MADE_KEYS = {
    "pairwise_reference": ("kind", "systems", "pages", "candidates"),
    "pairwise": ("kind", "systems", "briefs", "items"),
    "checklist": ("kind", "systems", "briefs", "items"),
    "rating": ("kind", "systems", "briefs", "items"),
}
MANIFEST_COLUMNS = ("page", "reference", "system", "image", "text")
# Other names a researcher's own table may use for a column, read as that column. A header is
# matched case-insensitively, with spaces and dashes read as underscores.
COLUMN_ALIASES = {
    "page_id": "page", "id": "page", "page_name": "page", "stem": "page",
    "reference_path": "reference", "reference_image": "reference", "ref": "reference", "ref_path": "reference",
    "system_id": "system", "system_name": "system", "model": "system",
    "image_path": "image", "path": "image", "file": "image", "output": "image", "candidate": "image",
    "brief": "text", "prompt": "text",
}
PREDICATE_COLUMNS = ("page", "system", "question", "type", "automatic", "id", "check", "text")
LISTED = 10  # examples shown per problem in the dry-run report
# What the images new_study reads (annotation.images.ALLOWED_FORMATS) are called: any other file of
# a folder (notes.txt, a .DS_Store, a PDF) is a stray file, listed and left out.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
# HTML outputs (and references) are rendered first (annotation.render), then read as images.
HTML_SUFFIXES = (".html", ".htm")
RENDER_KEY = "render"  # the option holding the study's render settings (docs/rendering.md)
MISSING_SLUG = "slug: required: give the study a slug (or a title to make one from)"


@dataclass(frozen=True)
class NewStudyInput:
    """What the command, the upload page and the API give (paths already on this machine)."""

    kind: str
    reference: Path | None = None
    systems: tuple[tuple[str, Path], ...] = ()
    manifest: Path | None = None
    match: str | None = None
    # Top-level study.json keys (slug, title, instructions_md, axes, settings, options, …).
    options: dict[str, Any] = field(default_factory=dict)
    briefs: Path | None = None  # CSV/JSONL of page, text (the brief texts of the other kinds)
    predicates: Path | None = None  # CSV/JSONL of page, system, question[, type, automatic, id, check, text] (checklist)
    comparisons: str = "all"  # pairwise_reference: "all" pairs of rendered systems per page, or "none"
    # How errors name a path (an upload's temporary folder is shown as the archive's name).
    shown_root: tuple[Path, str] | None = None


@dataclass(frozen=True)
class Source:
    """One image file: ``path`` on disk, or ``url`` (s3://) read through the media storage."""

    label: str
    path: Path | None = None
    url: str | None = None
    suffix: str = ".png"


@dataclass
class Probe:
    size: tuple[int, int] | None = None
    mode: str = ""
    problem: str = ""


@dataclass
class NewStudyPlan:
    kind: str
    options: dict[str, Any]
    pages: list[str]
    systems: list[str]
    references: dict[str, Source]
    images: dict[tuple[str, str], Source]  # (page, system) → image
    texts: dict[str, str] = field(default_factory=dict)
    predicates: list[dict[str, Any]] = field(default_factory=list)
    # Predicates answered from the render (docs/protocol.md "Checks computed from the render"): their
    # position in ``predicates`` → (page, system, check, text); and how many got each answer.
    predicate_checks: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    check_answers: dict[str, int] = field(default_factory=dict)
    comparisons: str = "all"
    stray: list[str] = field(default_factory=list)
    # Files of the folders that no page uses: still checked to be images (every file in a folder
    # is an image or is left out by --match).
    stray_sources: list[Source] = field(default_factory=list)
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (label, what it duplicates)
    # (page, system) of a failed render → a hint: a stray file of that system with the page's
    # digits under another separator, and the --match pattern that would pair them.
    near_matches: dict[tuple[str, str], str] = field(default_factory=dict)
    probes: dict[str, Probe] = field(default_factory=dict)  # by label
    errors: list[str] = field(default_factory=list)  # s3 not configured, …: first one is raised
    # HTML sources: the render settings used (RenderSettings.to_json, None when no page is HTML),
    # the media regions each rendered page's DOM gave (by label), the (page, system) whose page
    # failed to render (→ its reason), and per system the pages rendered / failed.
    render: dict[str, Any] | None = None
    render_media: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    render_failed: dict[tuple[str, str], str] = field(default_factory=dict)
    render_counts: dict[str, list[int]] = field(default_factory=dict)
    render_refused: dict[str, list[str]] = field(default_factory=dict)  # label → requests refused (first 50)
    work_dir: Path | None = None  # where the pages were rendered (removed with the plan, or by close())

    def close(self) -> None:
        """Remove the rendered pages' work folder (after the bundle is written)."""
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # --- what the files say -----------------------------------------------------------------

    def missing(self) -> dict[str, list[str]]:
        """System → pages without its image."""
        return {
            s: [p for p in self.pages if (p, s) not in self.images and (p, s) not in self.render_failed]
            for s in self.systems
        }

    def not_images(self) -> list[tuple[str, str]]:
        return [(label, probe.problem) for label, probe in self.probes.items() if probe.problem]

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        if self.references:
            groups["reference"] = [source.label for source in self.references.values()]
        for (_, system), source in self.images.items():
            groups.setdefault(system, []).append(source.label)
        return groups

    def outliers(self) -> tuple[list[str], list[str]]:
        """Images whose pixel size, or colour mode, differs from most of their group (the
        references, or one system's images)."""
        sizes: list[str] = []
        modes: list[str] = []
        for group, labels in self._groups().items():
            probes = [(label, self.probes[label]) for label in labels if label in self.probes and self.probes[label].size]
            if not probes:
                continue
            common_size = Counter(p.size for _, p in probes).most_common(1)[0][0]
            common_mode = Counter(p.mode for _, p in probes).most_common(1)[0][0]
            assert common_size is not None
            for label, probe in probes:
                if probe.size != common_size:
                    w, h = probe.size or (0, 0)
                    sizes.append(f"{label} {w} × {h} (most of {group}: {common_size[0]} × {common_size[1]})")
                if probe.mode != common_mode:
                    modes.append(f"{label} {probe.mode} (most of {group}: {common_mode})")
        return sizes, modes

    def first_error(self) -> str | None:
        """What makes a real run refuse the plan (one line naming the file), or None."""
        if self.errors:
            return self.errors[0]
        for label, what in self.duplicates:
            return f"{label}: {what}"
        for label, problem in self.not_images():
            return f"{label}: {problem}"
        if not self.pages:
            return "no pages: no image file matched (check the folders, the manifest or --match)"
        return self.document_error()

    def document_error(self) -> str | None:
        """What the import's own ``study.json`` check and its free-slug check would refuse, so that
        a dry run does not say "would import" of options the real run stops at (a bad slug, an axis
        without an id, a crowd setting out of range)."""
        from annotation.models import Study

        if not self.options.get("slug"):
            return MISSING_SLUG
        document = self.document()
        try:
            if document_kind(document) in QUESTIONNAIRE_KINDS:
                questionnaire_spec_from_document(document)
            else:
                study_spec_from_document(document)
        except ValidationFailed as exc:
            return str(exc)
        slug = document.get("slug")
        if isinstance(slug, str) and Study.objects.filter(slug=slug).exists():
            return f"{STUDY_JSON} $.slug: a study with slug {slug!r} already exists"
        return None

    # --- what would be created ----------------------------------------------------------------

    def _is_image(self, source: Source) -> bool:
        probe = self.probes.get(source.label)
        return probe is None or not probe.problem

    def counts(self) -> dict[str, int]:
        # Files found not to be images are counted under "not images", never as images.
        rendered = sum(1 for source in self.images.values() if self._is_image(source))
        references = sum(1 for source in self.references.values() if self._is_image(source))
        out = {"pages": len(self.pages), "systems": len(self.systems), "images": rendered + references}
        if self.kind == "pairwise_reference":
            out["candidates"] = len(self.pages) * len(self.systems)
            out["failed_renders"] = out["candidates"] - rendered
            out["comparisons"] = len(self._pairs()) if "comparisons" not in self.options else 0
        else:
            out["items"] = rendered
            out["predicates"] = len(self.predicates)
        return out

    def report(self) -> str:
        """The dry run's text: counts per system, then each kind of problem (a few examples each)."""
        counts = self.counts()
        lines = [f"new_study {self.kind} (dry run, nothing written)"]
        if self.references:
            lines.append(f"pages: {len(self.pages):,} ({len(self.references):,} reference images)")
        else:
            lines.append(f"pages: {len(self.pages):,}")
        missing = self.missing()
        for system in self.systems:
            n = sum(1 for p in self.pages if (p, system) in self.images and self._is_image(self.images[p, system]))
            n_missing = len(missing[system])
            gap = f", {n_missing:,} page{'s' if n_missing != 1 else ''} missing its image" if n_missing else ""
            lines.append(f"system {system}: {n:,} images{gap}")
        if self.render is not None:
            settings_line = ", ".join(
                f"{k} {v}" for k, v in self.render.items() if v is not None and k != "failure_rule"
            )
            lines.append(f"HTML rendered with: {settings_line}")
            lines.append(f"Render failures: {self.render.get('failure_rule')} rule (in the leaderboards)")
            for group, (ok, failed) in self.render_counts.items():
                lines.append(f"rendered {group}: {ok:,} pages rendered, {failed:,} failed")
        if self.check_answers:
            answers = ", ".join(f"{key} {n:,}" for key, n in sorted(self.check_answers.items()))
            lines.append(f"checks answered from the render: {answers}")
        sizes, modes = self.outliers()
        sections: list[tuple[str, list[str]]] = [
            (
                "pages missing a system's image",
                [
                    f"{s}: {p}" + (f" ({self.near_matches[p, s]})" if (p, s) in self.near_matches else "")
                    for s in self.systems
                    for p in missing[s]
                ],
            ),
            ("failed renders (HTML)", [f"{s}: {p}: {why}" for (p, s), why in self.render_failed.items()]),
            ("stray files", self.stray),
            ("duplicate stems", [f"{label}: {what}" for label, what in self.duplicates]),
            ("not images", [f"{label}: {problem}" for label, problem in self.not_images()]),
            ("size outliers", sizes),
            ("colour-mode outliers", modes),
        ]
        for title, entries in sections:
            lines.append(f"{title}: {len(entries):,}")
            lines.extend(f"  {entry}" for entry in entries[:LISTED])
            if len(entries) > LISTED:
                lines.append(f"  … and {len(entries) - LISTED:,} more")
        made = ", ".join(f"{key.replace('_', ' ')} {value:,}" for key, value in counts.items())
        lines.append(f"would create: {made}")
        error = self.first_error()
        lines.append(f"a real run would stop: {error}" if error else "a real run would import this")
        return "\n".join(lines) + "\n"

    # --- the bundle ---------------------------------------------------------------------------

    def _pairs(self) -> list[tuple[str, str, str, str]]:
        if self.comparisons == "none":
            return []
        pairs = []
        for page in self.pages:
            rendered = [s for s in self.systems if (page, s) in self.images]
            k = 0
            for i, a in enumerate(rendered):
                for b in rendered[i + 1 :]:
                    k += 1
                    pairs.append((f"{page}-{k}", page, a, b))
        return pairs

    def bundle_paths(self) -> dict[str, Source]:
        """Bundle-relative image path → its source (``images/<n>.<ext>``: ids need not be file names)."""
        paths: dict[str, Source] = {}
        for page in self.pages:
            if page in self.references:
                source = self.references[page]
                paths[f"images/r{len(paths):06d}{source.suffix}"] = source
            for system in self.systems:
                source = self.images.get((page, system))  # type: ignore[assignment]
                if source is not None:
                    paths[f"images/{len(paths):06d}{source.suffix}"] = source
        return paths

    def document(self) -> dict[str, Any]:
        """``study.json``: the options as given, plus what the files make."""
        by_source = {source.label: path for path, source in self.bundle_paths().items()}
        doc: dict[str, Any] = {"instructions_md": "", **self.options, "kind": self.kind}
        if self.render is not None:
            doc[RENDER_KEY] = self.render  # the settings used, defaults filled in (stored with the study)
        doc.setdefault("title", str(doc.get("slug", "")))
        doc["systems"] = [{"id": s, "name": s} for s in self.systems]
        if self.kind == "pairwise_reference":
            doc.setdefault("axes", [])
            doc["pages"] = [
                {"id": p, "image": by_source[self.references[p].label], **self._media(self.references[p])}
                for p in self.pages
            ]
            doc["candidates"] = [
                {
                    "page": p,
                    "system": s,
                    "image": by_source[self.images[(p, s)].label] if (p, s) in self.images else None,
                    "rendered": (p, s) in self.images,
                    **(self._media(self.images[(p, s)]) if (p, s) in self.images else {}),
                }
                for p in self.pages
                for s in self.systems
            ]
            if "comparisons" not in self.options:
                doc["comparisons"] = [
                    {"id": cid, "page": p, "a": a, "b": b, "set": "human"} for cid, p, a, b in self._pairs()
                ]
            return doc
        doc["briefs"] = [{"id": p, "text": self.texts.get(p, "")} for p in self.pages]
        doc["items"] = [
            {"id": item_id(p, s), "image": by_source[self.images[(p, s)].label], "brief": p, "system": s}
            for p in self.pages
            for s in self.systems
            if (p, s) in self.images
        ]
        if self.predicates:
            doc["predicates"] = self.predicates
        return doc


    def _media(self, source: Source) -> dict[str, Any]:
        """``{"media": [...]}`` for a rendered HTML page that has media regions, else ``{}``."""
        regions = self.render_media.get(source.label)
        return {"media": [{"kind": m["kind"], "bbox_1000": m["bbox_1000"]} for m in regions]} if regions else {}


def item_id(page: str, system: str) -> str:
    """The item id of a system's image of a page (what a predicates file or option names)."""
    return f"{page}-{system}"


# --- reading the inputs ------------------------------------------------------------------------


def _shown(path: Path, data: NewStudyInput) -> str:
    if data.shown_root is not None:
        root, name = data.shown_root
        try:
            return f"{name}/{path.relative_to(root).as_posix()}"
        except ValueError:
            pass
    return str(path)


def _folder_files(folder: Path, data: NewStudyInput, what: str) -> list[Path]:
    if not folder.is_dir():
        raise ValidationFailed(f"no such folder ({what})", where=_shown(folder, data))
    # scandir: the file type comes with the listing (no stat per file, unless it is a link).
    with os.scandir(folder) as entries:
        listed = [(e.name, e.is_symlink()) for e in entries if e.is_file() and not e.name.startswith(".")]
    root = folder.resolve()
    for name, link in listed:
        # A link may point at another file of its own folder, never out of it (as in manifests).
        if link and not (folder / name).resolve().is_relative_to(root):
            raise ValidationFailed(f"{excerpt_path(name)}: the path climbs out of its folder", where=_shown(folder, data))
    return [folder / name for name, _ in sorted(listed)]


# A --match pattern comes from the researcher (the API and the upload page too): each file name is
# matched with a time limit, and the whole folder reading with a budget, so that a pattern that
# backtracks exponentially (``^(a+)+$`` on ``aaaa…a!``) cannot hold a web worker. The ``regex``
# package is used because the standard library's ``re`` has no time limit.
MATCH_SECONDS_PER_NAME = 0.05
MATCH_SECONDS_TOTAL = 2.0
NAME_MAX_CHARS = 255  # longer than any file system's file name


@dataclass
class _Matcher:
    pattern: regex.Pattern[str]
    spent: float = 0.0

    def search(self, name: str) -> regex.Match[str] | None:
        started = time.monotonic()
        try:
            return self.pattern.search(name, timeout=MATCH_SECONDS_PER_NAME)
        except TimeoutError:
            raise ValidationFailed(
                f"the pattern takes too long on the file name {excerpt(name)} (over {MATCH_SECONDS_PER_NAME:g} s); "
                "simplify it (no nested repetition such as (a+)+)",
                where="--match",
            ) from None
        finally:
            self.spent += time.monotonic() - started
            if self.spent > MATCH_SECONDS_TOTAL:
                raise ValidationFailed(
                    f"matching the file names took over {MATCH_SECONDS_TOTAL:g} s; simplify the pattern", where="--match"
                )


def _page_id(name: str, matcher: _Matcher | None) -> str | None:
    if matcher is None:
        return Path(name).stem
    found = matcher.search(name)
    if found is None:
        return None
    if "page" in matcher.pattern.groupindex:
        return found.group("page")
    return found.group(1) if matcher.pattern.groups else found.group(0)


def _compile(match: str | None) -> _Matcher | None:
    if not match:
        return None
    if len(match) > 1000:
        raise ValidationFailed("the pattern is over 1,000 characters", where="--match")
    try:
        return _Matcher(regex.compile(match))
    except regex.error as exc:
        raise ValidationFailed(f"not a regular expression ({exc})", where="--match") from None


def _index_folder(
    folder: Path, data: NewStudyInput, what: str, pattern: _Matcher | None, plan: NewStudyPlan
) -> dict[str, Source]:
    """Page id → the folder's file for it; strays and duplicate stems go to the plan."""
    found: dict[str, Source] = {}
    for path in _folder_files(folder, data, what):
        label = _shown(path, data)
        if len(path.name) > NAME_MAX_CHARS:
            plan.stray.append(f"{excerpt(label, limit=80)} (a file name over {NAME_MAX_CHARS} characters)")
            continue
        page = _page_id(path.name, pattern)
        if not page:
            plan.stray.append(f"{label} (does not match --match)")
            continue
        if path.suffix.lower() not in IMAGE_SUFFIXES + HTML_SUFFIXES:
            plan.stray.append(f"{label} (not an image or HTML by its extension: {', '.join(IMAGE_SUFFIXES + HTML_SUFFIXES)})")
            continue
        if page in found:
            plan.duplicates.append((label, f"page id {page!r} found twice in one folder (also {found[page].label})"))
            continue
        found[page] = Source(label=label, path=path, suffix=path.suffix.lower() or ".img")
    return found


def _from_folders(data: NewStudyInput, plan: NewStudyPlan) -> None:
    pattern = _compile(data.match)
    names: dict[str, Path] = {}
    for name, folder in data.systems:
        if name in names:
            raise ValidationFailed(
                f"system {name!r} is given twice (also {_shown(names[name], data)}); give each system once",
                where=_shown(folder, data),
            )
        names[name] = folder
    if data.kind == "pairwise_reference":
        plan.references = _index_folder(data.reference, data, "--reference", pattern, plan) if data.reference else {}
    per_system = {name: _index_folder(folder, data, f"--system {name}", pattern, plan) for name, folder in data.systems}
    plan.systems = list(per_system)
    if data.kind == "pairwise_reference":
        plan.pages = sorted(plan.references)
        pages = set(plan.pages)
    else:
        pages = {page for files in per_system.values() for page in files}
        plan.pages = sorted(pages)
    for system, files in per_system.items():
        strays: dict[str, Source] = {}
        for page, source in files.items():
            if page in pages:
                plan.images[(page, system)] = source
            else:
                plan.stray.append(f"{source.label} (no reference image for page {page!r})")
                plan.stray_sources.append(source)
                strays[page] = source
        for page in plan.pages:
            if (page, system) not in plan.images and (hint := _near_match_hint(page, strays)):
                plan.near_matches[page, system] = hint


def _near_match_hint(page: str, strays: dict[str, Source]) -> str:
    """A hint for a page a system has no image of, when one of its stray files has the page's
    number under another separator (``page-03.png`` beside the reference ``page_03.png``): the
    ``--match`` pattern that reads both as the same page id."""
    digits = re.findall(r"\d+", page)
    if len(digits) != 1:
        return ""
    for stray_page, source in strays.items():
        if re.findall(r"\d+", stray_page) == digits:
            return (
                f"{source.label} has the same number with another separator; --match '(?P<page>\\d+)' would pair them "
                "(page ids become the numbers)"
            )
    return ""


def _table_rows(path: Path, data: NewStudyInput, columns: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """(``file:line``, row) of a CSV or JSONL file (chosen by its suffix: .jsonl / .ndjson, else CSV)."""
    shown = _shown(path, data)
    if not path.is_file():
        raise ValidationFailed("no such file", where=shown)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(f"not UTF-8 text (byte {exc.start})", where=shown) from None
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{shown}:{number}"
            row = load_json(line.encode(), filename=where)
            if not isinstance(row, dict):
                raise ValidationFailed("expected a JSON object per line", where=where)
            yield where, _row(row, where, columns)
        return
    reader = csv.DictReader(io.StringIO(text))
    try:
        seen: dict[str, str] = {}
        for key in reader.fieldnames or ():
            name = _column(key, columns, where=f"{shown}:1")
            if name in seen:
                raise ValidationFailed(f"columns {excerpt(seen[name])} and {excerpt(key)} both give {name!r}", where=f"{shown}:1")
            seen[name] = key
        for row in reader:
            yield f"{shown}:{reader.line_num}", _row(row, f"{shown}:{reader.line_num}", columns)
    except csv.Error as exc:
        raise ValidationFailed(f"not a readable CSV file ({exc})", where=f"{shown}:{reader.line_num}") from None


def _column(key: Any, columns: tuple[str, ...], *, where: str) -> str:
    """The column a header names: itself, or what COLUMN_ALIASES reads it as (``page_id`` → page)."""
    if key in columns:
        return str(key)
    folded = re.sub(r"[\s-]+", "_", str(key).strip().lower()) if isinstance(key, str) else ""
    name = folded if folded in columns else COLUMN_ALIASES.get(folded, "")
    if name not in columns:
        raise ValidationFailed(f"unknown column {excerpt(key)} (expected: {', '.join(columns)})", where=where)
    return name


def _row(row: dict[str, Any], where: str, columns: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw_key, value in row.items():
        key = _column(raw_key, columns, where=where)
        if key in out:
            raise ValidationFailed(f"two columns give {key!r}", where=where)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a JSONL page id written as a number: 7 is page "7"
        if not isinstance(value, str):
            raise ValidationFailed(f"column {key!r}: expected text, got {type(value).__name__}", where=where)
        out[key] = value.strip()
    return out


def _manifest_source(value: str, manifest: Path, where: str, data: NewStudyInput, plan: NewStudyPlan) -> Source:
    """A manifest's path: relative to the manifest's folder (never out of it), or s3://."""
    suffix = Path(value.split("?")[0]).suffix.lower() or ".img"
    shown = excerpt_path(value)
    if value.startswith("s3://"):
        problem = _s3_problem(value)
        if problem:
            plan.errors.append(f"{where}: {shown}: {problem}")
        return Source(label=value, url=value, suffix=suffix)
    if re.match(r"^https?://", value, flags=re.IGNORECASE) and (in_bucket := _bucket_url_as_s3(value)):
        return Source(label=value, url=in_bucket, suffix=suffix)
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", value):
        raise ValidationFailed(
            f"{shown}: only paths relative to the manifest, s3:// and https:// URLs of the media bucket are read; "
            "Arbiter makes no other outbound requests (SECURITY.md: its only egress is to the judge hosts); "
            "download the files and list their paths",
            where=where,
        )
    root = manifest.parent.resolve()
    if value.startswith("/") or "\\" in value or bundle_path_problem(value) == "is absolute":
        raise ValidationFailed(f"{shown}: an absolute path; give it relative to the manifest's folder", where=where)
    path = (manifest.parent / value).resolve()
    if not path.is_relative_to(root):
        raise ValidationFailed(f"{shown}: the path climbs out of the manifest's folder", where=where)
    if not path.is_file():
        raise ValidationFailed(f"{shown}: no such file", where=where)
    return Source(label=_shown(manifest.parent / value, data), path=path, suffix=suffix)


def _from_manifest(data: NewStudyInput, plan: NewStudyPlan) -> None:
    assert data.manifest is not None
    manifest = data.manifest
    pages: dict[str, None] = {}
    systems: dict[str, None] = {}
    for where, row in _table_rows(manifest, data, MANIFEST_COLUMNS):
        page = row.get("page", "")
        if not page:
            raise ValidationFailed("the page column is empty", where=where)
        pages.setdefault(page, None)
        reference = row.get("reference", "")
        if reference:
            if data.kind != "pairwise_reference":
                raise ValidationFailed(f"a {data.kind} study has no reference images; leave the column empty", where=where)
            source = _manifest_source(reference, manifest, where, plan=plan, data=data)
            known = plan.references.get(page)
            if known is not None and known.label != source.label:
                raise ValidationFailed(f"page {excerpt(page)} has two references ({known.label} and {source.label})", where=where)
            plan.references[page] = source
        if row.get("text"):
            plan.texts[page] = row["text"]
        system = row.get("system", "")
        image = row.get("image", "")
        if image and not system:
            raise ValidationFailed("an image needs its system", where=where)
        if system:
            systems.setdefault(system, None)
            if image:
                if (page, system) in plan.images:
                    plan.duplicates.append(
                        (where, f"page {excerpt(page)} has a second image of system {excerpt(system)} (also {plan.images[(page, system)].label})")
                    )
                    continue
                plan.images[(page, system)] = _manifest_source(image, manifest, where, plan=plan, data=data)
    plan.pages = list(pages)
    plan.systems = list(systems)
    if data.kind == "pairwise_reference":
        for page in plan.pages:
            if page not in plan.references:
                raise ValidationFailed(f"page {excerpt(page)} has no reference image in any row", where=_shown(manifest, data))


def _read_texts(data: NewStudyInput, plan: NewStudyPlan) -> None:
    if data.briefs is None:
        return
    for where, row in _table_rows(data.briefs, data, ("page", "text")):
        if not row.get("page"):
            raise ValidationFailed("the page column is empty", where=where)
        plan.texts[row["page"]] = row.get("text", "")


def _read_predicates(data: NewStudyInput, plan: NewStudyPlan) -> None:
    if data.predicates is None:
        return
    if data.kind != "checklist":
        raise ValidationFailed(f"predicates are for checklist studies, not {data.kind}", where="--predicates")
    for n, (where, row) in enumerate(_table_rows(data.predicates, data, PREDICATE_COLUMNS), 1):
        page, system = row.get("page", ""), row.get("system", "")
        if (page, system) not in plan.images:
            raise ValidationFailed(f"no image of system {excerpt(system)} for page {excerpt(page)}", where=where)
        predicate: dict[str, Any] = {"id": row.get("id") or f"q{n}", "item": item_id(page, system), "question": row.get("question", "")}
        if row.get("type"):
            predicate["type"] = row["type"]
        if row.get("automatic"):
            predicate["automatic"] = row["automatic"]
        if row.get("check") or row.get("text"):
            plan.predicate_checks[len(plan.predicates)] = (page, system, *_render_check(row, plan.images[page, system], where))
        plan.predicates.append(predicate)


def _render_check(row: dict[str, str], source: Source, where: str) -> tuple[str, str]:
    """A predicate row's render check (``check``, and ``text`` for ``text_visible``), checked:
    docs/protocol.md "Checks computed from the render"."""
    from annotation.render.page_checks import CHECKS

    check, text = row.get("check", "").strip(), row.get("text", "")
    if check not in CHECKS:
        raise ValidationFailed(f"unknown check {excerpt(check)} (expected one of: {', '.join(CHECKS)})", where=where)
    if row.get("automatic"):
        raise ValidationFailed("give an automatic answer or a check to answer it, not both", where=where)
    if (check == "text_visible") != bool(text.strip()):
        raise ValidationFailed("the text column goes with the text_visible check (the text to look for), and only with it", where=where)
    if not _is_html(source):
        raise ValidationFailed(f"a check is answered from an HTML output's render; {source.label} is an image", where=where)
    return check, text


def _probe(source: Source) -> Probe:
    """Format, size and colour mode from the header (no pixels decoded)."""
    try:
        data = _read(source)
    except ArbiterError as exc:
        return Probe(problem=str(exc))
    try:
        with Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS) as image:
            return Probe(size=image.size, mode=image.mode)
    except Image.UnidentifiedImageError:
        return Probe(problem="not a PNG, JPEG or WebP image")
    except (OSError, SyntaxError, ValueError) as exc:
        return Probe(problem=f"the image cannot be read ({' '.join(str(exc).split())})")
    except Image.DecompressionBombError:
        return Probe(problem="the image is too large to decode safely")


def _is_html(source: Source) -> bool:
    return source.suffix in HTML_SUFFIXES


def render_settings_from_options(options: dict[str, Any]) -> Any:
    """The study's render settings: the ``render`` option (an object of docs/rendering.md's
    settings, e.g. ``{"viewport": "1280x720", "mode": "canvas"}``), defaults for keys left out."""
    from annotation.render.settings import FAILURE_RULE_KEY, RenderSettings

    raw = options.get(RENDER_KEY, {})
    if not isinstance(raw, dict):
        raise ValidationFailed('expected a JSON object such as {"viewport": "1280x720"}', where=f"option {RENDER_KEY}")
    try:
        return RenderSettings.from_json({k: v for k, v in raw.items() if k != FAILURE_RULE_KEY})
    except (TypeError, ArbiterError) as exc:
        raise ValidationFailed(str(exc), where=f"option {RENDER_KEY}") from None


def study_render_from_options(options: dict[str, Any]) -> dict[str, Any]:
    """The study's ``render`` object: the render settings (defaults filled in) and the failure rule
    (``failure_rule``, docs/protocol.md "Failed renders in the leaderboard")."""
    from annotation.render.settings import study_render_from_json

    render_settings_from_options(options)  # its errors first, named as the render option's
    try:
        return study_render_from_json(options.get(RENDER_KEY, {}))
    except ArbiterError as exc:
        raise ValidationFailed(str(exc), where=f"option {RENDER_KEY}") from None


def with_failure_rule(options: dict[str, Any], rule: str | None, *, where: str) -> dict[str, Any]:
    """The options with the failure rule a flag or form field chose (``new_study --render-failures``,
    the upload's ``render_failures``) put in the ``render`` object; None or empty leaves them as
    they are. A different rule already in the ``render`` option is refused."""
    from annotation.render.settings import FAILURE_RULE_KEY, parse_failure_rule

    if not rule:
        return options
    try:
        chosen = parse_failure_rule(rule, where=where)
    except ArbiterError as exc:
        raise ValidationFailed(str(exc)) from None
    raw = options.get(RENDER_KEY, {})
    if not isinstance(raw, dict):
        raise ValidationFailed('expected a JSON object such as {"viewport": "1280x720"}', where=f"option {RENDER_KEY}")
    given = raw.get(FAILURE_RULE_KEY)
    if given is not None and str(given).strip().lower() != chosen:
        raise ValidationFailed(
            f"the render option's failure_rule is {str(given)[:40]!r}; give the rule once", where=where
        )
    return {**options, RENDER_KEY: {**raw, FAILURE_RULE_KEY: chosen}}


def _render_html(plan: NewStudyPlan) -> None:
    """Render every HTML source (references and system outputs) with the study's render settings
    (annotation.render: each page served only from its own folder, every other request refused),
    then read the PNGs as images. A system's page that failed to render is its failed render; a
    reference that failed is an error. Stops with one line naming the package when there is no
    browser; a study without HTML never starts one."""
    keys: list[tuple[str, str | None, Source]] = [(p, None, s) for p, s in plan.references.items() if _is_html(s)]
    keys += [(p, system, s) for (p, system), s in plan.images.items() if _is_html(s)]
    # HTML files that no page uses are left out unrendered (not probed as images).
    plan.stray_sources = [s for s in plan.stray_sources if not _is_html(s)]
    if RENDER_KEY in plan.options or keys:
        settings_used = render_settings_from_options(plan.options)
        plan.render = study_render_from_options(plan.options)
    if not keys:
        return
    if any(source.path is None for _, _, source in keys):
        first = next(source for _, _, source in keys if source.path is None)
        plan.errors.append(f"{first.label}: HTML pages are rendered from files on this machine, not from s3://; download them")
        return
    from annotation.render.pages import render_folder

    plan.work_dir = Path(tempfile.mkdtemp(prefix="arbiter-render-"))
    weakref.finalize(plan, shutil.rmtree, plan.work_dir, True)
    records: dict[tuple[str, str], dict[str, Any]] = {}
    outs: dict[Path, Path] = {}
    for _, _, source in keys:
        assert source.path is not None
        outs.setdefault(source.path.parent, plan.work_dir / f"{len(outs):04d}")
    for i, (folder, out) in enumerate(outs.items(), 1):
        stage = f"rendering HTML pages (folder {i} of {len(outs)})"
        progress_step(stage)
        render_folder(src=folder, out=out, settings=settings_used, resume=False, progress=_pages_rendered(stage))
    for page, system, source in keys:
        assert source.path is not None
        out = outs[source.path.parent]
        record = _read_render(out / f"{source.path.stem}.json")
        if system is not None:
            records[page, system] = record
        group = system if system is not None else "reference"
        counts = plan.render_counts.setdefault(group, [0, 0])
        png = out / f"{source.path.stem}.png"
        if record.get("refused_requests"):
            plan.render_refused[source.label] = [str(url) for url in record["refused_requests"]]
        if record.get("status") == "ok" and png.is_file():
            counts[0] += 1
            rendered = Source(label=source.label, path=png, suffix=".png")
            plan.render_media[source.label] = [m for m in record.get("media") or [] if isinstance(m, dict)]
            if system is None:
                plan.references[page] = rendered
            else:
                plan.images[(page, system)] = rendered
            continue
        counts[1] += 1
        reason = " ".join(str(record.get("reason") or "no render was written").split())[:200]
        if system is None:
            plan.errors.append(f"{source.label}: the reference page failed to render ({reason})")
        else:
            del plan.images[(page, system)]
            plan.render_failed[(page, system)] = reason
    _answer_checks(plan, records)
    if plan.render_failed:  # a predicate of an item that failed to render has nothing to ask about
        failed = {item_id(p, s) for p, s in plan.render_failed}
        plan.predicates = [q for q in plan.predicates if q["item"] not in failed]


def _pages_rendered(stage: str) -> Callable[[int, int], None]:
    """``render_folder``'s progress (pages rendered of the folder's) as a progress step of ``stage``."""

    def report(done: int, total: int) -> None:
        progress_step(stage, done, total)

    return report


def _answer_checks(plan: NewStudyPlan, records: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The automatic answers of the predicates a check answers, from their item's render
    (docs/protocol.md "Checks computed from the render")."""
    from annotation.render.page_checks import check_answer

    for position, (page, system, check, text) in plan.predicate_checks.items():
        answer = check_answer(records.get((page, system), {}), check, text=text)
        plan.predicates[position]["automatic"] = answer
        key = f"{check} {answer}"
        plan.check_answers[key] = plan.check_answers.get(key, 0) + 1


def _read_render(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def new_study_plan(*, data: NewStudyInput) -> NewStudyPlan:
    """Read the folders or the manifest and every image header; writes nothing."""
    if data.kind not in KINDS:
        raise ValidationFailed(f"unknown kind {data.kind!r} (expected one of: {', '.join(KINDS)})", where="kind")
    for key in MADE_KEYS[data.kind]:
        if key in data.options:
            raise ValidationFailed(f"new_study makes {key!r} from the files; leave it out of the options", where=f"option {key}")
    if data.comparisons not in ("all", "none"):
        raise ValidationFailed("expected all or none", where="--comparisons")
    if data.manifest is not None and (data.systems or data.reference is not None):
        raise ValidationFailed("give a manifest or folders (--reference, --system), not both", where=str(data.manifest))
    if data.kind != "pairwise_reference" and data.reference is not None:
        raise ValidationFailed(f"a {data.kind} study has no reference images", where="--reference")
    plan = NewStudyPlan(
        kind=data.kind, options=dict(data.options), pages=[], systems=[], references={}, images={},
        comparisons=data.comparisons,
    )
    if data.manifest is not None:
        _from_manifest(data, plan)
    else:
        if not data.systems:
            raise ValidationFailed("give at least one --system NAME=FOLDER (or a manifest)", where="--system")
        if data.kind == "pairwise_reference" and data.reference is None:
            raise ValidationFailed("a pairwise_reference study needs its reference folder", where="--reference")
        _from_folders(data, plan)
    _read_texts(data, plan)
    _read_predicates(data, plan)
    _render_html(plan)
    sources = [*plan.references.values(), *plan.images.values(), *plan.stray_sources]
    for i, source in enumerate(sources, 1):
        if source.url is None or not plan.errors:
            plan.probes[source.label] = _probe(source)
        progress_step("reading image headers", i, len(sources))
    return plan


# --- s3:// -------------------------------------------------------------------------------------


def _s3_storage() -> Any:
    """The media storage when it is django-storages' S3 storage, else None."""
    from django.core.files.storage import default_storage

    try:
        from storages.backends.s3 import S3Storage
    except ImportError:
        return None
    storage = getattr(default_storage, "_wrapped", default_storage)
    if not hasattr(storage, "bucket_name"):
        default_storage._setup()  # type: ignore[attr-defined]
        storage = default_storage._wrapped  # type: ignore[attr-defined]
    return storage if isinstance(storage, S3Storage) else None


def _bucket_url_as_s3(url: str) -> str:
    """``s3://bucket/key`` for an http(s) URL of an object in the media bucket, else "".

    The URL forms S3 and S3-compatible servers use for the bucket the media storage names: path
    style on the storage's endpoint (``http://127.0.0.1:9000/media/key``) or AWS's
    (``https://s3.eu-west-1.amazonaws.com/media/key``), virtual-host style
    (``https://media.s3.amazonaws.com/key``) and the storage's custom domain. Any query string (a
    presigned URL's signature) is dropped: the object is read with the storage's own credentials.
    """
    from urllib.parse import unquote, urlsplit

    storage = _s3_storage()
    if storage is None:
        return ""
    bucket = str(storage.bucket_name)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    path = unquote(parts.path)
    endpoints = []
    if getattr(storage, "endpoint_url", None):
        endpoint = urlsplit(str(storage.endpoint_url))
        endpoints.append(((endpoint.hostname or "").lower(), f":{endpoint.port}" if endpoint.port else ""))
    region = getattr(storage, "region_name", None) or ""
    aws_hosts = ["s3.amazonaws.com"] + ([f"s3.{region}.amazonaws.com", f"s3-{region}.amazonaws.com"] if region else [])
    endpoints += [(aws, "") for aws in aws_hosts]
    key = ""
    for endpoint_host, endpoint_port in endpoints:
        if (host, port) == (endpoint_host, endpoint_port) and path.startswith(f"/{bucket}/"):
            key = path[len(bucket) + 2 :]
        elif (host, port) == (f"{bucket}.{endpoint_host}", endpoint_port):
            key = path[1:]
    custom = str(getattr(storage, "custom_domain", "") or "").lower()
    if custom and f"{host}{port}" == custom:
        key = path[1:]
    return f"s3://{bucket}/{key}" if key else ""


def _s3_problem(url: str) -> str:
    storage = _s3_storage()
    if storage is None:
        return "s3:// paths are read through the media storage, and it is not S3 (configure S3 media storage, or download the files)"
    bucket = url[len("s3://") :].split("/", 1)[0]
    if bucket != storage.bucket_name:
        return f"only the media bucket {storage.bucket_name!r} is read, not {bucket!r}"
    return ""


def _read(source: Source) -> bytes:
    limit = int(settings.ARBITER_IMAGE_MAX_BYTES)
    if source.path is not None:
        return read_capped(source.path, where=source.label, limit=limit)
    assert source.url is not None
    storage = _s3_storage()
    key = source.url[len("s3://") :].split("/", 1)[1] if "/" in source.url[len("s3://") :] else ""
    try:
        body = storage.bucket.Object(key).get()["Body"]
        data: bytes = body.read(limit + 1)
    except Exception as exc:  # botocore's errors: the object is missing or not readable
        raise ValidationFailed(f"cannot be read from S3 ({' '.join(str(exc).split())})", where=source.label) from None
    if len(data) > limit:
        raise ValidationFailed(f"the file is over the {limit:,}-byte limit", where=source.label)
    return data


# --- the real run ------------------------------------------------------------------------------


def _place(source: Source, target: Path) -> None:
    if source.path is not None:
        try:
            os.link(source.path, target)
            return
        except OSError:
            shutil.copyfile(source.path, target)
            return
    target.write_bytes(_read(source))


def new_study_write_bundle(*, plan: NewStudyPlan, folder: Path) -> Path:
    """Write ``study.json`` and the images (linked or copied as they are) into an empty ``folder``."""
    (folder / "images").mkdir(parents=True)
    paths = plan.bundle_paths()
    for i, (relative, source) in enumerate(paths.items(), 1):
        _place(source, folder / relative)
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


# --- uploads (the page and the API) ------------------------------------------------------------


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
) -> NewStudyInput:
    """The input of an unpacked upload: its manifest (a path in the archive), or its top-level
    folders — ``reference`` names the references' folder, every other folder is a system.

    ``manifest`` and ``reference`` come from the request: each must name a path inside the upload
    (:func:`upload_path`), never a file of the server.
    """
    folder = folder.resolve()
    manifest_path = upload_path(folder, manifest, field="manifest") if manifest else None
    reference_path = upload_path(folder, reference, field="reference") if reference else None
    # One top-level folder holding everything (a zipped folder) is looked into; the reference
    # folder may then be named from inside it.
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and entries[0].is_dir() and manifest_path is None and entries[0] != reference_path:
        folder = entries[0]
        if reference_path is not None and not reference_path.is_dir():
            reference_path = upload_path(folder, reference, field="reference")
    shown = (folder, name)
    if manifest_path is not None:
        return NewStudyInput(kind=kind, manifest=manifest_path, options=options, shown_root=shown, comparisons=comparisons)
    folders = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "__MACOSX")))
    systems = tuple((p.name, p) for p in folders if p != reference_path)
    return NewStudyInput(
        kind=kind,
        reference=reference_path,
        systems=systems,
        match=match,
        options=options,
        shown_root=shown,
        comparisons=comparisons,
    )


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


def upload_options(*, options_json: str, slug: str = "", title: str = "") -> dict[str, Any]:
    """The study.json keys of an upload (the page's and the API's fields): the options JSON, plus
    the slug and title fields. An empty slug is made from the title (``slugify``), unless the
    JSON gives one; a key given in both the JSON and a field is refused."""
    options = options_from_json(options_json, where="options")
    fields: dict[str, Any] = {}
    if title.strip():
        fields["title"] = title.strip()
    if slug.strip():
        fields["slug"] = slug.strip()
    elif "slug" not in options and fields.get("title"):
        fields["slug"] = slug_from_title(fields["title"])
    return merged_options([("options", options), ("the slug and title fields", fields)])


def slug_from_title(title: str) -> str:
    """The slug a title suggests: Django's ``slugify`` (ASCII letters, digits, dashes), at most
    the 80 characters a study's slug holds."""
    return slugify(title)[:80].strip("-_")


def options_from_json(text: str, *, where: str) -> dict[str, Any]:
    """An options JSON object (top-level study.json keys)."""
    if not text.strip():
        return {}
    value = load_json(text.encode("utf-8"), filename=where)
    if not isinstance(value, dict):
        raise ValidationFailed("expected a JSON object of study.json keys", where=where)
    return value


def merged_options(sources: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Options from several places (a file, then single keys); a key given twice is refused."""
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for where, values in sources:
        for key, value in values.items():
            if key in merged:
                raise ValidationFailed(f"option {key!r} is given twice (also in {origin[key]})", where=where)
            merged[key] = value
            origin[key] = where
    return merged


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
) -> tuple[NewStudyPlan, Study | None]:
    """The upload page and the API: a ZIP of folders (or with a manifest inside) through the same
    plan and import as the command. Returns the plan and the study (None on a dry run)."""
    from annotation.services.bundles.upload import with_uploaded_bundle

    def run(path: Path, name: str) -> tuple[NewStudyPlan, Study | None]:
        with unpacked_upload(path, name=name) as folder:
            data = upload_input(
                folder, name=name, kind=kind, manifest=manifest, reference=reference, match=match,
                options=options, comparisons=comparisons,
            )
            plan = new_study_plan(data=data)
            if dry_run:
                return plan, None
            study, _ = new_study_create(data=data, plan=plan, user=user)
            return plan, study

    return with_uploaded_bundle(upload, run)
