"""Debian's Chromium, started the one way every render uses (docs/rendering.md).

Never a browser download: Playwright's sync API drives ``/usr/bin/chromium`` (Debian package
``chromium``). The flags make raster output stable (software raster, sRGB, no hinting, no LCD
text, no scrollbars) and put the second layer of isolation in place: a proxy that refuses
everything, loopback included, so a request the in-page interception misses still goes nowhere.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from annotation.render.settings import RenderUnavailable

CHROMIUM = os.environ.get("ARBITER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_PACKAGE = "chromium"
# Port 9 (discard) on loopback: nothing listens there, so every proxied request is refused.
REFUSING_PROXY = "http://127.0.0.1:9"
JS_HEAP_MB = 512

STABLE_FLAGS = (
    "--disable-gpu",
    "--force-color-profile=srgb",
    "--font-render-hinting=none",
    "--disable-lcd-text",
    "--disable-font-subpixel-positioning",
    "--hide-scrollbars",
    "--disable-partial-raster",
    "--disable-threaded-animation",
    "--disable-threaded-scrolling",
    "--disable-checker-imaging",
    "--disable-image-animation-resync",
    "--force-device-scale-factor=1",
    "--mute-audio",
    "--no-first-run",
    "--disable-sync",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--no-pings",
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions,AutofillServerCommunication",
    f"--js-flags=--max-old-space-size={JS_HEAP_MB}",
)
ISOLATION_FLAGS = (
    f"--proxy-server={REFUSING_PROXY}",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)
FLAGS = STABLE_FLAGS + ISOLATION_FLAGS


def check_available() -> None:
    """Raise :class:`RenderUnavailable` (one line naming what to install) unless both are there."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        raise RenderUnavailable(
            f"rendering needs Debian's Chromium at {CHROMIUM}: sudo apt-get install {CHROMIUM_PACKAGE} "
            "(or set ARBITER_CHROMIUM to its path)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise RenderUnavailable(
            "rendering needs Playwright for Python: run `make run` in the checkout, or "
            "`.venv/bin/pip install -e '.[render]'` there (the browser is Debian's "
            f"'{CHROMIUM_PACKAGE}' package, never a download)"
        ) from None


def sandboxed() -> bool:
    """Chromium's own process sandbox: on, unless running as root (it cannot start as root, as in
    this project's containers) or ``ARBITER_RENDER_NO_SANDBOX=1`` says the machine cannot host it."""
    return os.geteuid() != 0 and os.environ.get("ARBITER_RENDER_NO_SANDBOX") != "1"


def launch(playwright: Any, marker: str) -> Any:
    """Start Chromium for one render worker. ``marker`` (an ignored switch) finds its processes."""
    try:
        return playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[*FLAGS, f"--arbiter-render={marker}"],
            chromium_sandbox=sandboxed(),
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
        )
    except Exception as exc:
        if sandboxed() and "sandbox" in str(exc).lower():
            raise RenderUnavailable(
                "Chromium's sandbox cannot start on this machine (no user namespaces?); enable them, or set "
                "ARBITER_RENDER_NO_SANDBOX=1 to render without it (the network and file isolation stay on)"
            ) from None
        raise


def new_marker() -> str:
    return uuid.uuid4().hex


def _cmdlines() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, command line) of every process this user can read."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        table[int(entry.name)] = (ppid, cmdline)
    return table


def kill_renderers(marker: str) -> int:
    """Kill the renderer processes of the browser started with ``marker`` (a page that hangs the
    renderer: a loop in a timer, a blocking call). The browser sees a crash and carries on. Only
    this worker's browser is touched, found by its marker switch; returns how many were killed."""
    table = _cmdlines()
    roots = {pid for pid, (_, cmd) in table.items() if f"--arbiter-render={marker}" in cmd and "--type=" not in cmd}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    killed = 0
    stack = list(roots)
    while stack:
        pid = stack.pop()
        for child in children.get(pid, []):
            stack.append(child)
            if "--type=renderer" in table[child][1]:
                try:
                    os.kill(child, signal.SIGKILL)
                    killed += 1
                except OSError:
                    pass
    return killed


@cache
def fonts_sha256() -> str:
    """A hash of the fonts Chromium can use (fontconfig's list: each file's name and bytes)."""
    digest = hashlib.sha256()
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return "no-fontconfig"
    listing = subprocess.run([fc_list, "--format", "%{file}\n"], capture_output=True, text=True, check=False, timeout=30)
    for name in sorted(set(listing.stdout.split("\n")) - {""}):
        digest.update(name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(Path(name).read_bytes()).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


@cache
def installed_version() -> str:
    """The installed Chromium's version (``156.0.8078.114``) without starting a browser, or ""."""
    try:
        reply = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"\b(\d+(?:\.\d+){2,3})\b", reply.stdout)
    return found[1] if found else ""


@cache
def playwright_version() -> str:
    from importlib.metadata import version

    return version("playwright")
