"""Model-written HTML is untrusted: nothing leaves the machine and nothing outside the page's
folder is read (docs/rendering.md "Isolation"). A canary server on loopback, run by the test,
counts every connection; it must count none."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from annotation.render import chromium
from annotation.render.sandbox import ORIGIN, folder_asset
from tests.annotation.render.conftest import browser_available, colour_pixels, png_bytes, red_pixels

pytestmark = pytest.mark.browser

HOSTILE = """<!doctype html><html><head>
<link rel="stylesheet" href="{c}/style.css">
<link rel="prefetch" href="{c}/prefetch">
<link rel="preload" as="image" href="{c}/preload.png">
<link rel="preconnect" href="{c}">
<link rel="dns-prefetch" href="//canary.example.com">
<link rel="icon" href="{c}/favicon.ico">
<style>
  @import url("{c}/import.css");
  @font-face {{ font-family: x; src: url("{c}/font.woff2"); }}
  body {{ background-image: url("{c}/background.png"); font-family: x, sans-serif; }}
</style>
<meta http-equiv="refresh" content="1; url={c}/refresh">
</head><body>
<p>hostile</p>
<img src="{c}/img.png">
<iframe src="{c}/frame"></iframe>
<video src="{c}/video.mp4" autoplay></video>
<object data="{c}/object"></object>
<script src="{c}/script.js"></script>
<script>
  fetch("{c}/fetch").catch(() => {{}});
  fetch("{c}/fetch-no-cors", {{mode: "no-cors"}}).catch(() => {{}});
  const x = new XMLHttpRequest(); x.open("GET", "{c}/xhr"); x.send();
  try {{ new WebSocket("ws://127.0.0.1:{port}/ws"); }} catch (e) {{}}
  try {{ new EventSource("{c}/events"); }} catch (e) {{}}
  navigator.sendBeacon("{c}/beacon", "data");
  if (navigator.serviceWorker) navigator.serviceWorker.register("sw.js").catch(() => {{}});
  try {{ new Worker("worker.js"); }} catch (e) {{}}
  new Image().src = "{c}/image-object.png";
  window.open("{c}/popup");
  try {{ const pc = new RTCPeerConnection({{iceServers: [{{urls: "stun:127.0.0.1:{port}"}}]}}); pc.createDataChannel("x"); pc.createOffer().then(o => pc.setLocalDescription(o)); }} catch (e) {{}}
  setTimeout(() => {{ location.href = "{c}/location"; }}, 50);
</script>
<form id="f" action="{c}/form" method="post"><input name="a" value="b"></form>
<script>setTimeout(() => document.getElementById("f").submit(), 20);</script>
</body></html>"""


def test_a_hostile_page_reaches_nothing(renderer, site, canary) -> None:
    page = site(
        "hostile.html",
        HOSTILE.format(c=canary.url, port=canary.port),
        **{"sw.js": f"fetch('{canary.url}/from-service-worker')", "worker.js": f"fetch('{canary.url}/from-worker')"},
    )
    result = renderer.render(page)
    assert canary.connections == 0
    refused = " ".join(result.refused_requests)
    for path in ("/fetch", "/xhr", "/img.png", "/frame", "/style.css", "/import.css", "/beacon", "/popup", "/ws"):
        assert f"{canary.port}{path}" in refused, path
    # The page navigated away (its meta refresh, a form, location): refused, and a failed render.
    assert result.status == "failed"
    assert "navigate away" in (result.reason or "")


@pytest.mark.slow
def test_the_proxy_alone_refuses_what_interception_would_miss(canary) -> None:
    """The second layer: the browser's own flags, with no request interception at all."""
    browser_available()
    from playwright.sync_api import sync_playwright

    errors: list[str] = []

    def visit() -> None:  # a thread of its own: this thread already runs the module's renderer
        with sync_playwright() as p:
            browser = chromium.launch(p, chromium.new_marker())
            try:
                page = browser.new_page()
                try:
                    page.goto(canary.url + "/direct", timeout=5000)
                except Exception as exc:
                    errors.append(str(exc))
                page = browser.new_page()
                page.set_content(f"<img src='{canary.url}/img'><script>fetch('{canary.url}/fetch')</script>")
                page.wait_for_timeout(300)
            finally:
                browser.close()

    thread = threading.Thread(target=visit)
    thread.start()
    thread.join(60)
    assert errors and "ERR_" in errors[0]
    assert canary.connections == 0


def test_files_outside_the_folder_are_never_read(renderer, site, tmp_path: Path) -> None:
    """file:// in an iframe, ../ and absolute asset paths and a link out all fail: each would
    paint pure red if it were read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "red.png").write_bytes(png_bytes((255, 0, 0), (200, 200)))
    (outside / "red.html").write_text("<body style='margin:0;background:#f00'></body>")
    page = site(
        "p.html",
        f"""<body style="margin:0">
        <iframe src="file://{outside}/red.html" width=200 height=200></iframe>
        <iframe src="file:///etc/passwd" width=200 height=200></iframe>
        <img src="../outside/red.png"><img src="..%2foutside%2fred.png"><img src="%2e%2e/outside/red.png">
        <img src="{outside}/red.png"><img src="/{outside}/red.png"><img src="linked/red.png"><img src="red-link.png">
        <div style="width:200px;height:200px;background:url('../outside/red.png')"></div>
        <img src="green.png">
        </body>""",
        **{"green.png": png_bytes((0, 255, 0))},
    )
    os.symlink(outside, page.parent / "linked")
    os.symlink(outside / "red.png", page.parent / "red-link.png")
    result = renderer.render(page)
    assert result.status == "ok", result.reason
    assert red_pixels(result) == 0
    assert colour_pixels(result, (0, 255, 0)) == 40 * 40  # the folder's own image is read
    refused = " ".join(result.refused_requests)
    assert "red.html" in refused  # the file:// iframe, reported by the browser
    assert "linked/red.png" in refused and "red-link.png" in refused


def test_the_folder_rule(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "a.png").write_bytes(b"x")
    (folder / ".secret").write_bytes(b"x")
    (tmp_path / "outside.png").write_bytes(b"x")
    os.symlink(tmp_path / "outside.png", folder / "out.png")
    os.symlink(folder / "img" / "a.png", folder / "in.png")
    folder = folder.resolve()
    assert folder_asset(folder, f"{ORIGIN}/img/a.png") == folder / "img" / "a.png"
    assert folder_asset(folder, f"{ORIGIN}/img/a.png?v=2") == folder / "img" / "a.png"
    for refused in (
        f"{ORIGIN}/in.png",  # a link is never followed, even to a file of the folder
        f"{ORIGIN}/out.png", f"{ORIGIN}/..%2foutside.png", f"{ORIGIN}/img/..%2f..%2foutside.png", f"{ORIGIN}/.secret",
        f"{ORIGIN}/", f"{ORIGIN}/img", f"{ORIGIN}/missing.png", "http://127.0.0.1/img/a.png",
        "https://render.invalid/img/a.png", "http://render.invalid:8080/img/a.png", f"{ORIGIN}/img%5ca.png",
    ):
        assert folder_asset(folder, refused) is None, refused
