"""Bounded memory (issue 50 item 1; docs/rendering.md "Isolation"): whatever a page allocates
(ArrayBuffers, WebAssembly memory, canvases, the DOM) counts against the browser's limit; a page
past it is a failed render ``over the memory limit of N MB``, the browser is started again and the
next page renders. A console flood is capped in the page: 50 errors of at most 300 characters
reach the renderer, the rest are counted, and neither the driver nor this process grows."""

from __future__ import annotations

import dataclasses
import os
import threading

import pytest

from annotation.errors import ArbiterError
from annotation.render.renderer import PageRender, PageRenderer
from annotation.render.settings import RenderSettings
from tests.annotation.render.conftest import TEST_SETTINGS, browser_available, colour_pixels, render_in_thread

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The shipped limit, and time enough to reach it on a loaded machine.
SETTINGS = dataclasses.replace(TEST_SETTINGS, timeout_s=30.0, memory_mb=1024)
GOOD = "<body style='margin:0'><div style='width:100px;height:100px;background:#00f'></div></body>"

ARRAY_BUFFERS = """<body>start<script>
  const kept = [];
  for (let i = 0; i < 12; i++) { const b = new Uint8Array(256 * 1024 * 1024); b.fill(i + 1); kept.push(b); }
  document.body.textContent = 'allocated ' + kept.length;
</script></body>"""
WASM = """<body>start<script>
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536 });
  for (let i = 0; i < 48; i++) { memory.grow(1024); new Uint8Array(memory.buffer).fill(7); }  // 64 MB a step, to 3 GB
  document.body.textContent = 'grown to ' + memory.buffer.byteLength;
</script></body>"""
CANVASES = """<body>start<script>
  const kept = [];
  for (let i = 0; i < 48; i++) {
    const c = document.createElement('canvas'); c.width = 4096; c.height = 4096;
    const g = c.getContext('2d', { willReadFrequently: true }); g.fillStyle = '#0a0'; g.fillRect(0, 0, 4096, 4096);
    kept.push(g.getImageData(0, 0, 4096, 4096));
  }
  document.body.textContent = 'drawn ' + kept.length;
</script></body>"""


@pytest.mark.parametrize("html", [ARRAY_BUFFERS, WASM, CANVASES], ids=["array-buffers", "wasm-memory", "canvases"])
def test_a_memory_bomb_is_a_failed_render_and_the_next_page_renders(site, html: str) -> None:
    browser_available()
    bomb, good = site("bomb.html", html), site("good.html", GOOD)
    result, after = render_in_thread(SETTINGS, bomb, good)  # a renderer (and Playwright) of its own
    assert result.status == "failed"
    assert result.reason == "over the memory limit of 1024 MB"
    assert result.png is None and result.dom is None
    # Stopped near the limit (one measurement's growth past it at most), never at the page's 3 GB.
    assert 1024 < result.memory_mb < 1536, result.memory_mb
    assert after.status == "ok", after.reason
    assert colour_pixels(after, (0, 0, 255)) == 100 * 100
    assert 0 < after.memory_mb < 1024


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def _driver_pids() -> list[int]:
    """The Playwright driver processes (node) this process started."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    ppid = int(f.read().rpartition(")")[2].split()[1])
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if ppid == os.getpid() and b"playwright" in cmdline:
                found.append(int(entry.name))
    return found


def test_a_console_flood_is_capped_in_the_page_and_counted(site) -> None:
    browser_available()
    flood = site("flood.html", """<body style='margin:0'><div style='width:50px;height:50px;background:#0f0'></div><script>
      const big = 'x'.repeat(1024 * 1024);
      for (let i = 0; i < 400; i++) console.error(i + ' ' + big);
      for (let i = 0; i < 400; i++) console.log(big);
      if (console.createTask) console.createTask('kept').run(() => {});  // not a printing method: still the browser's
      const frame = document.createElement('iframe'); frame.srcdoc = '<script>for (let i = 0; i < 100; i++) console.error("f" + i)<\\/script>';
      document.body.appendChild(frame);
    </script></body>""")
    good = site("good.html", GOOD)
    sizes: dict[str, float] = {}
    results: list[PageRender] = []

    def run() -> None:
        with PageRenderer(SETTINGS) as renderer:
            results.append(renderer.render(good))
            sizes["before"] = _rss_mb(os.getpid()) + sum(_rss_mb(pid) for pid in _driver_pids())
            results.append(renderer.render(flood))
            sizes["after"] = _rss_mb(os.getpid()) + sum(_rss_mb(pid) for pid in _driver_pids())
            results.append(renderer.render(good))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(300)
    _, result, after = results
    assert result.status == "ok", result.reason
    assert colour_pixels(result, (0, 255, 0)) == 50 * 50
    assert result.n_console_errors == 500  # 400 in the page, 100 in its frame: every one counted
    assert len(result.console_errors) == 50 and all(len(e) <= 300 for e in result.console_errors)
    assert result.console_errors[0].startswith("0 xxx")
    # 800 MB went through console calls: less than 50 MB of it reached the driver and this process.
    assert sizes["after"] - sizes["before"] < 50, sizes
    assert after.status == "ok", after.reason


def test_the_limit_is_a_setting_of_one_gigabyte_capped_at_four() -> None:
    assert RenderSettings().memory_mb == 1024 and RenderSettings().to_json()["memory_mb"] == 1024
    assert RenderSettings.from_json({"memory_mb": 2048}).memory_mb == 2048
    for bad in (100, 8192, "1024", True):
        with pytest.raises(ArbiterError, match=r"^--memory-mb: expected 256 to 4096 MB, got "):
            RenderSettings.from_json({"memory_mb": bad})
