"""HTML outputs (and references) of a new study, rendered with the study's render settings before
they are read as images; the checks a predicate asks of a render are answered from it
(docs/new-study.md "HTML outputs", docs/protocol.md "Checks computed from the render")."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from annotation.progress import progress_detail, progress_step
from annotation.services.new_study.options import (
    RENDER_KEY,
    render_settings_from_options,
    study_render_from_options,
)
from annotation.services.new_study.plan import NewStudyPlan, Source, item_id
from annotation.services.new_study.sources import is_html, probe_source

if TYPE_CHECKING:
    from annotation.render.pages import RenderPool
    from annotation.render.settings import RenderSettings

VIEWPORT_MIN, VIEWPORT_MAX = 100, 8192  # annotation.render.settings.parse_viewport's range


def render_html_sources(plan: NewStudyPlan, *, cache: Path | None = None, pool: RenderPool | None = None) -> None:
    """Render every HTML source (references and system outputs) with the study's render settings
    (annotation.render: each page served only from its own folder, every other request refused),
    then read the PNGs as images. A system's page that failed to render is its failed render; a
    reference that failed is an error. Stops with one line naming the package when there is no
    browser; a study without HTML never starts one.

    ``cache`` keeps the renders in a folder of the caller's (a new study run's, so the real run
    started from a dry run renders again only a page whose bytes or settings changed); without it
    they go to a temporary folder removed with the plan. Progress: the pages rendered of all, and
    per group (each system, the references) the pages rendered and failed with the reasons.

    ``pool``: the render workers of the whole run (``new_study_plan``'s, kept for the ground truth);
    every folder and width renders through them, so the run starts its browser once, not once per
    folder. Without it, one is opened for these folders."""
    keys: list[tuple[str, str | None, Source]] = [(p, None, s) for p, s in plan.references.items() if is_html(s)]
    keys += [(p, system, s) for (p, system), s in plan.images.items() if is_html(s)]
    # HTML files that no page uses are left out unrendered (not probed as images).
    plan.stray_sources = [s for s in plan.stray_sources if not is_html(s)]
    if RENDER_KEY in plan.options or keys:
        settings_used = render_settings_from_options(plan.options)
        plan.render = study_render_from_options(plan.options)
    if not keys:
        return
    widths = _at_the_references_widths(plan, keys, settings_used)
    if widths:  # the study's viewport: the references' most common width
        settings_used = replace(settings_used, viewport_width=Counter(widths.values()).most_common(1)[0][0])
    assert plan.render is not None
    plan.render = {**plan.render, "viewport": settings_used.viewport}
    if any(source.path is None for _, _, source in keys):
        first = next(source for _, _, source in keys if source.path is None)
        plan.errors.append(f"{first.label}: HTML pages are rendered from files on this machine, not from s3://; download them")
        return
    from annotation.render.page_blocks import render_blocks
    from annotation.render.pages import RenderPool
    from annotation.services.ground_truth import blocks_of_render, page_text_of_render

    if cache is None:
        plan.work_dir = Path(tempfile.mkdtemp(prefix="arbiter-render-"))
        weakref.finalize(plan, shutil.rmtree, plan.work_dir, True)
        root = plan.work_dir
    else:
        root = cache
        root.mkdir(parents=True, exist_ok=True)
    records: dict[tuple[str, str], dict[str, Any]] = {}
    # One run per folder and viewport width (one width per folder unless the references differ),
    # each in a folder named after the folder as uploaded and the width, so a later run finds it.
    width_of = {(page, system): widths.get(page, settings_used.viewport_width) for page, system, _ in keys}
    outs: dict[tuple[Path, int], Path] = {}
    stems: dict[tuple[Path, int], set[str]] = {}
    groups: dict[tuple[Path, int], tuple[str, PurePosixPath]] = {}  # run → (its group, its folder as uploaded)
    for page, system, source in keys:
        assert source.path is not None
        run = (source.path.parent, width_of[page, system])
        shown = PurePosixPath(source.label).parent
        outs.setdefault(run, root / hashlib.sha256(f"{shown}@{run[1]}".encode()).hexdigest()[:16])
        stems.setdefault(run, set()).add(source.path.stem)
        groups.setdefault(run, (system if system is not None else "reference", shown))
    detail: dict[str, Any] = {
        "total": sum(len(s) for s in stems.values()), "rendered": 0, "kept": 0, "groups": {}, "failures": []
    }
    with contextlib.ExitStack() as stack:
        workers = pool if pool is not None else stack.enter_context(RenderPool())
        _render_runs(plan, outs, stems, groups, detail, settings_used, workers, resume=cache is not None)
    for page in plan.pages:  # recorded with the page: rendered at another width than the study's
        if page in widths and widths[page] != settings_used.viewport_width:
            plan.page_viewports[page] = f"{widths[page]}x{settings_used.viewport_height}"
    for page, system, source in keys:
        assert source.path is not None
        out = outs[source.path.parent, width_of[page, system]]
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
            # What the objective protocol scores (a study with ground truth), and what the lens counts
            # the characters of (docs/protocol.md "The disagreement lens"): a reference kind's
            # candidates keep their blocks, as its bundle's ``dom_blocks`` reads them.
            keeps_blocks = plan.wants_truth or (plan.design.keeps_page_text and plan.design.has_reference)
            if keeps_blocks and system is not None and (found := blocks_of_render(record)) is not None:
                plan.dom_blocks[source.label] = found
            # An item keeps its live charts too: the local judge answers a checklist from them
            # (docs/protocol.md "The built-in local judge").
            elif plan.design.keeps_page_text and system is not None and (kept := page_text_of_render(record)):
                plan.dom_blocks[source.label] = kept
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
    _rule_scores(plan, records)
    if plan.render_failed:  # a predicate of an item that failed to render has nothing to ask about
        failed = {item_id(p, s) for p, s in plan.render_failed}
        plan.predicates = [q for q in plan.predicates if q["item"] not in failed]


def _render_runs(
    plan: NewStudyPlan, outs: dict[tuple[Path, int], Path], stems: dict[tuple[Path, int], set[str]],
    groups: dict[tuple[Path, int], tuple[str, PurePosixPath]], detail: dict[str, Any], settings_used: RenderSettings,
    pool: RenderPool, *, resume: bool,
) -> None:
    """Each folder and width of :func:`render_html_sources` rendered into its own folder through
    ``pool``, with the progress of all of them."""
    from annotation.render.pages import render_folder

    finished = 0
    for i, ((folder, width), out) in enumerate(outs.items(), 1):
        group, shown = groups[folder, width]
        several = len(outs) > len({g for g, _ in groups.values()})
        stage = f"rendering HTML pages: {group}" + (f" (folder {i} of {len(outs)})" if several else "")
        progress_step(stage, finished, detail["total"])
        done = render_folder(
            src=folder, out=out, settings=replace(settings_used, viewport_width=width), resume=resume, pool=pool,
            progress=_pages_rendered(stage, finished, detail["total"]), stems=stems[folder, width],
            need_blocks=plan.wants_truth or plan.design.keeps_page_text,
        )
        finished += done.pages
        counts = detail["groups"].setdefault(group, {"rendered": 0, "failed": 0})
        counts["rendered"] += done.rendered
        counts["failed"] += done.failed
        detail["rendered"] += done.pages - done.kept
        detail["kept"] += done.kept
        detail["failures"] += [[str(shown / name), " ".join(reason.split())[:200]] for name, reason in done.failures]
        del detail["failures"][50:]
        progress_detail(detail)


def _at_the_references_widths(
    plan: NewStudyPlan, keys: list[tuple[str, str | None, Source]], settings: RenderSettings
) -> dict[str, int]:
    """Page → the viewport width its HTML is rendered at: its image reference's pixel width (over
    the device scale), when the ``render`` option names no viewport; then each page is shown at
    one CSS-pixel scale beside its reference (docs/rendering.md "One scale per trial"). Empty when
    the researcher gave a viewport (kept; the dry run reports a width it leaves unequal:
    :meth:`NewStudyPlan.width_mismatches`) or no page has an image reference."""
    raw = plan.options.get(RENDER_KEY, {})
    if isinstance(raw, dict) and "viewport" in raw:
        return {}
    html_pages = {page for page, _, _ in keys}
    widths: dict[str, int] = {}
    for page, source in plan.references.items():
        if page not in html_pages or is_html(source) or source.url is not None:
            continue
        probe = plan.probes.setdefault(source.label, probe_source(source))
        width = round(probe.size[0] / settings.scale) if probe.size else 0
        if VIEWPORT_MIN <= width <= VIEWPORT_MAX:
            widths[page] = width
    if widths:
        plan.viewport_from_references = True
    return widths


def _pages_rendered(stage: str, before: int, total: int) -> Callable[[int, int], None]:
    """``render_folder``'s progress (pages rendered of the folder's) as a progress step of
    ``stage``: the pages of the folders ``before`` it plus its own, of all ``total``."""

    def report(done: int, _folder_total: int) -> None:
        progress_step(stage, before + done, total)

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


def _rule_scores(plan: NewStudyPlan, records: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Each rendered output of a brief with requirements scored against them (docs/protocol.md
    "AesCode's rule score"): a failed render scores 0 on each channel its brief asks for."""
    from rule_score.verifiers import rule_result

    for (page, system), record in records.items():
        requirements = plan.requirements.get(page)
        if requirements is not None and not requirements.empty:
            plan.rule_results[page, system] = rule_result(record, requirements).to_json()


def _read_render(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}
