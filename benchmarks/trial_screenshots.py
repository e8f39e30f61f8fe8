"""Screenshots of a study's first trial as a new participant sees it (instructions open), at 1440×900
and 1280×800, with Debian's Chromium through Playwright; plus what each screenshot shows in numbers.

    .venv/bin/python benchmarks/trial_screenshots.py http://127.0.0.1:8000/s/TOKEN/ docs/screenshots \\
        --name trial-1-after

``link`` is a participant link (``manage.py study_link SLUG`` prints it); each size starts as a new
participant (``shot-WxH-<random>``) through the start page's participant-id input and Start button,
so the study gains one assignment per size. Saved as ``OUT/NAME-WxH.png`` (the viewport only).
Printed per size: the panes' height, the visible fraction of each pane's page without panning, its
true scale (rendered / natural width) and the zoom readout, whether Submit and the last axis
question are inside the viewport, and the pressed fit button.
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
    return {pane: s.getAttribute('aria-label') || (img && img.alt) || '', height: Math.round(r.height),
            page_visible: Math.round(shown * 1000) / 1000,
            scale: img && img.naturalWidth ? Math.round(1000 * i.width / img.naturalWidth) / 1000 : null};
  });
  const axes = document.querySelectorAll('fieldset[data-axis-fieldset]');
  const fit = [...document.querySelectorAll('button[aria-pressed=true]')].map(b => b.textContent.trim());
  const details = document.querySelector('details[data-instructions]');
  const level = document.querySelector('[data-zoom-level]');
  return {panes, readout: level ? level.textContent.trim() : null, axes: axes.length,
          last_axis_in_view: axes.length ? inView(axes[axes.length - 1]) : null,
          instructions_open: details ? details.open : null, pressed: fit};
}"""


def first_trial_shots(link: str, out: Path, name: str, chromium: str) -> list[dict[str, Any]]:
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
                page.wait_for_selector("[data-trial][data-ready]")
                page.wait_for_load_state("networkidle")
                page.wait_for_function("() => [...document.querySelectorAll('[data-trial] img')]"
                                       ".every(i => i.complete && i.naturalWidth)")
                page.wait_for_timeout(300)  # the fit of the panes follows the images' load
                path = out / f"{name}-{width}x{height}.png"
                page.screenshot(path=str(path), caret="initial")
                submit = page.get_by_role("button", name="Submit", exact=True).bounding_box()
                rows.append({"size": f"{width}x{height}", "file": str(path), **page.evaluate(MEASURE),
                             "submit_in_view": submit is not None and submit["y"] >= 0 and submit["x"] >= 0
                             and submit["y"] + submit["height"] <= height and submit["x"] + submit["width"] <= width})
                context.close()
        finally:
            browser.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("link", help="a participant link, e.g. http://127.0.0.1:8000/s/TOKEN/")
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("--name", default="trial-1", help="file name prefix (default trial-1)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium to drive")
    args = parser.parse_args(argv)
    for row in first_trial_shots(args.link, args.out, args.name, args.chromium):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
