"""The same file renders to the same pixels on every run (docs/rendering.md "Determinism"): a
page that reads the clock, random numbers and timers, animates, loads a web font and a lazy image
below the fold renders identically in a fresh browser and in a tab that rendered other pages."""

from __future__ import annotations

import dataclasses
import re
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


# Issue 50 item 3: what pages really do. Each page writes what it read into its own text, so a
# value that differs between two runs differs in the pixels.
OUT = ("<body style='margin:0;font:13px monospace'><pre id=o></pre><script>"
       "const out = (...a) => { document.getElementById('o').textContent += a.join(' ') + '\\n'; };")
WORKER_BODY = ("const u = new Uint32Array(2); crypto.getRandomValues(u);"
               " postMessage([Math.random(), Date.now(), u[0], performance.now(), new Date().toISOString()].join(' '));")
FRAME_BODY = "<script>document.write([Math.random(), Date.now(), performance.now(), new Date().getSeconds()].join(' '))</script>"
ANIMATED = [(255, 0, 0), (0, 0, 255), (0, 255, 0), (0, 0, 255)]
CASES = {
    "srcdoc": "</script><iframe sandbox='allow-scripts' width=700 height=40 srcdoc=\"" + FRAME_BODY + "\"></iframe>"
              "<iframe width=700 height=40 srcdoc=\"" + FRAME_BODY + "\"></iframe>",
    "about-blank-and-blob-frames": "const f = document.createElement('iframe'); document.body.appendChild(f);"
              " const w = f.contentWindow; out(w.Math.random(), w.Date.now(), w.performance.now(), new w.Date().toISOString());"
              " const g = document.createElement('iframe'); g.width = 700; g.height = 40;"
              " g.src = URL.createObjectURL(new Blob([" + repr(FRAME_BODY).replace("/script", "\\/script") + "], {type: 'text/html'}));"
              " document.body.appendChild(g);</script>",
    "date-constructor": "out(new (new Date().constructor)().toISOString(), Object.getPrototypeOf(new Date()).constructor.now(),"
              " new Date().constructor === Date);</script>",
    "intl": "out(Intl.DateTimeFormat().format(), new Intl.DateTimeFormat('en', {timeStyle: 'medium'}).format(),"
            " JSON.stringify(new Intl.DateTimeFormat('en', {second: 'numeric'}).formatToParts()));</script>",
    # Each worker writes its own line: the order in which several workers answer is the browser's.
    "workers": "const show = (name) => { const line = document.createElement('div'); document.body.appendChild(line);"
               " return (e) => { line.textContent = name + ' ' + e.data; }; };"
               " new Worker(URL.createObjectURL(new Blob([" + repr(WORKER_BODY) + "]))).onmessage = show('blob');"
               " new Worker('w.js').onmessage = show('file');"
               " new Worker('data:text/javascript,' + encodeURIComponent(" + repr(WORKER_BODY) + ")).onmessage = show('data');"
               " out(typeof SharedWorker);</script>",
    "performance": "const e = new Event('x'); out(performance.timeOrigin, e.timeStamp, JSON.stringify(performance.timing),"
                   " performance.memory.usedJSHeapSize, document.timeline.currentTime, performance.getEntries().length,"
                   " performance.mark('m').startTime, navigator.hardwareConcurrency);"
                   " addEventListener('load', (ev) => out('load at', ev.timeStamp));</script>",
    "message-channel-ticks": "let n = 0; const c = new MessageChannel(); c.port1.onmessage = () => { n++; c.port2.postMessage(0); };"
                             " c.port2.postMessage(0); let m = 0; addEventListener('message', () => { m++; postMessage(0, '*'); });"
                             " postMessage(0, '*'); addEventListener('load', () => out('ticks until load', n, m));</script>",
    # A timer keeps the main thread busy for a while of real time: an animated image would move on.
    "animated-images": "setTimeout(() => { let x = 0; for (let i = 0; i < 2e8; i++) x += i; out(x > 0); }, 10);"
                       "</script><img src=anim.gif><img src=anim.png><img src=anim.webp>",
    "smil": "</script><svg width=700 height=60><rect y=0 width=50 height=50 fill='#f00'>"
            "<animate attributeName='x' from='0' to='600' dur='1s' repeatCount='indefinite'/></rect></svg>",
    "marquee": "</script><marquee style='width:700px;font:30px sans-serif'>MOVING TEXT</marquee>",
}


def _animated(fmt: str) -> bytes:
    import io

    from PIL import Image

    frames = [Image.new("RGB", (60, 60), colour) for colour in ANIMATED]
    buffer = io.BytesIO()
    frames[0].save(buffer, fmt, save_all=True, append_images=frames[1:], duration=100, loop=0,
                   **({"lossless": True} if fmt == "WEBP" else {}))
    return buffer.getvalue()


@pytest.mark.slow
def test_what_pages_really_do_renders_the_same_pixels_twice(site) -> None:
    assets = {"w.js": WORKER_BODY, "anim.gif": _animated("GIF"), "anim.png": _animated("PNG"), "anim.webp": _animated("WEBP")}
    pages = [site(f"{name}.html", OUT + body + "</body>", **assets) for name, body in CASES.items()]
    # Two browsers of their own, one after the other.
    first = render_in_thread(TEST_SETTINGS, *pages)
    second = render_in_thread(TEST_SETTINGS, *pages)
    texts = {}
    for name, a, b in zip(CASES, first, second, strict=True):
        assert a.status == b.status == "ok", (name, a.reason, b.reason)
        assert np.array_equal(np.asarray(pixels(a)), np.asarray(pixels(b))), (name, a.dom["visible_text"], b.dom["visible_text"])
        texts[name] = a.dom["visible_text"]
    assert texts["date-constructor"].startswith("2026-01-01T12:00:00.000Z 1767268800000 true")
    assert "1/1/2026, 12:00:00 PM" in texts["intl"] or "1/1/2026 12:00:00 PM" in texts["intl"]
    assert "ticks until load 0 0" in texts["message-channel-ticks"]
    assert texts["performance"].startswith("1767268800000 0 ")
    worker_lines = re.findall(r"(blob|file|data) (\S+ \S+ \S+ \S+ \S+)", texts["workers"])
    assert len(worker_lines) == 3 and all(" 1767268800000 " in v and v.endswith(" 0 2026-01-01T12:00:00.000Z") for _, v in worker_lines)
    assert len({v for _, v in worker_lines}) == 1  # each worker seeded the same way
    assert "undefined" in texts["workers"]  # no SharedWorker: nothing could seed it
    images = dict(zip(CASES, first, strict=True))["animated-images"]
    assert colour_pixels(images, (255, 0, 0)) == 3 * 60 * 60  # GIF, APNG and WebP at their first frame
    smil = np.asarray(pixels(dict(zip(CASES, first, strict=True))["smil"]))
    red = np.argwhere(np.all(smil == (255, 0, 0), axis=-1))
    assert red[:, 1].min() == 0 and red[:, 1].max() == 49  # the animation stands at time 0
    assert dict(zip(CASES, first, strict=True))["srcdoc"].nondeterministic == []


def test_a_blob_url_is_recorded_as_nondeterministic(renderer, site) -> None:
    """A blob: URL's name is the browser's random UUID: it cannot be pinned, so it is recorded."""
    result = renderer.render(site("blob.html", OUT + "out(URL.createObjectURL(new Blob(['x'])));</script></body>"))
    assert result.status == "ok", result.reason
    assert result.nondeterministic == ["blob URL"]
    plain = renderer.render(site("plain.html", OUT + "out(Math.random());</script></body>"))
    assert plain.nondeterministic == []
