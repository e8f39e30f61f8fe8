"""A new study's ground truth (docs/protocol.md "Ground truth"): one file per page in the truth
folder, ``<page>.json`` in the documented format or ``<page>.html`` rendered with the study's own
render settings and read back from its ``dom.blocks`` the way a candidate's render is.

Each page is checked on its own: a page whose truth is refused (not JSON, a box outside the page,
an unknown type, table HTML that does not parse, an HTML page that failed to render) is listed
with one line naming its file and the field, and is left without truth; every other page, image
and candidate of the study is made as it would be without the folder (nothing else is lost).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import weakref
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from annotation.errors import ValidationFailed, excerpt
from annotation.progress import progress_step
from annotation.services.bundles.images import read_capped
from annotation.services.ground_truth import TruthError, truth_checked, truth_of_render
from annotation.services.new_study.inputs import _compile, _page_id, shown_path
from annotation.services.new_study.plan import NewStudyInput, NewStudyPlan
from annotation.services.new_study.sources import HTML_SUFFIXES

if TYPE_CHECKING:
    from annotation.render.pages import RenderPool

TRUTH_SUFFIXES = (".json", *HTML_SUFFIXES)


def read_truth(data: NewStudyInput, plan: NewStudyPlan, *, pool: RenderPool | None = None) -> None:
    """Fill the plan's ground truth from ``data.truth`` (after the study's own pages are read and
    rendered, so an HTML truth page is rendered with the settings the candidates were; through
    ``pool``, the run's render workers, when given)."""
    if data.truth is None:
        return
    if not plan.design.has_reference:
        raise ValidationFailed(
            f"ground truth is scored against a page's candidates; a {data.kind} study has none",
            where="--truth",
        )
    folder = data.truth
    if not folder.is_dir():
        raise ValidationFailed("no such folder (--truth)", where=shown_path(folder, data))
    plan.wants_truth = True
    with os.scandir(folder) as entries:
        names = sorted(e.name for e in entries if e.is_file() and not e.name.startswith("."))
    root = folder.resolve()
    pages = set(plan.pages)
    matcher = _compile(data.match)  # page ids as the outputs' are read (the stem, or --match's group)
    json_files: dict[str, Path] = {}
    html_files: dict[str, Path] = {}
    for name in names:
        path = folder / name
        label = shown_path(path, data)
        suffix = path.suffix.lower()
        if suffix not in TRUTH_SUFFIXES:
            continue  # an asset of the HTML truth pages (an image, a stylesheet), served when they render
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            plan.truth_problems[path.stem] = f"{label}: the path climbs out of its folder"
            continue
        page = _page_id(name, matcher)
        if not page:
            plan.stray.append(f"{label} (does not match --match)")
            continue
        if page not in pages:
            plan.stray.append(f"{label} (ground truth of no page of the study)")
            continue
        if page in json_files or page in html_files:
            plan.truth_problems[page] = f"{label}: page {excerpt(page)} has two ground-truth files; give one"
            continue
        (html_files if suffix in HTML_SUFFIXES else json_files)[page] = path
    limit = int(settings.ARBITER_IMAGE_MAX_BYTES)
    for i, (page, path) in enumerate(sorted(json_files.items()), 1):
        label = shown_path(path, data)
        try:
            raw = read_capped(path, where=label, limit=limit)
            decoded = json.loads(raw.decode("utf-8-sig"))
            plan.truth[page] = truth_checked(decoded)
            plan.truth_sources[page] = "json"
        except ValidationFailed as exc:
            plan.truth_problems[page] = str(exc)
        except UnicodeDecodeError as exc:
            plan.truth_problems[page] = f"{label}: not UTF-8 text (byte {exc.start})"
        except json.JSONDecodeError as exc:
            plan.truth_problems[page] = f"{label}: not JSON (line {exc.lineno}, column {exc.colno})"
        except TruthError as exc:
            plan.truth_problems[page] = f"{label}: {exc}"
        progress_step("reading the ground truth", i, len(json_files))
    if html_files:
        _render_truth(data, plan, folder, html_files, pool)


def _render_truth(
    data: NewStudyInput, plan: NewStudyPlan, folder: Path, files: dict[str, Path], pool: RenderPool | None
) -> None:
    """Render the HTML ground-truth pages with the study's render settings (at the width the page's
    candidates were rendered at) and read their blocks as ground truth."""
    from annotation.render.pages import render_folder
    from annotation.services.new_study.html_outputs import _read_render
    from annotation.services.new_study.options import render_settings_from_options

    base = render_settings_from_options(plan.options)
    if plan.render and isinstance(plan.render.get("viewport"), str):
        width, _, height = plan.render["viewport"].partition("x")
        base = replace(base, viewport_width=int(width), viewport_height=int(height))
    if data.render_cache is not None:
        root = data.render_cache
        root.mkdir(parents=True, exist_ok=True)
    else:
        if plan.work_dir is None:
            plan.work_dir = Path(tempfile.mkdtemp(prefix="arbiter-render-"))
            weakref.finalize(plan, shutil.rmtree, plan.work_dir, True)
        root = plan.work_dir
    by_width: dict[int, set[str]] = {}
    for page in files:
        shown = plan.page_viewports.get(page)
        width = int(shown.partition("x")[0]) if shown else base.viewport_width
        by_width.setdefault(width, set()).add(files[page].stem)
    done = 0
    for width, stems in sorted(by_width.items()):
        out = root / hashlib.sha256(f"truth:{shown_path(folder, data)}@{width}".encode()).hexdigest()[:16]
        render_folder(
            src=folder,
            out=out,
            settings=replace(base, viewport_width=width),
            resume=data.render_cache is not None,
            stems=stems,
            need_blocks=True,
            pool=pool,
            progress=lambda n, _total, before=done: progress_step(  # type: ignore[misc]
                "rendering the ground-truth HTML pages", before + n, len(files)
            ),
        )
        done += len(stems)
        for page, path in files.items():
            if path.stem not in stems:
                continue
            label = shown_path(path, data)
            record = _read_render(out / f"{path.stem}.json")
            if record.get("status") != "ok":
                reason = " ".join(str(record.get("reason") or "no render was written").split())[:200]
                plan.truth_problems[page] = (
                    f"{label}: the ground-truth page failed to render ({excerpt(reason, limit=200)})"
                )
                continue
            try:
                plan.truth[page] = truth_of_render(record)
                plan.truth_sources[page] = "html"
            except TruthError as exc:
                plan.truth_problems[page] = f"{label}: {exc}"
