"""Fixtures of the renderer's tests: one real Chromium (Debian's) shared by a module's tests,
pages written into a temporary folder, and a canary HTTP server on loopback."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from annotation.render import chromium
from annotation.render.renderer import PageRender, PageRenderer
from annotation.render.settings import RenderSettings

# Short limits so the hostile pages end fast; the defaults are the command's.
TEST_SETTINGS = RenderSettings(viewport_width=800, viewport_height=600, timeout_s=6.0, max_height=4000, settle_ms=500)


def browser_available() -> None:
    try:
        chromium.check_available()
    except Exception as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def renderer() -> Iterator[PageRenderer]:
    browser_available()
    with PageRenderer(TEST_SETTINGS) as r:
        yield r


@pytest.fixture
def site(tmp_path: Path) -> Callable[..., Path]:
    """``site("p.html", html, **assets)``: write a page and its assets into one folder; its path."""
    folder = tmp_path / "site"
    folder.mkdir()

    def write(name: str, html: str, **assets: bytes | str) -> Path:
        for asset, content in assets.items():
            path = folder / asset.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        page = folder / name
        page.write_text(html, encoding="utf-8")
        return page

    return write


def with_renderer_in_thread[T](settings: RenderSettings, work: Callable[[PageRenderer], T]) -> T:
    """``work(renderer)`` with a renderer of its own, in a thread of its own (Playwright's sync API
    allows one instance per thread, and the module's renderer holds this one)."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with PageRenderer(settings) as r:
                results.append(work(r))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(300)
    if errors:
        raise errors[0]
    return results[0]


def render_in_thread(settings: RenderSettings, *pages: Path) -> list[PageRender] | PageRender:
    """Render ``pages`` with a renderer of its own in a thread of its own; one page gives one result."""
    results = with_renderer_in_thread(settings, lambda r: [r.render(page) for page in pages])
    return results[0] if len(pages) == 1 else results


def pixels(result: PageRender) -> Image.Image:
    assert result.png is not None, result.reason
    return Image.open(io.BytesIO(result.png)).convert("RGB")


def colour_pixels(result: PageRender, colour: tuple[int, int, int]) -> int:
    array = np.asarray(pixels(result))
    return int(np.all(array == colour, axis=-1).sum())


def red_pixels(result: PageRender) -> int:
    """Pixels of pure red (255, 0, 0): what a forbidden file would paint if it were read."""
    return colour_pixels(result, (255, 0, 0))


def png_bytes(colour: tuple[int, int, int], size: tuple[int, int] = (40, 40)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, "PNG")
    return buffer.getvalue()


class Canary:
    """A TCP/HTTP server on loopback that counts every connection made to it."""

    def __init__(self) -> None:
        canary = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.end_headers()
                self.wfile.write(b"<body style='background:#f00'>canary</body>")

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def verify_request(self, request: object, client_address: object) -> bool:
                with canary.lock:
                    canary.connections += 1
                return True

        self.lock = threading.Lock()
        self.connections = 0
        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def canary() -> Iterator[Canary]:
    c = Canary()
    try:
        yield c
    finally:
        c.close()


__all__ = ["TEST_SETTINGS", "Canary", "png_bytes", "red_pixels"]
