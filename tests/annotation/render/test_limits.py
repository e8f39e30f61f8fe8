"""Limits hold, each with its test page, and a hostile page never stops the next one
(docs/rendering.md "Isolation"). Each failed page ends with its reason; the page rendered after it
renders normally."""

from __future__ import annotations

import pytest

from tests.annotation.render.conftest import TEST_SETTINGS, colour_pixels

pytestmark = [pytest.mark.browser, pytest.mark.slow]

GOOD = "<body style='margin:0'><div style='width:100px;height:100px;background:#00f'></div></body>"


def render_then_good(renderer, site, name: str, html: str):
    result = renderer.render(site(name, html))
    after = renderer.render(site("good.html", GOOD))
    assert after.status == "ok", after.reason
    assert colour_pixels(after, (0, 0, 255)) == 100 * 100
    return result


def test_an_infinite_loop_times_out(renderer, site) -> None:
    result = render_then_good(renderer, site, "loop.html", "<body>x<script>while (true) {}</script></body>")
    assert result.status == "failed"
    assert result.reason == f"timed out after {TEST_SETTINGS.timeout_s:g} s"


def test_a_loop_in_a_timer_is_stopped_by_the_watchdog(renderer, site) -> None:
    html = "<body>x<script>setTimeout(() => { while (true) {} }, 100)</script></body>"
    result = render_then_good(renderer, site, "timer-loop.html", html)
    assert result.status == "failed"
    assert "crashed" in result.reason or "timed out" in result.reason


def test_a_page_that_grows_forever_meets_the_height_cap(renderer, site) -> None:
    html = """<body><script>
      setInterval(() => { const d = document.createElement('div'); d.style.height = '200px';
        d.textContent = 'more'; document.body.appendChild(d); }, 5);
    </script></body>"""
    result = render_then_good(renderer, site, "grow.html", html)
    assert result.status == "failed"
    assert "over the height cap of 4,000 px" in result.reason


def test_a_huge_canvas_fails_alone(renderer, site) -> None:
    html = """<body><canvas id=c width=30000 height=30000></canvas><script>
      const g = document.getElementById('c').getContext('2d'); g.fillStyle = '#0a0'; g.fillRect(0, 0, 30000, 30000);
    </script></body>"""
    result = render_then_good(renderer, site, "canvas.html", html)
    assert result.status == "failed"
    assert "height cap" in result.reason


HUGE_DOM = """<body><script>
  let html = ''; for (let i = 0; i < 200000; i++) html += '<div><span>' + i + '</span></div>';
  for (let k = 0; k < 1000; k++) document.body.insertAdjacentHTML('beforeend', html);
</script></body>"""
MEMORY = "<body><script>const a = []; while (true) a.push(new Array(1e6).fill(1.5));</script></body>"


@pytest.mark.parametrize("html", [HUGE_DOM, MEMORY], ids=["huge-dom", "memory"])
def test_a_page_that_exhausts_memory_or_time_fails_alone(renderer, site, html: str) -> None:
    result = render_then_good(renderer, site, "heavy.html", html)
    assert result.status == "failed"
    assert "timed out" in result.reason or "crashed" in result.reason or "over the memory limit" in result.reason


def test_dialogs_popups_and_downloads_do_not_stop_a_page(renderer, site) -> None:
    html = """<body style='margin:0'><div style='width:50px;height:50px;background:#0f0'></div><script>
      alert('a'); confirm('b'); prompt('c');
      window.open('other.html'); window.open('about:blank');
      const a = document.createElement('a'); a.href = 'data:text/plain,x'; a.download = 'x.txt'; document.body.appendChild(a); a.click();
      const b = document.createElement('a'); b.href = 'file.bin'; b.download = ''; document.body.appendChild(b); b.click();
      window.addEventListener('beforeunload', (e) => { e.preventDefault(); e.returnValue = 'stay'; });
    </script></body>"""
    page = site("dialogs.html", html, **{"other.html": "<body>other</body>", "file.bin": b"\0" * 100})
    result = renderer.render(page)
    assert result.status == "ok", result.reason
    assert colour_pixels(result, (0, 255, 0)) == 50 * 50
    after = renderer.render(site("good.html", GOOD))
    assert after.status == "ok", after.reason


def test_navigation_away_is_refused(renderer, site) -> None:
    result = render_then_good(
        renderer, site, "away.html", "<body>x<script>location.href = 'other.html';</script></body>"
    )
    assert result.status == "failed"
    assert "navigate away" in result.reason
    assert any(url.endswith("/other.html") for url in result.refused_requests)
