"""Least privilege (issue 50 item 5; docs/rendering.md "Isolation"): the browser's processes run
as an unprivileged user when the renderer runs as root, with Chromium's own sandbox on, and their
environment holds none of the server's: a marker variable set in the server's environment, a
secret key and a database URL are in none of them."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from annotation.render import chromium
from annotation.render.renderer import PageRenderer
from tests.annotation.render.conftest import TEST_SETTINGS, browser_available, colour_pixels

pytestmark = pytest.mark.browser

PAGE = "<body style='margin:0'><div style='width:60px;height:60px;background:#00f'></div></body>"


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)


def _environ(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()


def test_the_browser_runs_unprivileged_with_its_sandbox_and_none_of_the_servers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser_available()
    marker = "arbiter-marker-" + os.urandom(8).hex()
    monkeypatch.setenv("ARBITER_TEST_MARKER", marker)
    monkeypatch.setenv("DJANGO_SECRET_KEY", "secret-" + marker)
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw-" + marker + "@db/x")
    page = tmp_path / "p.html"
    page.write_text(PAGE)
    seen: dict[int, tuple[dict[str, str], bytes]] = {}
    results = []

    def run() -> None:  # a thread of its own: Playwright's sync API, one instance per thread
        with PageRenderer(TEST_SETTINGS) as renderer:
            results.append(renderer.render(page))
            for pid in chromium.browser_processes(renderer._marker):
                with contextlib.suppress(OSError):  # a process that ended meanwhile
                    seen[pid] = (_status(pid) | {"userns": os.readlink(f"/proc/{pid}/ns/user")}, _environ(pid))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(120)
    assert results and results[0].status == "ok", results and results[0].reason
    assert colour_pixels(results[0], (0, 0, 255)) == 60 * 60
    assert len(seen) >= 3  # the browser, its zygotes, a renderer at least

    user = chromium.browser_user()
    expected_uid = user.uid if user is not None else os.geteuid()
    assert expected_uid != 0
    for pid, (status, _) in seen.items():
        real, effective, saved, fs = (int(u) for u in status["Uid"].split())
        assert real == effective == saved == fs == expected_uid, (pid, status["Uid"])
        # Inside its sandbox's own user namespace a zygote holds capabilities of that namespace only.
        if status["userns"] == os.readlink("/proc/self/ns/user"):
            assert int(status["CapEff"], 16) == 0, (pid, status["CapEff"])
    # Chromium's own sandbox is on: its sandboxed processes run under a seccomp-bpf filter.
    assert any(status["Seccomp"].strip() == "2" for status, _ in seen.values())

    environments = [env for _, env in seen.values()]
    assert all(marker.encode() not in env for env in environments)
    # The browser's own process shows its environment as it was given: nothing but what it needs.
    root_env = next(env for env in environments if env.startswith(b"HOME=") or b"\0PATH=" in env)
    names = {item.split(b"=", 1)[0].decode() for item in root_env.split(b"\0") if b"=" in item}
    assert {"HOME", "PATH", "LANG"} <= names
    assert not names & {"ARBITER_TEST_MARKER", "DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"}


def test_the_environment_given_to_the_browser_is_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("FONTCONFIG_FILE", "/etc/fonts/fonts.conf")
    env = chromium.browser_environment()
    assert set(env) == {"PATH", "HOME", "LANG", "TZ", "FONTCONFIG_FILE"}
    assert env["PATH"] == chromium.BROWSER_PATH and env["TZ"] == "UTC"


def test_as_root_a_missing_or_root_browser_user_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chromium.os, "geteuid", lambda: 0)  # the choice is made only for root
    monkeypatch.setenv("ARBITER_RENDER_USER", "no-such-user-here")
    with pytest.raises(chromium.RenderUnavailable, match=r"^rendering as root needs an unprivileged user for the browser: 'no-such-user-here' does not exist"):
        chromium.browser_user()
    monkeypatch.setenv("ARBITER_RENDER_USER", "root")
    with pytest.raises(chromium.RenderUnavailable, match=r"^ARBITER_RENDER_USER: 'root' is root"):
        chromium.browser_user()
