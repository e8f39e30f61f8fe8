"""One render worker: a browser, one tab reused page after page (docs/rendering.md).

:class:`PageRenderer` owns a Playwright instance and a Chromium of its own (Playwright's sync API
is one instance per thread), a browser context with the page's own folder served from
:data:`~annotation.render.sandbox.ORIGIN`, and one tab. Each :meth:`PageRenderer.render` loads the
next page in that tab (a new tab or context per page costs a renderer process each time: three to
five times slower), waits until it settled, advances the fixed clock, captures and measures it.

A page that fails in a way that may leave state behind (timeout, crash, a refused navigation)
gets a new context; a browser that died is started again; the context is renewed every
:data:`CONTEXT_PAGES` pages and the browser every :data:`BROWSER_PAGES`. The page's own time limit
is enforced by Playwright's timeouts and, for a call without one (a script looping in a timer the
clock fires), by a watchdog that kills this worker's renderer process.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from annotation.render import chromium
from annotation.render.media_regions import media_regions
from annotation.render.memory import MemoryLimit
from annotation.render.page_charts import echarts_bytes, echarts_local_file
from annotation.render.page_scripts import (
    CONSOLE_CHARS,
    CONSOLE_KEPT,
    DETERMINISM_JS,
    MEASURE_JS,
    PAINTED_JS,
    READY_JS,
    REPORT_JS,
    RUN_CLOCK_JS,
    WORKER_JS,
    WORKER_MARK,
)
from annotation.render.sandbox import DOCUMENT_PATH, ORIGIN, content_type, folder_asset, is_page_origin
from annotation.render.settings import RenderSettings

CONTEXT_PAGES = 100
BROWSER_PAGES = 500
READY_CAP_MS = 5000  # fonts and images: waited for this long at most, then the page is captured as it is
WATCHDOG_GRACE_S = 2.0
MAX_LISTED = CONSOLE_KEPT  # console errors and refused requests kept per page (the counts are exact)
MAX_TEXT = CONSOLE_CHARS
MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
_LOCAL_RESOURCE = re.compile(r"Not allowed to load local resource: (\S+)")
NO_STORE = {"cache-control": "no-store"}


@dataclass
class PageRender:
    """What one render gave: the PNG when ``status`` is ``ok``, the reason when ``failed``."""

    status: str
    reason: str | None
    png: bytes | None = None
    width: int = 0  # the captured image in CSS pixels
    height: int = 0
    media: list[dict[str, Any]] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    n_console_errors: int = 0
    refused_requests: list[str] = field(default_factory=list)
    n_refused_requests: int = 0
    ms: int = 0
    memory_mb: int = 0  # the browser's peak while this page rendered (annotation.render.memory)
    nondeterministic: list[str] = field(default_factory=list)  # what the page used that is not pinned
    dom_sha256: str | None = None
    dom: dict[str, Any] | None = None  # the DOM export of the checks (annotation.render.page_checks)


class _Visit:
    """The state of one page while it renders (read by the request handlers)."""

    def __init__(self, folder: Path, document: bytes) -> None:
        self.folder = folder
        self.document = document
        # Valid UTF-8 is served as UTF-8 (a page without <meta charset> would otherwise be read as
        # windows-1252); other bytes are left to the page's own declaration.
        try:
            document.decode("utf-8")
            self.content_type = "text/html; charset=utf-8"
        except UnicodeDecodeError:
            self.content_type = "text/html"
        self.served = False
        self.navigation_away: str | None = None
        self.crashed = False
        self.over_memory = False  # the memory limit killed the browser (annotation.render.memory)
        self.unpinned: set[str] = set()
        self.console_errors: list[str] = []
        self.n_console_errors = 0
        self.refused: list[str] = []
        self.n_refused = 0

    def refuse(self, url: str) -> None:
        self.n_refused += 1
        if len(self.refused) < MAX_LISTED:
            self.refused.append(url[:MAX_TEXT])

    def console_error(self, text: str) -> None:
        self.n_console_errors += 1
        if len(self.console_errors) < MAX_LISTED:
            self.console_errors.append(" ".join(text.split())[:MAX_TEXT])


class _Failed(Exception):
    def __init__(self, reason: str, *, renew: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.renew = renew


class PageRenderer:
    """Renders pages one after another with ``settings``; use as a context manager."""

    def __init__(self, settings: RenderSettings) -> None:
        self.settings = settings
        self._playwright: Any = None
        self._manager: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._cdp: Any = None
        self._visit: _Visit | None = None
        self._marker = chromium.new_marker()
        self._memory: MemoryLimit | None = None
        self._context_pages = 0
        self._browser_pages = 0
        self.chromium_version = ""

    # -- life cycle ---------------------------------------------------------------------------

    def __enter__(self) -> PageRenderer:
        chromium.check_available()
        from playwright.sync_api import sync_playwright

        self._manager = sync_playwright()
        self._playwright = self._manager.start()
        self._start_browser()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._close_browser()
        if self._memory is not None:
            self._memory.stop()
            self._memory = None
        if self._manager is not None:
            try:
                self._manager.__exit__(None, None, None)
            finally:
                self._manager = self._playwright = None

    def use(self, settings: RenderSettings) -> None:
        """Render the next pages with ``settings`` (another folder's: another viewport width, say)
        in a new browser context, as a browser of their own would: the viewport, scale and
        JavaScript are the context's, and nothing the last folder's pages left reaches the next.
        The memory limit follows ``settings`` too; the browser itself is kept."""
        self._visit = None
        self._close_context()
        if self._memory is not None and settings.memory_mb != self.settings.memory_mb:
            self._memory.stop()
            self._memory = MemoryLimit(self._marker, settings.memory_mb)
        self.settings = settings

    def _start_browser(self) -> None:
        self._browser = chromium.launch(self._playwright, self._marker)
        if self._memory is None:
            self._memory = MemoryLimit(self._marker, self.settings.memory_mb)
        self.chromium_version = self._browser.version
        self._browser_pages = 0

    def _close_browser(self) -> None:
        self._close_context()
        if self._browser is not None:
            with contextlib.suppress(Exception):
                self._browser.close()
            self._browser = None

    def _close_context(self) -> None:
        if self._context is not None:
            with contextlib.suppress(Exception):
                self._context.close()
        self._context = self._page = self._cdp = None

    def _open_context(self) -> None:
        if self._browser is None or not self._browser.is_connected():
            self._browser = None
            self._start_browser()
        s = self.settings
        context = self._browser.new_context(
            viewport={"width": s.viewport_width, "height": s.viewport_height},
            device_scale_factor=s.scale,
            java_script_enabled=s.javascript,
            service_workers="block",
            accept_downloads=False,
            reduced_motion="reduce",
            color_scheme="light",
            locale="en-US",
            timezone_id="UTC",
        )
        context.route("**/*", self._route)
        context.route_web_socket(re.compile(r".*"), self._websocket)
        context.add_init_script(DETERMINISM_JS)
        page = context.new_page()
        page.on("console", self._console)
        page.on("pageerror", self._page_error)
        page.on("dialog", self._dialog)
        page.on("crash", self._crash)
        page.on("download", self._download)
        context.on("page", self._popup)  # after our own tab: any later one is a popup
        self._context, self._page = context, page
        self._cdp = context.new_cdp_session(page)
        self._context_pages = 0

    # -- event handlers (called by Playwright on this thread while a call waits) ----------------

    def _route(self, route: Any) -> None:
        visit = self._visit
        request = route.request
        url = request.url
        if visit is None:
            route.abort("blockedbyclient")
            return
        try:
            frame = request.frame
            top_level = request.is_navigation_request() and frame.parent_frame is None
            ours = frame.page == self._page
        except Exception:  # a request without a frame (a worker's)
            top_level, ours = False, False
        if top_level:
            if ours and not visit.served and url == ORIGIN + DOCUMENT_PATH:
                visit.served = True
                route.fulfill(status=200, body=visit.document, headers={"content-type": visit.content_type, **NO_STORE})
                return
            # Anything else at the top: navigation away, a reload, a meta refresh, a popup.
            visit.refuse(url)
            if ours and visit.navigation_away is None:
                visit.navigation_away = url
            route.abort("blockedbyclient")
            return
        asset = folder_asset(visit.folder, url)
        if asset is not None:
            try:
                body = asset.read_bytes()
            except OSError:
                body = None
            if body is not None:
                headers = {"content-type": content_type(asset), **NO_STORE}
                if WORKER_MARK in urlsplit(url).query:  # a worker's script: the determinism script first (page_scripts)
                    body, headers["content-type"] = WORKER_JS.encode() + b"\n" + body, "text/javascript"
                route.fulfill(status=200, body=body, headers=headers)
                return
        echarts = echarts_local_file(url)
        if echarts is not None:  # ECharts from a CDN: the npm copy (page_charts), never the network
            route.fulfill(status=200, body=echarts_bytes(echarts), headers={"content-type": "text/javascript", **NO_STORE})
            return
        if is_page_origin(url) and not _climbs_out(visit.folder, url):
            route.fulfill(status=404, body=b"", headers=NO_STORE)  # a missing file of the page's own folder
            return
        visit.refuse(url)
        route.abort("blockedbyclient")

    def _websocket(self, ws: Any) -> None:
        if self._visit is not None:
            self._visit.refuse(ws.url)
        ws.close()

    def _console(self, message: Any) -> None:
        visit = self._visit
        if visit is None or message.type != "error":
            return
        text = message.text
        local = _LOCAL_RESOURCE.search(text)
        if local:
            visit.refuse(local[1])
        visit.console_error(text)

    def _page_error(self, error: Any) -> None:
        if self._visit is not None:
            self._visit.console_error(f"uncaught: {error}")

    def _dialog(self, dialog: Any) -> None:
        with contextlib.suppress(Exception):  # leaving is always allowed (the next page must load); every other dialog is dismissed
            dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss()

    def _crash(self, page: Any) -> None:
        if self._visit is not None:
            self._visit.crashed = True

    def _download(self, download: Any) -> None:
        if self._visit is not None:
            self._visit.refuse(download.url)
        with contextlib.suppress(Exception):
            download.cancel()

    def _popup(self, page: Any) -> None:
        if page == self._page:
            return
        if self._visit is not None:
            self._visit.refuse(page.url or "popup")
        with contextlib.suppress(Exception):
            page.close()

    # -- rendering ------------------------------------------------------------------------------

    def render(self, html_path: Path) -> PageRender:
        """Render one HTML file (its folder is what it may read); never raises for the page's
        own faults: those are a failed render with its reason."""
        started = time.monotonic()
        try:
            document = _read_page(html_path)
        except _Failed as failure:
            return PageRender("failed", failure.reason)
        for attempt in (1, 2):
            if self._page is None:
                self._open_context()
            visit = _Visit(html_path.parent.resolve(), document)
            result, renew = self._attempt(visit, time.monotonic())  # the limit starts once the tab is ready
            if visit.served or visit.over_memory or attempt == 2 or result.status == "ok" or result.reason == self._timeout_reason:
                break
            # Not even loaded: what the tab's last page left behind may be the cause; a new context.
            self._visit = None
            self._close_context()
        result.console_errors, result.n_console_errors = visit.console_errors, visit.n_console_errors
        result.refused_requests, result.n_refused_requests = visit.refused, visit.n_refused
        result.nondeterministic = sorted(visit.unpinned)
        limit = self.settings.max_console_errors
        if result.status == "ok" and limit is not None and visit.n_console_errors > limit:
            result = _failed_copy(result, f"{visit.n_console_errors} console errors, more than the {limit} allowed")
        if visit.navigation_away is not None:  # whatever else went wrong, this is why
            result = _failed_copy(result, f"the page tried to navigate away (to {visit.navigation_away[:120]}); refused")
            renew = True
        if visit.over_memory:
            self._visit = None
            self._close_browser()  # killed: the next page starts a new one
        self._finish(renew or visit.crashed or visit.navigation_away is not None)
        result.ms = round(1000 * (time.monotonic() - started))
        return result

    @property
    def _timeout_reason(self) -> str:
        return f"timed out after {self.settings.timeout_s:g} s"

    def _attempt(self, visit: _Visit, begun: float) -> tuple[PageRender, bool]:
        self._visit = visit
        watchdog = threading.Timer(self.settings.timeout_s + WATCHDOG_GRACE_S, chromium.kill_renderers, [self._marker])
        watchdog.daemon = True
        watchdog.start()
        assert self._memory is not None
        self._memory.arm()
        try:
            result, renew = self._capture(visit, begun + self.settings.timeout_s), False
        except _Failed as failure:
            result, renew = PageRender("failed", failure.reason), failure.renew
        except Exception as exc:
            result, renew = PageRender("failed", _reason(exc, visit, self.settings)), True
        finally:
            watchdog.cancel()
            result.memory_mb, visit.over_memory = self._memory.disarm()
        if visit.over_memory:  # whatever the call it broke said, this is why
            result = _failed_copy(result, f"over the memory limit of {self.settings.memory_mb} MB")
        return result, renew

    def _finish(self, renew: bool) -> None:
        self._visit = None
        self._context_pages += 1
        self._browser_pages += 1
        if self._browser_pages >= BROWSER_PAGES:
            self._close_browser()
            self._start_browser()
        elif renew or self._context_pages >= CONTEXT_PAGES:
            self._close_context()
        else:
            try:  # storage the page kept past its load (IndexedDB, caches): gone before the next page
                self._cdp.send("Storage.clearDataForOrigin", {"origin": ORIGIN, "storageTypes": "all"})
            except Exception:
                self._close_context()

    def _capture(self, visit: _Visit, deadline: float) -> PageRender:
        s = self.settings
        page = self._page

        def left_ms() -> float:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Failed(f"timed out after {s.timeout_s:g} s")
            return 1000 * remaining

        page.goto(ORIGIN + DOCUMENT_PATH, wait_until="load", timeout=left_ms())
        if visit.navigation_away is not None:
            raise _Failed(f"the page tried to navigate away (to {visit.navigation_away[:120]}); refused")
        if s.javascript:
            self._wait_ready(left_ms)
            self._each_frame(visit, RUN_CLOCK_JS, s.settle_ms)
            self._wait_ready(left_ms)
            for report in self._each_frame(visit, REPORT_JS):
                visit.n_console_errors += int(report.get("dropped") or 0)
                visit.unpinned.update(str(u) for u in report.get("unpinned") or [])
            page.evaluate(PAINTED_JS)
        measured = page.evaluate(MEASURE_JS, s.mode == "canvas")
        if visit.crashed:
            raise _Failed("the page crashed the renderer")
        width = s.viewport_width
        if s.mode == "full":
            height = max(int(measured.get("height") or 0), s.viewport_height)
            if height > s.max_height:
                raise _Failed(f"the page is {height:,} px tall, over the height cap of {s.max_height:,} px (--max-height)")
        else:
            height = s.viewport_height
        # Beyond the viewport only when the page is taller: that capture lays the page out again, and a
        # sandboxed frame may miss it (blank in one run of a few).
        png = self._screenshot(width, height, beyond_viewport=s.mode == "full" and height > s.viewport_height)
        left_ms()
        if _one_colour(png):
            raise _Failed("blank page (one colour)", renew=False)
        html = measured.get("html") or ""
        return PageRender(
            "ok", None, png=png, width=width, height=height,
            media=media_regions(measured.get("boxes") or [], width=width, height=height),
            dom_sha256=hashlib.sha256(html.encode("utf-8", "surrogatepass")).hexdigest(),
            dom=measured.get("dom") if isinstance(measured.get("dom"), dict) else None,
        )

    def _each_frame(self, visit: _Visit, script: str, arg: Any = None) -> list[Any]:
        """``script`` evaluated in each frame of the page's own origin (a blocked frame, file://
        say, never gets a document to run in); a frame that went away meanwhile is skipped."""
        page = self._page
        answers = []
        for frame in page.frames:
            if not (frame == page.main_frame or is_page_origin(frame.url) or frame.url == "about:srcdoc"):
                continue
            try:
                answers.append(frame.evaluate(script, arg))
            except Exception:
                if frame == page.main_frame or visit.crashed:
                    raise
        return answers

    def _screenshot(self, width: int, height: int, *, beyond_viewport: bool) -> bytes:
        """The page's top ``width`` × ``height`` CSS pixels as PNG, at the context's device scale.

        DevTools' own call rather than Playwright's screenshot: the page is already still (its
        clock stopped, animations off), so Playwright's extra round trips buy nothing, and
        ``optimizeForSpeed`` encodes the PNG with fast settings (same pixels, a larger file).
        """
        reply = self._cdp.send("Page.captureScreenshot", {
            "format": "png", "optimizeForSpeed": True, "captureBeyondViewport": beyond_viewport,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        })
        return base64.b64decode(reply["data"])

    def _wait_ready(self, left_ms: Any) -> None:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        if self._page.evaluate(READY_JS):
            return
        cap = min(READY_CAP_MS, left_ms())
        try:
            self._page.wait_for_function(READY_JS, timeout=cap, polling=50).dispose()
        except PlaywrightTimeout:
            left_ms()  # over the page's own time limit: a timeout; else capture it as it is


def _read_page(html_path: Path) -> bytes:
    """The HTML file's bytes, never through a link (``O_NOFOLLOW``: a page that is a link, made
    after :func:`~annotation.render.pages.refuse_links` looked, is refused too)."""
    try:
        fd = os.open(html_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # NONBLOCK: a FIFO never holds it
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Failed("the HTML file is a link; links are never followed") from None
        raise _Failed(f"the HTML file cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _Failed("the HTML file is not a regular file")
        size = info.st_size
        if size > MAX_DOCUMENT_BYTES:
            raise _Failed(f"the HTML file is {size:,} bytes, over {MAX_DOCUMENT_BYTES:,}")
        return f.read(MAX_DOCUMENT_BYTES + 1)[:MAX_DOCUMENT_BYTES]


def _climbs_out(folder: Path, url: str) -> bool:
    """A page-origin URL whose path is not a plain path inside the folder (``..``, a link out,
    a hidden file): refused and recorded, unlike a plain missing file."""
    from urllib.parse import unquote, urlsplit

    path = unquote(urlsplit(url).path)
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") or p.startswith(".") for p in parts) or "\\" in path or "\x00" in path:
        return True
    probe = folder.joinpath(*parts) if parts else folder
    for ancestor in (probe, *probe.parents):
        if ancestor == folder:
            return False
        if ancestor.is_symlink():
            return True
    return True


def _one_colour(png: bytes) -> bool:
    """Whether every pixel of the PNG is the same colour (a blank page)."""
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    # Deflate codes a run of one repeated row in at least 100:1 at any level (258-byte matches in
    # about two bytes), so a PNG bigger than this cannot be one colour: no need to decode it.
    if len(png) > (width * 4 + 1) * height // 100 + 4096:
        return False
    import numpy as np
    from imagecodecs import png_decode

    pixels = np.asarray(png_decode(png))
    return bool((pixels == pixels.reshape(-1, *pixels.shape[2:])[0]).all())


def _failed_copy(result: PageRender, reason: str) -> PageRender:
    result.status, result.reason, result.png, result.media, result.dom_sha256 = "failed", reason, None, [], None
    result.dom = None
    return result


def _reason(exc: Exception, visit: _Visit, settings: RenderSettings) -> str:
    text = " ".join(str(exc).split())
    if visit.crashed or "crash" in text.lower():
        return "the page crashed the renderer (memory or a hang; the renderer was restarted)"
    if "Timeout" in type(exc).__name__ or ("timeout" in text.lower() and "exceeded" in text.lower()):
        return f"timed out after {settings.timeout_s:g} s"
    if "closed" in text.lower() or "disconnected" in text.lower():
        return "the page crashed the renderer (memory or a hang; the renderer was restarted)"
    if "net::" in text:
        return f"navigation error ({text[text.index('net::'):][:80]})"
    return f"render error ({type(exc).__name__}: {text[:160]})"
