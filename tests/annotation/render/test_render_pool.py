"""A :class:`~annotation.render.pages.RenderPool` renders several folders, each at its own viewport
width, through one browser (``new_study`` starts its browser once, not once per folder: issue 46
item 8), and keeps every guarantee of a browser per folder: each folder's own width and manifest,
a new context per folder (nothing a page of one folder left reaches another's), a browser killed
past the memory limit replaced for the next page, resume per folder, and a stopped run that leaves
no worker behind."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from annotation.render import chromium
from annotation.render.pages import RenderPool, render_folder
from tests.annotation.render.conftest import TEST_SETTINGS, browser_available
from tests.annotation.render.test_memory import ARRAY_BUFFERS

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.same_on_any_database]  # renders files to files

SETTINGS = dataclasses.replace(TEST_SETTINGS, timeout_s=30.0, memory_mb=1024)  # test_memory's: time to reach the limit
# Leaves what a tab or a context would keep: a window name, session and local storage, a cookie.
SQUARE = "<div style='width:50px;height:50px;background:#000'></div>"  # not one colour: a blank page fails
MARKS = """<body style='margin:0;background:#0f0;height:200px'>""" + SQUARE + """<script>
  window.name = 'left behind'; sessionStorage.setItem('k', 'v'); localStorage.setItem('k', 'v'); document.cookie = 'k=v';
</script></body>"""
# Blue when laid out at the second folder's width (600) with nothing left behind, else red.
READS = """<body style='margin:0;height:200px'>""" + SQUARE + """<script>
  const left = window.name || sessionStorage.length || localStorage.length || document.cookie;
  document.body.style.background = left || innerWidth !== 600 ? '#f00' : '#00f';
</script></body>"""


def counted_launches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    launched: list[str] = []
    launch = chromium.launch

    def counted(playwright: Any, marker: str) -> Any:
        launched.append(marker)
        return launch(playwright, marker)

    monkeypatch.setattr(chromium, "launch", counted)
    return launched


def png_width(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")


def test_folders_at_their_own_widths_share_one_browser_and_a_bomb_only_costs_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser_available()
    launched = counted_launches(monkeypatch)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    (first / "1-bomb.html").write_text(ARRAY_BUFFERS)
    (first / "2-marks.html").write_text(MARKS)
    (second / "3-reads.html").write_text(READS)
    runs = [(first, tmp_path / "out-first", 400), (second, tmp_path / "out-second", 600)]

    def render_all(pool: RenderPool) -> list[Any]:
        return [
            render_folder(src=src, out=out, settings=dataclasses.replace(SETTINGS, viewport_width=width), pool=pool)
            for src, out, width in runs
        ]

    with RenderPool() as pool:
        done = render_all(pool)
    # The bomb killed the first browser; the next page got a new one, and the second folder kept it
    # (a browser per folder would have started three).
    assert len(launched) == 2
    assert [(run.rendered, run.failed) for run in done] == [(1, 1), (1, 0)], [run.failures for run in done]
    assert done[0].failures == [("1-bomb.html", "over the memory limit of 1024 MB")]
    for (_, out, width), stem in zip(runs, ("2-marks", "3-reads"), strict=True):
        record = json.loads((out / f"{stem}.json").read_text())
        assert record["status"] == "ok" and record["width"] == width == png_width(out / f"{stem}.png")
        assert record["manifest"]["viewport"] == f"{width}x{SETTINGS.viewport_height}"
    # A new context for the second folder: laid out at its own width, with nothing the first left.
    assert Image.open(tmp_path / "out-second" / "3-reads.png").convert("RGB").getpixel((100, 100)) == (0, 0, 255)

    # Run again through a pool: every page is kept per folder, and no browser starts.
    with RenderPool() as pool:
        again = render_all(pool)
    assert [run.kept for run in again] == [2, 1] and len(launched) == 2


def test_a_stopped_run_leaves_no_render_worker_behind(tmp_path: Path) -> None:
    browser_available()
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"p{i}.html").write_text("<body style='background:#00f'>x</body>")

    class Cancelled(Exception):
        pass

    def progress(done: int, _total: int) -> None:
        if done >= 1:
            raise Cancelled

    with pytest.raises(Cancelled), RenderPool() as pool:
        render_folder(src=src, out=tmp_path / "out", settings=TEST_SETTINGS, pool=pool, progress=progress)
    assert not [t for t in threading.enumerate() if t.name.startswith("arbiter-render-")]
    # The page under way when the run stopped was finished; the others were never rendered.
    assert len(list((tmp_path / "out").glob("*.json"))) in (1, 2)
