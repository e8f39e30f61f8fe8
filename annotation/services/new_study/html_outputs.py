"""HTML outputs (and references) of a new study, rendered with the study's render settings before
they are read as images; the checks a predicate asks of a render are answered from it
(docs/new-study.md "HTML outputs", docs/protocol.md "Checks computed from the render")."""

from __future__ import annotations

import json
import shutil
import tempfile
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from annotation.progress import progress_step
from annotation.services.new_study.options import (
    RENDER_KEY,
    render_settings_from_options,
    study_render_from_options,
)
from annotation.services.new_study.plan import NewStudyPlan, Source, item_id
from annotation.services.new_study.sources import is_html, probe_source

if TYPE_CHECKING:
    from annotation.render.settings import RenderSettings

VIEWPORT_MIN, VIEWPORT_MAX = 100, 8192  # annotation.render.settings.parse_viewport's range


def render_html_sources(plan: NewStudyPlan) -> None:
    """Render every HTML source (references and system outputs) with the study's render settings
    (annotation.render: each page served only from its own folder, every other request refused),
    then read the PNGs as images. A system's page that failed to render is its failed render; a
    reference that failed is an error. Stops with one line naming the package when there is no
    browser; a study without HTML never starts one."""
    keys: list[tuple[str, str | None, Source]] = [(p, None, s) for p, s in plan.references.items() if is_html(s)]
    keys += [(p, system, s) for (p, system), s in plan.images.items() if is_html(s)]
    # HTML files that no page uses are left out unrendered (not probed as images).
    plan.stray_sources = [s for s in plan.stray_sources if not is_html(s)]
    if RENDER_KEY in plan.options or keys:
        settings_used = render_settings_from_options(plan.options)
        plan.render = study_render_from_options(plan.options)
    if not keys:
        return
    settings_used = _at_the_references_width(plan, settings_used)
    assert plan.render is not None
    plan.render = {**plan.render, "viewport": settings_used.viewport}
    if any(source.path is None for _, _, source in keys):
        first = next(source for _, _, source in keys if source.path is None)
        plan.errors.append(f"{first.label}: HTML pages are rendered from files on this machine, not from s3://; download them")
        return
    from annotation.render.page_blocks import render_blocks
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
            plan.rendered.add(source.label)
            rendered = Source(label=source.label, path=png, suffix=".png")
            plan.render_media[source.label] = [m for m in record.get("media") or [] if isinstance(m, dict)]
            plan.render_blocks[source.label] = render_blocks(record)
            plan.media_known.add(source.label)
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


def _at_the_references_width(plan: NewStudyPlan, settings: RenderSettings) -> RenderSettings:
    """The render settings with the viewport's width the image references' (their most common
    pixel width, over the device scale) when the ``render`` option names no viewport: each page is
    then rendered at its reference's width and shown at one CSS-pixel scale beside it
    (docs/rendering.md "One scale per trial"). A viewport the researcher gave is kept; the dry run
    reports a width it leaves unequal (:meth:`NewStudyPlan.width_mismatches`)."""
    raw = plan.options.get(RENDER_KEY, {})
    if isinstance(raw, dict) and "viewport" in raw:
        return settings
    widths = []
    for source in plan.references.values():
        if not is_html(source) and source.url is None:
            probe = plan.probes.setdefault(source.label, probe_source(source))
            if probe.size:
                widths.append(probe.size[0])
    if not widths:
        return settings
    width = round(Counter(widths).most_common(1)[0][0] / settings.scale)
    if not VIEWPORT_MIN <= width <= VIEWPORT_MAX:
        return settings
    plan.viewport_from_references = True
    return replace(settings, viewport_width=width)


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
