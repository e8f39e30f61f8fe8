"""Which file a page's request may read: only a file inside the output's own folder.

The page is served from a fixed fake origin (:data:`ORIGIN`); a request's path is looked up under
the folder of the page's HTML file. A path that climbs out (``..``, an encoded ``%2e%2e`` or
``%2f``), a link leading out of the folder, a hidden file and anything that is not a regular file
is refused, and so is a path through a link, even one to a file of the folder: links are never
followed. The browser never reads the disk itself: ``file://`` pages are not used.
"""

from __future__ import annotations

import mimetypes
import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

HOST = "render.invalid"  # RFC 2606: never resolves, so nothing can reach a real host by this name
ORIGIN = f"http://{HOST}"
DOCUMENT_PATH = "/"  # the page itself: no file name, folder or system in its URL (blinding)
MAX_ASSET_BYTES = 64 * 1024 * 1024

# mimetypes reads the machine's tables; the types a page needs are fixed here so every worker of a
# cluster serves the same bytes with the same type.
_TYPES = {
    ".html": "text/html", ".htm": "text/html", ".css": "text/css", ".js": "text/javascript",
    ".mjs": "text/javascript", ".json": "application/json", ".svg": "image/svg+xml", ".png": "image/png",
    ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
    ".avif": "image/avif", ".ico": "image/x-icon", ".bmp": "image/bmp", ".woff": "font/woff",
    ".woff2": "font/woff2", ".ttf": "font/ttf", ".otf": "font/otf", ".mp4": "video/mp4",
    ".webm": "video/webm", ".mp3": "audio/mpeg", ".wav": "audio/wav", ".txt": "text/plain",
    ".csv": "text/csv", ".xml": "application/xml", ".wasm": "application/wasm", ".pdf": "application/pdf",
}


def content_type(path: Path) -> str:
    return _TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def is_page_origin(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "http" and parts.hostname == HOST and parts.port is None


def folder_asset(folder: Path, url: str) -> Path | None:
    """The file under ``folder`` (already resolved) that ``url`` names, or None when refused.

    None for a URL of another origin, a path that climbs out of the folder or goes through a link
    (wherever it leads), a hidden path component, a missing file and anything but a regular file.
    """
    if not is_page_origin(url):
        return None
    path = unquote(urlsplit(url).path)
    if "\x00" in path or "\\" in path:
        return None
    parts = [p for p in path.split("/") if p]
    if not parts or any(p in (".", "..") or p.startswith(".") for p in parts):
        return None
    candidate = folder.joinpath(*parts)
    try:
        real = Path(os.path.realpath(candidate))
    except (OSError, ValueError):
        return None
    if real != candidate or folder not in real.parents:
        return None
    try:
        if not real.is_file() or real.stat().st_size > MAX_ASSET_BYTES:
            return None
    except OSError:
        return None
    return real
