"""Debian's Chromium, started the one way every render uses (docs/rendering.md).

Never a browser download: Playwright's sync API drives ``/usr/bin/chromium`` (Debian package
``chromium``). The flags make raster output stable (software raster, sRGB, no hinting, no LCD
text, no scrollbars) and put the second layer of isolation in place: a proxy that refuses
everything, loopback included, so a request the in-page interception misses still goes nowhere.
As root, the browser runs as an unprivileged user with its own sandbox on, and its environment
is never the server's (:func:`launch`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from annotation.render.settings import RenderUnavailable

CHROMIUM = os.environ.get("ARBITER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_PACKAGE = "chromium"
# Port 9 (discard) on loopback: nothing listens there, so every proxied request is refused.
REFUSING_PROXY = "http://127.0.0.1:9"
JS_HEAP_MB = 512
DEFAULT_BROWSER_USERS = ("arbiter-render", "nobody")
BROWSER_PATH = "/usr/local/bin:/usr/bin:/bin"

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
    # IsolateSandboxedIframes: a sandboxed frame in the page's own process, where the determinism script reaches it.
    "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions,AutofillServerCommunication,"
    "IsolateSandboxedIframes",
    # Animated GIF, APNG and WebP images stand at their first frame (imageAnimationPolicy=2: no
    # animation); Playwright's own settings repeated (the last --blink-settings wins).
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4,"
    "imageAnimationPolicy=2",
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
    """Chromium's own process sandbox: on (as root too: the browser then runs as
    :func:`browser_user`), unless ``ARBITER_RENDER_NO_SANDBOX=1`` says the machine cannot host it."""
    return os.environ.get("ARBITER_RENDER_NO_SANDBOX") != "1"


@dataclass(frozen=True)
class BrowserUser:
    """The unprivileged user the browser runs as when the renderer runs as root."""

    name: str
    uid: int
    gid: int


def browser_user() -> BrowserUser | None:
    """Who the browser runs as: None (the renderer's own user) unless the renderer runs as root;
    then ``ARBITER_RENDER_USER``, by default the system user ``arbiter-render`` (``make chromium``
    and the container image create it), else ``nobody``. One line when that user does not exist."""
    if os.geteuid() != 0:
        return None
    names = [os.environ["ARBITER_RENDER_USER"]] if os.environ.get("ARBITER_RENDER_USER") else list(DEFAULT_BROWSER_USERS)
    for name in names:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid == 0 or entry.pw_gid == 0:
            raise RenderUnavailable(f"ARBITER_RENDER_USER: {name!r} is root or in group root; name an unprivileged user")
        return BrowserUser(name, entry.pw_uid, entry.pw_gid)
    raise RenderUnavailable(
        f"rendering as root needs an unprivileged user for the browser: {names[0]!r} does not exist "
        "(make chromium creates 'arbiter-render'; or set ARBITER_RENDER_USER)"
    )


def browser_environment() -> dict[str, str]:
    """All the browser's environment: a fixed ``PATH``, ``HOME``, the locale and time zone, and
    fontconfig's own variables when set. Never the server's: no secret key, database URL or API key."""
    env = {"PATH": BROWSER_PATH, "HOME": os.environ.get("HOME") or "/nonexistent", "LANG": "C.UTF-8", "TZ": "UTC"}
    for name in ("FONTCONFIG_FILE", "FONTCONFIG_PATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


@cache
def _user_shim(user: BrowserUser) -> str:
    """An executable that starts :data:`CHROMIUM` as ``user`` (Playwright takes one path, with no
    argument of ours): ``annotation/render/browser_user.py`` under this Python, in a folder only
    root can read, removed at exit."""
    folder = tempfile.mkdtemp(prefix="arbiter-browser-")
    atexit.register(shutil.rmtree, folder, True)
    shim = Path(folder) / "chromium"
    helper = Path(__file__).with_name("browser_user.py")
    words = [sys.executable, "-I", "-S", str(helper), str(user.uid), str(user.gid), CHROMIUM]
    shim.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(w) for w in words) + ' "$@"\n')
    shim.chmod(0o700)
    return str(shim)


def launch(playwright: Any, marker: str) -> Any:
    """Start Chromium for one render worker. ``marker`` (an ignored switch) finds its processes.
    As root, the browser runs as :func:`browser_user`; its environment is :func:`browser_environment`."""
    user = browser_user()
    try:
        return playwright.chromium.launch(
            executable_path=_user_shim(user) if user is not None else CHROMIUM,
            args=[*FLAGS, f"--arbiter-render={marker}"],
            env=browser_environment(),
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


def browser_processes(marker: str) -> dict[int, str]:
    """pid → command line of the browser started with ``marker`` and of every process under it
    (found by its marker switch: only this worker's browser)."""
    table = _cmdlines()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    stack = [pid for pid, (_, cmd) in table.items() if f"--arbiter-render={marker}" in cmd and "--type=" not in cmd]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found[pid] = table[pid][1]
            stack.extend(children.get(pid, []))
    return found


def kill_renderers(marker: str) -> int:
    """Kill the renderer processes of the browser started with ``marker`` (a page that hangs the
    renderer: a loop in a timer, a blocking call). The browser sees a crash and carries on. Only
    this worker's browser is touched, found by its marker switch; returns how many were killed."""
    killed = 0
    for pid, cmd in browser_processes(marker).items():
        if "--type=renderer" in cmd:
            try:
                os.kill(pid, signal.SIGKILL)
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
