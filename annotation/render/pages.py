"""A folder of HTML outputs to ``OUT/<stem>.png`` + ``OUT/<stem>.json`` (docs/rendering.md).

:func:`render_folder` is the one way in (``manage.py render_pages``, ``new_study`` and the
benchmark call it). Every ``*.html`` directly in the source folder is one page; its assets are the
files of that folder. ``workers`` threads each run a :class:`~annotation.render.renderer.PageRenderer`
(a browser of its own) over a shared queue; a :class:`RenderPool` keeps them, and their browsers,
from one folder to the next (``new_study``). Each page's JSON is written last, after its PNG, so an
interrupted run leaves every finished page whole; run again, a page whose JSON says it was made
from the same bytes with the same settings and browser is not rendered again.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from annotation.errors import ArbiterError
from annotation.render import chromium
from annotation.render.renderer import PageRender, PageRenderer
from annotation.render.settings import RenderSettings

HTML_SUFFIXES = (".html", ".htm")


@dataclass
class RenderRun:
    """What :func:`render_folder` did: counts, the failed pages with reasons, and warnings."""

    pages: int = 0
    rendered: int = 0
    failed: int = 0
    kept: int = 0  # finished by an earlier run with the same settings: not rendered again
    failures: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def html_pages(src: Path) -> list[Path]:
    """The HTML files directly in ``src``, sorted; one-line errors naming the folder or file (a
    link anywhere in the folder included: :func:`refuse_links`)."""
    if not src.is_dir():
        raise ArbiterError(f"{src}: no such folder")
    refuse_links(src)
    pages: dict[str, Path] = {}
    for path in sorted(src.iterdir()):
        if path.name.startswith(".") or path.suffix.lower() not in HTML_SUFFIXES or not path.is_file():
            continue
        if path.stem in pages:
            raise ArbiterError(f"{path}: page '{path.stem}' found twice (also {pages[path.stem]})")
        pages[path.stem] = path
    if not pages:
        raise ArbiterError(f"{src}: no HTML files (*.html) in this folder")
    return list(pages.values())


def refuse_links(src: Path) -> None:
    """A one-line error naming the first link (to a file or a folder) in ``src`` or below it.

    Links are never followed: a page or an asset that is a link (``p.html -> /proc/self/environ``,
    a tarball of model output extracted with its links) would have the renderer read whatever it
    points at. Hidden names are skipped, as they are never served. The renderer refuses a link at
    request time too (:func:`~annotation.render.sandbox.folder_asset`), so a link made after this
    check is not read either.
    """
    for folder, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted([*dirs, *files]):
            path = Path(folder) / name
            if not name.startswith(".") and path.is_symlink():
                raise ArbiterError(f"{path}: a link; pages and their files are never read through a link (copy the file in)")


def render_manifest(settings: RenderSettings, chromium_version: str) -> dict[str, Any]:
    """What every render of a run shares besides its settings (its DOM digest is added per page)."""
    return {
        "chromium": chromium_version,
        "playwright": chromium.playwright_version(),
        "flags": list(chromium.FLAGS),
        "fonts_sha256": chromium.fonts_sha256(),
        "viewport": settings.viewport,
        "scale": settings.scale,
    }


def _same_run(record: dict[str, Any], settings: dict[str, Any], manifest: dict[str, Any]) -> bool:
    kept = record.get("manifest") or {}
    return record.get("settings") == settings and all(kept.get(k) == v for k, v in manifest.items())


def _write_atomic(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def page_record(result: PageRender, *, settings: RenderSettings, manifest: dict[str, Any], source_sha256: str,
                image: str | None) -> dict[str, Any]:
    """The JSON of one render (docs/rendering.md "The JSON of a render")."""
    return {
        "status": result.status,
        "reason": result.reason,
        "image": image,
        "width": result.width if result.status == "ok" else None,
        "height": result.height if result.status == "ok" else None,
        "settings": settings.to_json(),
        "media": result.media,
        "dom": result.dom if result.status == "ok" else None,
        "console_errors": result.console_errors,
        "n_console_errors": result.n_console_errors,
        "refused_requests": result.refused_requests,
        "n_refused_requests": result.n_refused_requests,
        "ms": result.ms,
        "memory_mb": result.memory_mb,
        "nondeterministic": result.nondeterministic,
        "source_sha256": source_sha256,
        "manifest": {**manifest, "dom_sha256": result.dom_sha256},
    }


class RenderPool:
    """Render worker threads kept across :func:`render_folder` calls: a ``new_study`` run renders
    every folder (and viewport width) through the same browsers rather than starting one per folder
    (about a second each). Use as a context manager; leaving it stops the workers and closes their
    browsers, after an error or a cancelled run too.

    Each thread starts its :class:`~annotation.render.renderer.PageRenderer` at its first page (a
    pool that renders nothing starts no browser) and keeps it (Playwright's sync API is one instance
    per thread, so a renderer stays on its thread). A folder's first page on a worker gets a new
    browser context with that folder's settings (:meth:`PageRenderer.use`), as a browser of its own
    would: nothing a page of one folder left behind reaches another folder's page.
    """

    def __init__(self, workers: int = 1) -> None:
        if workers < 1 or workers > 16:
            raise ArbiterError(f"--workers: expected 1 to 16, got {workers}")
        self.workers = workers
        self._todo: queue.Queue[tuple[Path, _FolderRun] | None] = queue.Queue()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> RenderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (each finishes the page it renders) and close their browsers."""
        for _ in self._threads:
            self._todo.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _submit(self, folder: _FolderRun, pages: list[Path]) -> None:
        while len(self._threads) < self.workers:  # started at the first folder; a browser at a worker's first page
            thread = threading.Thread(target=self._work, name=f"arbiter-render-{len(self._threads)}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for path in pages:
            self._todo.put((path, folder))

    def _work(self) -> None:
        renderer: PageRenderer | None = None
        current: _FolderRun | None = None
        try:
            while (task := self._todo.get()) is not None:
                path, folder = task
                if folder.stopped:  # cancelled, or a worker failed: the folder's other pages are left
                    folder.done.put(_SKIPPED)
                    continue
                try:
                    if renderer is None:
                        renderer = PageRenderer(folder.settings)
                        try:
                            renderer.__enter__()
                        except BaseException:
                            renderer.close()
                            renderer = None
                            raise
                    elif current is not folder:
                        renderer.use(folder.settings)
                    current = folder
                    manifest = render_manifest(folder.settings, renderer.chromium_version)
                    result = renderer.render(path)
                    folder.done.put((path, _write_page(folder.out, path, result, folder.settings, manifest)))
                except BaseException as exc:  # render_folder raises it; this worker's browser is closed
                    folder.stopped = True
                    folder.done.put(exc)
                    if renderer is not None:
                        renderer.close()
                    renderer, current = None, None
        finally:
            if renderer is not None:
                renderer.close()


@dataclass
class _FolderRun:
    """One :func:`render_folder` call's share of a :class:`RenderPool`: where its pages go, with
    which settings, and the queue its workers answer on (one item per page)."""

    out: Path
    settings: RenderSettings
    done: queue.Queue[tuple[Path, dict[str, Any]] | BaseException | object] = field(default_factory=queue.Queue)
    stopped: bool = False


_SKIPPED = object()  # a page a worker left because its folder stopped


def render_folder(
    *,
    src: Path,
    out: Path,
    settings: RenderSettings,
    workers: int = 1,
    resume: bool = True,
    progress: Callable[[int, int], None] | None = None,
    stems: Collection[str] | None = None,
    need_blocks: bool = False,
    pool: RenderPool | None = None,
) -> RenderRun:
    """Render every page of ``src`` (or those whose stem ``stems`` names) into ``out``. Failed
    renders are data: each gets its JSON (``status: failed`` and the reason) and no PNG. Raises
    only for bad input or no browser.

    ``need_blocks``: an earlier render kept by ``resume`` must have its blocks (``dom.blocks``,
    docs/protocol.md "Blocks from the DOM"); one made before blocks existed is rendered again (a
    study with ground truth scores them).

    ``pool``: the caller's :class:`RenderPool` (its workers, not ``workers``), kept open after this
    folder for the next; without it, a pool of ``workers`` is started for this folder and closed."""
    pages = html_pages(src)
    if stems is not None:
        pages = [path for path in pages if path.stem in stems]
    if workers < 1 or workers > 16:
        raise ArbiterError(f"--workers: expected 1 to 16, got {workers}")
    chromium.check_available()
    out.mkdir(parents=True, exist_ok=True)
    run = RenderRun(pages=len(pages))
    settings_json = settings.to_json()

    pending = list(pages)
    if resume:
        # A page is kept when its bytes, the settings, the flags, the fonts and the browser are the same.
        pending = []
        stale = 0
        probe = {"fonts_sha256": chromium.fonts_sha256(), "flags": list(chromium.FLAGS)}
        if version := chromium.installed_version():
            probe["chromium"] = version
        for path in pages:
            record = _read_record(out / f"{path.stem}.json")
            if record is None:
                pending.append(path)
                continue
            unchanged = (
                _same_run(record, settings_json, probe)
                and record.get("source_sha256") == _sha256(path)
                and (record.get("status") == "failed" or (out / f"{path.stem}.png").is_file())
                and (not need_blocks or record.get("status") == "failed" or _has_blocks(record))
            )
            if unchanged:
                run.kept += 1
                _count(run, path, record)
            else:
                stale += 1
                pending.append(path)
        if stale:
            run.warnings.append(
                f"{out}: {stale} earlier render(s) were made from other files, with other settings or another "
                "browser or fonts; they are rendered again with these settings"
            )
    if not pending:
        return run
    owned = pool is None
    used = RenderPool(min(workers, len(pending))) if pool is None else pool
    try:
        return _render_pending(run, pending, _FolderRun(out=out, settings=settings), used, progress)
    finally:
        if owned:
            used.close()


def _render_pending(run: RenderRun, pending: list[Path], folder: _FolderRun, pool: RenderPool,
                    progress: Callable[[int, int], None] | None) -> RenderRun:
    """The pending pages of one folder through ``pool``; waits for every one of them (rendered,
    failed or left), then raises the first worker error, if any."""
    pool._submit(folder, pending)
    answered = 0
    finished = 0
    error: BaseException | None = None
    try:
        if progress:
            progress(run.kept, run.pages)
        while answered < len(pending):
            item = folder.done.get()
            answered += 1
            if isinstance(item, BaseException):
                error = error or item
            elif isinstance(item, tuple):
                finished += 1
                _count(run, *item)
                if progress:
                    progress(run.kept + finished, run.pages)
    except BaseException:
        # The caller stopped the run (its progress raised: a cancelled upload): the workers take no
        # further page of this folder and finish the one they render; the pool's owner then closes
        # the browsers (render_folder's own pool before this raises).
        folder.stopped = True
        while answered < len(pending):
            folder.done.get()
            answered += 1
        raise
    if error is not None:
        raise error
    return run


def _count(run: RenderRun, path: Path, record: dict[str, Any]) -> None:
    if record.get("status") == "ok":
        run.rendered += 1
    else:
        run.failed += 1
        run.failures.append((path.name, str(record.get("reason"))))


def _write_page(out: Path, path: Path, result: PageRender, settings: RenderSettings, manifest: dict[str, Any]) -> dict[str, Any]:
    png_path = out / f"{path.stem}.png"
    if result.status == "ok" and result.png is not None:
        _write_atomic(png_path, result.png)
        image: str | None = png_path.name
    else:
        png_path.unlink(missing_ok=True)
        image = None
    record = page_record(result, settings=settings, manifest=manifest, source_sha256=_sha256(path), image=image)
    _write_atomic(out / f"{path.stem}.json", (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode())
    return record


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _has_blocks(record: dict[str, Any]) -> bool:
    dom = record.get("dom")
    return isinstance(dom, dict) and isinstance(dom.get("blocks"), list)


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
