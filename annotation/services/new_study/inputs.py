"""Reading a new study's inputs into its plan: the folders (one per system, plus the references),
``--match`` patterns, a CSV / JSONL manifest, the briefs and the predicates (docs/new-study.md)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from annotation.errors import ValidationFailed, excerpt, excerpt_path
from annotation.services.bundles.reference_format import bundle_path_problem
from annotation.services.new_study.options import MEDIA_KEY, REQUIREMENTS_KEY, media_row_checked
from annotation.services.new_study.plan import NewStudyInput, NewStudyPlan, Source, item_id
from annotation.services.new_study.sources import (
    HTML_SUFFIXES,
    IMAGE_SUFFIXES,
    bucket_url_as_s3,
    is_html,
    s3_problem,
)
from annotation.services.new_study.tables import table_rows_of_text

MANIFEST_COLUMNS = ("page", "reference", "system", "image", "text")
PREDICATE_COLUMNS = ("page", "system", "question", "type", "automatic", "id", "check", "text")


def shown_path(path: Path, data: NewStudyInput) -> str:
    if data.shown_root is not None:
        root, name = data.shown_root
        try:
            return f"{name}/{path.relative_to(root).as_posix()}"
        except ValueError:
            pass
    return str(path)


def _folder_files(folder: Path, data: NewStudyInput, what: str) -> list[Path]:
    if not folder.is_dir():
        raise ValidationFailed(f"no such folder ({what})", where=shown_path(folder, data))
    # scandir: the file type comes with the listing (no stat per file, unless it is a link).
    with os.scandir(folder) as entries:
        listed = [(e.name, e.is_symlink()) for e in entries if e.is_file() and not e.name.startswith(".")]
    root = folder.resolve()
    for name, link in listed:
        # A link may point at another file of its own folder, never out of it (as in manifests).
        if link and not (folder / name).resolve().is_relative_to(root):
            raise ValidationFailed(f"{excerpt_path(name)}: the path climbs out of its folder", where=shown_path(folder, data))
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
    folder: Path,
    data: NewStudyInput,
    what: str,
    pattern: _Matcher | None,
    plan: NewStudyPlan,
    maybe_pages: dict[str, Source] | None = None,
) -> dict[str, Source]:
    """Page id → the folder's file for it; strays and duplicate stems go to the plan.

    Beside HTML pages, the other files are their assets (photos, fonts, scripts): served to the
    pages of this folder when they render, neither study files nor strays. A references folder
    may mix PNG and HTML references, so there (``maybe_pages`` given) an image named for a page
    of its own is put in ``maybe_pages``: the caller takes it as that page's reference when a
    system has the page, and as an asset otherwise."""
    found: dict[str, Source] = {}
    files = list(_folder_files(folder, data, what))
    holds_html = any(path.suffix.lower() in HTML_SUFFIXES for path in files)
    for path in files:
        label = shown_path(path, data)
        if holds_html and path.suffix.lower() not in HTML_SUFFIXES:
            image = path.suffix.lower() in IMAGE_SUFFIXES and len(path.name) <= NAME_MAX_CHARS
            page = _page_id(path.name, pattern) if maybe_pages is not None and image else None
            if maybe_pages is not None and page:
                maybe_pages[page] = Source(label=label, path=path, suffix=path.suffix.lower())
            else:
                plan.assets.append(label)
            continue
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


def read_folders(data: NewStudyInput, plan: NewStudyPlan) -> None:
    pattern = _compile(data.match)
    names: dict[str, Path] = {}
    for name, folder in data.systems:
        if name in names:
            raise ValidationFailed(
                f"system {name!r} is given twice (also {shown_path(names[name], data)}); give each system once",
                where=shown_path(folder, data),
            )
        names[name] = folder
    maybe_references: dict[str, Source] = {}
    if plan.design.has_reference:
        plan.references = (
            _index_folder(data.reference, data, "--reference", pattern, plan, maybe_references) if data.reference else {}
        )
    per_system = {name: _index_folder(folder, data, f"--system {name}", pattern, plan) for name, folder in data.systems}
    system_pages = {page for files in per_system.values() for page in files}
    for page, source in maybe_references.items():
        if page in system_pages and page not in plan.references:
            plan.references[page] = source  # a PNG reference beside HTML references
        else:
            plan.assets.append(source.label)  # a file the HTML references use
    plan.systems = list(per_system)
    if plan.design.has_reference:
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
    shown = shown_path(path, data)
    if not path.is_file():
        raise ValidationFailed("no such file", where=shown)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(f"not UTF-8 text (byte {exc.start})", where=shown) from None
    yield from table_rows_of_text(text, shown=shown, columns=columns, jsonl=path.suffix.lower() in (".jsonl", ".ndjson"))


def _manifest_source(value: str, manifest: Path, where: str, data: NewStudyInput, plan: NewStudyPlan) -> Source:
    """A manifest's path: relative to the manifest's folder (never out of it), or s3://."""
    suffix = Path(value.split("?")[0]).suffix.lower() or ".img"
    shown = excerpt_path(value)
    if value.startswith("s3://"):
        problem = s3_problem(value)
        if problem:
            plan.errors.append(f"{where}: {shown}: {problem}")
        return Source(label=value, url=value, suffix=suffix)
    if re.match(r"^https?://", value, flags=re.IGNORECASE) and (in_bucket := bucket_url_as_s3(value)):
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
    return Source(label=shown_path(manifest.parent / value, data), path=path, suffix=suffix)


def read_manifest(data: NewStudyInput, plan: NewStudyPlan) -> None:
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
            if not plan.design.has_reference:
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
    if plan.design.has_reference:
        for page in plan.pages:
            if page not in plan.references:
                raise ValidationFailed(f"page {excerpt(page)} has no reference image in any row", where=shown_path(manifest, data))


def read_media_option(media: Any, plan: NewStudyPlan) -> None:
    """The ``media`` option's regions (docs/new-study.md "Media regions of PNG pages") given to
    the plan's image pages: a reference (``system`` empty) or a system's image, never a rendered
    HTML page (its regions come from its DOM, docs/protocol.md "Media regions from the DOM")."""
    if media is None:
        return
    if not isinstance(media, list):
        raise ValidationFailed("expected a list of rows {page, system, kind, bbox_1000}", where=f"option {MEDIA_KEY}")
    given: set[str] = set()
    for i, row in enumerate(media):
        where = f"option {MEDIA_KEY}[{i}]"
        page, system, regions = media_row_checked(row, where=where)
        source = plan.images.get((page, system)) if system else plan.references.get(page)
        if source is None:
            what = f"system {excerpt(system)}'s image" if system else "a reference image"
            raise ValidationFailed(f"page {excerpt(page)} has no {what}", where=where)
        if source.label in plan.media_known and source.label not in given:
            raise ValidationFailed(
                f"{source.label} is rendered from HTML: its media regions come from its DOM", where=where
            )
        given.add(source.label)
        plan.media_known.add(source.label)
        plan.render_media.setdefault(source.label, []).extend(r.to_json() for r in regions)


def read_requirements(requirements: Any, plan: NewStudyPlan) -> None:
    """The ``requirements`` option, ``{page id: requirements}`` (docs/protocol.md "AesCode's rule
    score"), checked and kept with the plan; each page must be one of the study's."""
    if requirements is None:
        return
    from rule_score.requirements import RequirementsError, parse_requirements

    if not isinstance(requirements, dict):
        raise ValidationFailed("expected a JSON object {page id: requirements}", where=f"option {REQUIREMENTS_KEY}")
    pages = set(plan.pages)
    for page, value in requirements.items():
        where = f"option {REQUIREMENTS_KEY}.{page}"
        if page not in pages:
            raise ValidationFailed(f"no page {excerpt(page)} in the study's files", where=f"option {REQUIREMENTS_KEY}")
        try:
            plan.requirements[page] = parse_requirements(value)
        except RequirementsError as error:
            raise ValidationFailed(error.reason, where=f"{where}{error.path}") from None


def read_briefs(data: NewStudyInput, plan: NewStudyPlan) -> None:
    if data.briefs is None:
        return
    for where, row in _table_rows(data.briefs, data, ("page", "text")):
        if not row.get("page"):
            raise ValidationFailed("the page column is empty", where=where)
        plan.texts[row["page"]] = row.get("text", "")


def read_predicates(data: NewStudyInput, plan: NewStudyPlan) -> None:
    if data.predicates is None:
        return
    if not plan.design.takes_predicates:
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
    if not is_html(source):
        raise ValidationFailed(f"a check is answered from an HTML output's render; {source.label} is an image", where=where)
    return check, text
