"""The same file renders to the same pixels on every run (docs/rendering.md "Determinism"): a
page that reads the clock, random numbers and timers, animates, loads a web font and a lazy image
below the fold renders identically in a fresh browser and in a tab that rendered other pages."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.annotation.render.conftest import TEST_SETTINGS, colour_pixels, pixels, png_bytes, render_in_thread

pytestmark = pytest.mark.browser

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf")

RESTLESS = """<!doctype html><html><head><style>
  @font-face { font-family: shipped; src: url(font.ttf); }
  body { margin: 10px; font: 14px shipped, sans-serif; }
  @keyframes spin { from { transform: rotate(0deg); background: #f00; } to { transform: rotate(360deg); background: #00f; } }
  .spin { width: 60px; height: 60px; animation: spin 3s linear infinite; }
  .fade { transition: opacity 5s; opacity: 1; }
  input { width: 200px; }
</style></head><body>
<p id="t"></p>
<div class="spin"></div>
<input autofocus value="a caret would blink here">
<canvas id="c" width="300" height="120"></canvas>
<p class="fade" id="f">fading</p>
<div style="height: 1500px"></div>
<img loading="lazy" src="green.png" width="40" height="40">
<script>
  const c = document.getElementById('c').getContext('2d');
  for (let i = 0; i < 40; i++) { c.fillStyle = `hsl(${Math.random() * 360}, 70%, 50%)`;
    c.fillRect(Math.random() * 280, Math.random() * 100, 20, 20); }
  const u = new Uint32Array(2); crypto.getRandomValues(u);
  document.getElementById('t').textContent = [Date.now(), new Date().toISOString(), Math.random(),
    performance.now(), u[0], crypto.randomUUID(), history.length, window.name, localStorage.getItem('k'),
    sessionStorage.getItem('k'), document.cookie].join(' | ');
  localStorage.setItem('k', 'left behind'); sessionStorage.setItem('k', 'left behind');
  document.cookie = 'k=left-behind'; window.name = 'left behind';
  document.getElementById('f').style.opacity = 0.2;
  let frames = 0; const tick = () => { frames++; if (frames < 30) requestAnimationFrame(tick); else
    document.getElementById('t').textContent += ' | frames ' + frames + ' at ' + Math.round(performance.now()); };
  requestAnimationFrame(tick);
  setTimeout(() => document.body.insertAdjacentHTML('beforeend', '<p>after 300 ms: ' + Date.now() + '</p>'), 300);
</script></body></html>"""


@pytest.mark.slow
def test_same_file_same_pixels(renderer, site) -> None:
    page = site("restless.html", RESTLESS, **{"font.ttf": FONT.read_bytes(), "green.png": png_bytes((0, 255, 0))})
    first = renderer.render(page)
    assert first.status == "ok", first.reason
    assert colour_pixels(first, (0, 255, 0)) == 40 * 40  # the lazy image below the fold was loaded
    others = [site(f"other{i}.html", RESTLESS.replace("restless", f"other {i}")) for i in range(3)]
    for other in others:
        assert renderer.render(other).status == "ok"
    again = renderer.render(page)  # the same tab, after pages that left storage, a name and history behind
    fresh = render_in_thread(TEST_SETTINGS, page)  # another browser
    reference = np.asarray(pixels(first))
    for result in (again, fresh):
        assert result.status == "ok", result.reason
        assert np.array_equal(np.asarray(pixels(result)), reference)
        assert result.dom_sha256 == first.dom_sha256
        assert result.media == first.media


def test_the_web_font_is_used(renderer, site) -> None:
    """A page's own font is waited for: the text differs from the same page without it."""
    if not FONT.exists():
        pytest.skip("fonts-dejavu-core is not installed")
    html = "<body style='margin:0;font:40px shipped, monospace'><style>@font-face{font-family:shipped;src:url(f.ttf)}</style>Wg</body>"
    with_font = renderer.render(site("font.html", html, **{"f.ttf": FONT.read_bytes()}))
    folder = site("x.html", "").parent
    shutil.move(folder / "f.ttf", folder / "g.ttf")
    without = renderer.render(site("font.html", html))
    assert with_font.status == without.status == "ok"
    assert not np.array_equal(np.asarray(pixels(with_font)), np.asarray(pixels(without)))


def test_no_js_runs_no_script(site) -> None:
    html = """<body style='margin:0'><noscript><div style='width:30px;height:30px;background:#00f'></div></noscript>
    <script>document.body.insertAdjacentHTML('beforeend', "<div style='width:30px;height:30px;background:#f00'></div>")</script>
    <img src='g.png'></body>"""
    page = site("nojs.html", html, **{"g.png": png_bytes((0, 255, 0))})
    result = render_in_thread(dataclasses.replace(TEST_SETTINGS, javascript=False), page)
    assert result.status == "ok", result.reason
    assert colour_pixels(result, (255, 0, 0)) == 0
    assert colour_pixels(result, (0, 0, 255)) == 30 * 30
    assert [r["kind"] for r in result.media] == ["photo"]


def test_text_is_read_in_its_encoding(renderer, tmp_path: Path) -> None:
    """UTF-8 without a <meta charset> is read as UTF-8; other bytes by the page's declaration."""
    check = "<script>if (document.body.firstChild.textContent !== 'h\\u00e9llo \\u2713') console.error('misread');</script>"
    utf8 = tmp_path / "utf8.html"
    utf8.write_bytes(f"<body>héllo ✓{check}</body>".encode())
    latin = tmp_path / "latin.html"
    latin.write_bytes(f"<meta charset='iso-8859-1'><body>héllo &#x2713;{check}</body>".encode("latin-1"))
    for page in (utf8, latin):
        result = renderer.render(page)
        assert result.status == "ok", result.reason
        assert result.console_errors == [], page.name
