"""Screenshots of a study's first trial as a new participant sees it (instructions open), at 1440×900
and 1280×800, with Debian's Chromium through Playwright; plus what each screenshot shows in numbers.

    .venv/bin/python benchmarks/trial_screenshots.py http://127.0.0.1:8000/s/TOKEN/ docs/screenshots \\
        --name trial-1-after [--keys "PageDown PageDown"] [--taller 2]

``link`` is a participant link (``manage.py study_link SLUG`` prints it); each size starts as a new
participant (``shot-WxH-<random>``) through the start page's participant-id input and Start button,
so the study gains one assignment per size. Saved as ``OUT/NAME-WxH.png`` (the viewport only);
with ``--keys`` also ``OUT/NAME-keys-WxH.png`` after those keys (pressed with the trial focused,
nothing tabbed into: ``End``, ``PageDown``, ...). With ``--taller R`` the participant first answers
"Cannot judge" until a trial shows a candidate at least R times as tall as its reference. Printed per size: the panes' height, the visible
fraction of each pane's page height and width without panning, its true scale (rendered / natural
width), what 15 CSS px of the page measure on screen, whether it carries blocks, the zoom readout,
whether Submit and the last axis question are inside the viewport, and the pressed fit button.

    .venv/bin/python benchmarks/trial_screenshots.py pages DIR

writes the HTML pages of docs/screenshots/README.md's study instead (a reference and three systems
of four pages each, 1,280 CSS px wide, 15 px body text; system ``tall`` three times as tall) and
prints the ``new_study`` command that renders them into a study.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path
from typing import Any

SIZES = ((1440, 900), (1280, 800))

# Per visible pane: its height and the share of its page image's height inside it (0..1).
MEASURE = """() => {
  const vh = window.innerHeight, vw = window.innerWidth;
  const inView = e => { if (!e) return null; const r = e.getBoundingClientRect();
    return r.height > 0 && r.top >= 0 && r.bottom <= vh && r.left >= 0 && r.right <= vw; };
  const panes = [...document.querySelectorAll('[data-scroller]')].filter(s => s.offsetParent).map(s => {
    const r = s.getBoundingClientRect(), img = s.querySelector('img');
    const i = img ? img.getBoundingClientRect() : null;
    const top = Math.max(r.top, 0), bottom = Math.min(r.bottom, vh);
    const shown = i && i.height ? Math.max(0, Math.min(bottom, i.bottom) - Math.max(top, i.top)) / i.height : 0;
    const across = i && i.width ? Math.max(0, Math.min(r.right, i.right) - Math.max(r.left, i.left)) / i.width : 0;
    return {pane: s.getAttribute('aria-label') || (img && img.alt) || '', height: Math.round(r.height),
            page_visible: Math.round(shown * 1000) / 1000, width_visible: Math.round(across * 1000) / 1000,
            scale: img && img.naturalWidth ? Math.round(1000 * i.width / img.naturalWidth) / 1000 : null,
            px_of_15: img && img.naturalWidth ? Math.round(1500 * i.width / img.naturalWidth) / 100 : null,
            blocks: !!(img && img.getAttribute('data-blocks')), scroll_top: s.scrollTop,
            scroll_range: s.scrollHeight - s.clientHeight};
  });
  const axes = document.querySelectorAll('fieldset[data-axis-fieldset]');
  const fit = [...document.querySelectorAll('button[aria-pressed=true]')].map(b => b.textContent.trim());
  const details = document.querySelector('details[data-instructions]');
  const level = document.querySelector('[data-zoom-level]');
  return {panes, readout: level ? level.textContent.trim() : null, axes: axes.length,
          last_axis_in_view: axes.length ? inView(axes[axes.length - 1]) : null,
          instructions_open: details ? details.open : null, pressed: fit};
}"""


# The tallest candidate's page height over the reference's, on the trial shown.
TALLER = """() => { const h = s => { const i = document.querySelector(s); return i && i.naturalHeight || 0; };
  return Math.max(h('#pane-a .cand-img'), h('#pane-b .cand-img')) / (h('#pane-ref .page-img') || 1); }"""


def _shown(page: Any) -> None:
    page.wait_for_selector("[data-trial][data-ready]")
    page.wait_for_load_state("networkidle")
    page.wait_for_function("() => [...document.querySelectorAll('[data-trial] img')].every(i => i.complete && i.naturalWidth)")
    page.wait_for_timeout(300)  # the fit of the panes follows the images' load


def first_trial_shots(link: str, out: Path, name: str, chromium: str, *, keys: str = "",
                      taller: float = 0.0) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        try:
            for width, height in SIZES:
                context = browser.new_context(viewport={"width": width, "height": height})
                page = context.new_page()
                page.goto(link)
                page.locator("#participant").fill(f"shot-{width}x{height}-{secrets.token_hex(3)}")
                page.get_by_role("button", name="Start").click()
                _shown(page)
                for _ in range(20):
                    if not taller or page.evaluate(TALLER) >= taller:
                        break
                    token = page.locator("[data-trial]").get_attribute("aria-label")
                    for key in ("x", "3", "Enter"):  # Cannot judge, confidence 3, submit
                        page.keyboard.press(key)
                    page.wait_for_function("t => document.querySelector('[data-trial]')"
                                           " && document.querySelector('[data-trial]').getAttribute('aria-label') !== t", arg=token)
                    _shown(page)
                path = out / f"{name}-{width}x{height}.png"
                page.screenshot(path=str(path), caret="initial")
                submit = page.get_by_role("button", name="Submit", exact=True).bounding_box()
                rows.append({"size": f"{width}x{height}", "file": str(path), **page.evaluate(MEASURE),
                             "submit_in_view": submit is not None and submit["y"] >= 0 and submit["x"] >= 0
                             and submit["y"] + submit["height"] <= height and submit["x"] + submit["width"] <= width})
                if keys:
                    for key in keys.split():
                        page.keyboard.press(key)  # the trial has the focus: no Tab first
                    page.wait_for_timeout(200)
                    path = out / f"{name}-keys-{width}x{height}.png"
                    page.screenshot(path=str(path), caret="initial")
                    rows.append({"size": f"{width}x{height}", "file": str(path), "after": keys, **page.evaluate(MEASURE)})
                context.close()
        finally:
            browser.close()
    return rows


SECTIONS = ("Summary", "Method", "Results", "Discussion", "Related work", "Conclusion")
SYSTEMS = {"near": 1.0, "loose": 1.6, "tall": 3.0}  # a system's spacing between sections


def _page_html(n: int, spread: float) -> str:
    """A document page of six sections (a heading, paragraphs, a list, a table) at 15 px body text;
    ``spread`` scales the space between sections (3: a page three times as tall)."""
    gap = round(24 * spread ** 3)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><style>",
             "body{margin:0;font:15px/1.5 sans-serif;color:#222}main{max-width:1180px;margin:0 auto;padding:24px 50px}",
             f"section{{margin-bottom:{gap}px}}section:last-of-type{{margin-bottom:0}}h1{{font-size:28px}}h2{{font-size:21px;margin:0 0 8px}}",
             "table{border-collapse:collapse}td,th{border:1px solid #999;padding:4px 10px}</style></head><body><main>",
             f"<h1>Report {n + 1}</h1>"]
    for k, title in enumerate(SECTIONS):
        words = " ".join(f"{title.lower()} text {j} of page {n + 1}" for j in range(40 + 10 * k))
        parts.append(f"<section><h2>{k + 1}. {title}</h2><p>{words}</p>")
        if k % 2 == 0:
            parts.append("<ul>" + "".join(f"<li>{title} point {j}</li>" for j in range(3)) + "</ul>")
        else:
            parts.append("<table><tr><th>Item</th><th>Value</th></tr>"
                         + "".join(f"<tr><td>{title} {j}</td><td>{j * 7 + k}</td></tr>" for j in range(4)) + "</table>")
        parts.append(f"<p>{words[: 300 + 200 * int(spread)]}</p></section>")
    parts.append("</main></body></html>")
    return "".join(parts)


def write_pages(root: Path) -> str:
    """The study's HTML pages under ``root`` (``refs/``, one folder per system); the command that
    renders them into a study."""
    for folder, spread in (("refs", 1.0), *SYSTEMS.items()):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for n in range(4):
            (root / folder / f"p{n}.html").write_text(_page_html(n, spread), encoding="utf-8")
    systems = " ".join(f"--system {name}={root / name}" for name in SYSTEMS)
    return (f".venv/bin/python manage.py new_study pairwise_reference --slug tall-pages --reference {root / 'refs'} "
            f"{systems} && .venv/bin/python manage.py schedule_blocks tall-pages --blocks 2 --block-size 6 --raters 3,3 --repeats 1 --min-gap 2 "
            "&& .venv/bin/python manage.py study_link tall-pages")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pages"] and len(argv) == 2:
        print(write_pages(Path(argv[1])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("link", help="a participant link, e.g. http://127.0.0.1:8000/s/TOKEN/")
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("--name", default="trial-1", help="file name prefix (default trial-1)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium to drive")
    parser.add_argument("--keys", default="", help="also a screenshot after these keys (e.g. 'End')")
    parser.add_argument("--taller", type=float, default=0.0,
                        help="first go on to a trial with a candidate R times as tall as its reference")
    args = parser.parse_args(argv)
    for row in first_trial_shots(args.link, args.out, args.name, args.chromium, keys=args.keys, taller=args.taller):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
