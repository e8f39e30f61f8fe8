"""``manage.py render_pages``: a folder of HTML outputs to PNG + JSON; failed renders are data;
bad input is one line naming the file (docs/rendering.md)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.render import chromium, pages
from tests.annotation.render.conftest import browser_available

pytestmark = pytest.mark.same_on_any_database  # renders files to files

KEYS = {"status", "reason", "settings", "media", "console_errors", "refused_requests", "ms", "manifest", "image"}
PAGES = {
    "good": "<body style='margin:0'><img src='a.svg' width=200 height=100><p>text</p></body>",
    "blank": "<body></body>",
    "loop": "<body>x<script>while (true) {}</script></body>",
    "noisy": "<body>x<script>console.error('one'); console.error('two'); console.error('three');</script></body>",
    "away": "<body>x<script>location.href = 'https://example.com/';</script></body>",
}
SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='200' height='100'><rect width='200' height='100' fill='#c00'/></svg>"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def render(src: Path, out: Path, *args: str, terminal: bool = False) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), FakeTerminal() if terminal else io.StringIO()
    call_command("render_pages", str(src), str(out), "--timeout", "5", *args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "outputs"
    folder.mkdir()
    for stem, html in PAGES.items():
        (folder / f"{stem}.html").write_text(html)
    (folder / "a.svg").write_text(SVG)
    (folder / "notes.txt").write_text("not a page")
    return folder


@pytest.mark.browser
@pytest.mark.slow
def test_every_page_is_handled_and_failures_are_data(src: Path, tmp_path: Path) -> None:
    browser_available()
    out = tmp_path / "renders"
    stdout, _ = render(src, out, "--workers", "2", "--max-console-errors", "2", "--viewport", "640x480")
    assert "5 pages: 1 rendered, 4 failed" in stdout
    records = {stem: json.loads((out / f"{stem}.json").read_text()) for stem in PAGES}
    assert all(set(r) >= KEYS for r in records.values())
    good = records["good"]
    assert good["status"] == "ok" and good["reason"] is None and good["image"] == "good.png"
    assert (out / "good.png").is_file()
    assert good["media"] == [{"kind": "photo", "bbox_1000": [0.0, 0.0, 312.5, 208.34]}]
    assert good["settings"]["viewport"] == "640x480" and good["settings"]["max_console_errors"] == 2
    manifest = good["manifest"]
    assert manifest["chromium"].startswith("1") and manifest["fonts_sha256"] and manifest["dom_sha256"]
    assert "--proxy-server=http://127.0.0.1:9" in manifest["flags"]
    reasons = {stem: r["reason"] for stem, r in records.items() if stem != "good"}
    assert reasons == {
        "blank": "blank page (one colour)",
        "loop": "timed out after 5 s",
        "noisy": "3 console errors, more than the 2 allowed",
        "away": "the page tried to navigate away (to https://example.com/); refused",
    }
    assert all(records[s]["status"] == "failed" and records[s]["image"] is None for s in reasons)
    assert not any((out / f"{s}.png").exists() for s in reasons)  # a failed render has no image
    assert records["away"]["refused_requests"] == ["https://example.com/"]

    # Run again: nothing is rendered twice; with other settings, everything is, with a warning.
    stdout, stderr = render(src, out, "--workers", "2", "--max-console-errors", "2", "--viewport", "640x480")
    assert "(5 kept from an earlier run)" in stdout and not stderr
    (src / "good.html").write_text(PAGES["good"] + "<p>changed</p>")
    stdout, stderr = render(
        src, out, "--workers", "1", "--max-console-errors", "2", "--viewport", "640x480", "--mode", "canvas", terminal=True
    )
    assert "5 pages: 1 rendered, 4 failed" in stdout and "kept" not in stdout
    assert "5 earlier render(s) were made from other files, with other settings" in stderr
    assert "render_pages: rendering 5/5 (100%)" in stderr and "\r" not in stdout  # progress on the terminal only


def test_one_line_errors(tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.png").write_bytes(b"x")
    with pytest.raises(CommandError, match=rf"^{empty}: no HTML files \(\*\.html\) in this folder$"):
        render(empty, tmp_path / "o")
    with pytest.raises(CommandError, match=rf"^{tmp_path / 'missing'}: no such folder$"):
        render(tmp_path / "missing", tmp_path / "o")
    with pytest.raises(CommandError, match=r"^--viewport: expected WIDTHxHEIGHT such as 1280x720, got '1280'$"):
        render(src, tmp_path / "o", "--viewport", "1280")
    monkeypatch.setattr(chromium, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(CommandError, match=r"^rendering needs Debian's Chromium at /nonexistent/chromium: sudo apt-get install chromium"):
        render(src, tmp_path / "o")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("link", ["p.html", "style.css", "img/a.png", "img"])
def test_a_page_or_an_asset_that_is_a_link_is_refused_in_one_line(tmp_path: Path, link: str) -> None:
    """Issue 50 item 4: ``p.html -> /proc/self/environ`` (or an asset link, or a folder link) stops
    the command with one line naming the link, before a browser starts or anything is written."""
    src = tmp_path / "outputs"
    (src / "img").mkdir(parents=True)
    (src / "good.html").write_text("<body><link rel=stylesheet href=style.css><img src=img/a.png>x</body>")
    target = Path("/proc/self/environ") if link != "img" else Path("/etc")
    path = src / link
    if path.exists():
        path.rmdir()
    os.symlink(target, path)
    out = tmp_path / "renders"
    with pytest.raises(CommandError) as raised:
        render(src, out)
    message = str(raised.value)
    assert message == f"{path}: a link; pages and their files are never read through a link (copy the file in)"
    assert "\n" not in message and not out.exists()


@pytest.mark.browser
def test_a_page_that_becomes_a_link_after_the_check_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The renderer opens a page with ``O_NOFOLLOW``: a link made after the folder was checked is
    a failed render, and the environment it points at (a marker in it) is in no output."""
    browser_available()
    marker = "arbiter-marker-" + os.urandom(6).hex()
    monkeypatch.setenv("ARBITER_TEST_MARKER", marker)
    src = tmp_path / "outputs"
    src.mkdir()
    (src / "p.html").write_text("<body>x</body>")
    refuse_links = pages.refuse_links

    def check_then_link(folder: Path) -> None:
        refuse_links(folder)
        (src / "p.html").unlink()
        os.symlink("/proc/self/environ", src / "p.html")

    monkeypatch.setattr(pages, "refuse_links", check_then_link)
    out = tmp_path / "renders"
    stdout, _ = render(src, out, "--workers", "1")
    record = json.loads((out / "p.json").read_text())
    assert record["status"] == "failed" and record["reason"] == "the HTML file is a link; links are never followed"
    assert not (out / "p.png").exists()
    assert marker not in stdout and marker not in (out / "p.json").read_text()
