"""Benchmark of the report pages' first load on `make run`'s server (issue 40 item 5).

Logs in as the demo researcher on a running server (`make run`, or gunicorn on the same database)
and loads each report page of the demo study twice, as a browser would: the page, then its
``<img>`` figures four at a time (each figure is drawn on a request of its own and then kept in
the cache; ``calibration/services/report_figures.py``). Prints, per load, the page's time and the
time until every figure has arrived. Before the figures had their own requests the page drew them
itself: 4.2–4.5 s for the agreement page and 3.5–3.7 s for the calibration page (load average
10.6, 2026-12-06). Target: the page (numbers, and a "Drawing the figure…" placeholder per figure)
in under 1 s.

Run: .venv/bin/python benchmarks/bench_report_pages.py [--base http://127.0.0.1:8000] [--password P]
(the password defaults to the one `make demo` saved in var/demo-login.txt).
"""

from __future__ import annotations

import argparse
import html
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 1.0
PAGES = (
    "/studies/demo/agreement/",
    "/studies/demo/calibration/",
    "/research/studies/demo-pairwise/kind-report/",
    "/research/studies/demo-checklist/kind-report/",
    "/research/studies/demo-rating/kind-report/",
)


def _saved_password() -> str:
    line = (ROOT / "var" / "demo-login.txt").read_text(encoding="utf-8").strip()
    return line.split(" / ", 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--password", default=None)
    args = parser.parse_args()
    client = httpx.Client(base_url=args.base, timeout=300)
    login = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
    assert token is not None, "no login form"
    done = client.post(
        "/accounts/login/",
        data={"username": "researcher", "password": args.password or _saved_password(),
              "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": args.base + "/accounts/login/"},
    )
    assert done.status_code == 302, "login failed"
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    worst = 0.0
    for path in PAGES:
        for load in ("first", "second"):
            start = time.perf_counter()
            page = client.get(path)
            page_seconds = time.perf_counter() - start
            sources = [html.unescape(s) for s in re.findall(r'<img[^>]*\ssrc="(/[^"]+)"', page.text)]

            def fetch(src: str, start: float = start) -> float:
                assert client.get(src).status_code == 200
                return time.perf_counter() - start

            with ThreadPoolExecutor(4) as pool:
                figures = max(pool.map(fetch, sources), default=page_seconds)
            worst = max(worst, page_seconds)
            print(f"{path} ({load} load): page {page_seconds:.2f} s (status {page.status_code}), "
                  f"{len(sources)} figures by {figures:.2f} s")
    verdict = "met" if worst < TARGET_SECONDS else "NOT met"
    print(f"slowest page {worst:.2f} s; target < {TARGET_SECONDS:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
