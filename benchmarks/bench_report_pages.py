"""Benchmark of the report pages' first load on `make run`'s server (issue 40 item 5).

Logs in as the demo researcher on a running server (`make run`, or gunicorn on the same database)
and loads each report page of the demo study twice, as a browser would: the page, then its
``<img>`` figures four at a time (each figure is drawn on a request of its own and then kept in
the cache; ``calibration/services/report_figures.py``). Prints, per load, the page's time and the
time until every figure has arrived. Before the figures had their own requests the page drew them
itself: 4.2–4.5 s for the agreement page and 3.5–3.7 s for the calibration page (load average
10.6, 2026-12-06). Target: the page (numbers, and a "Drawing the figure…" placeholder per figure)
in under 1 s.

Then it starts the computations a researcher starts from a page, as the forms would post them: a
plan of the demo study (``/studies/demo/plan/``, the planner's defaults with the demo as pilot) and
two leaderboards (``/studies/demo/leaderboards/``, coefficient set demo-v1, the form's 2,000
resamples, Bradley–Terry and Davidson). It prints the time of the form's response (the redirect),
of the page it leads to, whether that page shows the progress indicator (its htmx poll), and the
time until the poll finds the result. Without a broker these ran inside the form's request (a plan:
5.1 s in issue 40); now the run is in a thread of the server (``annotation/task_queue.py``). Last
the judge ablation (the form's 1,000 resamples): the form's response, and the time until the result
has arrived (computed in the form's request before; now on a request of its own, which htmx sends).
Run it on a freshly started server with ``--no-started`` first: the report pages' first loads are
then the server's first requests.

Run: .venv/bin/python benchmarks/bench_report_pages.py [--base http://127.0.0.1:8000] [--password P]
[--no-reports] [--no-started] (the password defaults to the one `make demo` saved in var/demo-login.txt).
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


def _csrf(page: httpx.Response) -> str:
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None, f"no form on {page.url}"
    return token.group(1)


#: What each started computation posts (the form's defaults), and the poll its page carries.
STARTED = (
    (
        "plan",
        "/studies/demo/plan/",
        {
            "target": "top_k",
            "k": "3",
            "probability": "0.9",
            "width": "50.0",
            "half_width": "0.05",
            "allocation": "uniform",
            "pilot": "demo",
            "systems": "",
            "elo_sd": "100.0",
            "tie_rate": "0.1",
            "rater_noise": "0.3",
            "judge_accuracy": "",
            "trials_per_rater": "240",
            "repeats": "6",
            "raters_per_block": "5",
            "judges": "1",
            "judge_outputs": "4",
            "studies": "",
            "seed": "0",
        },
    ),
    (
        "leaderboard",
        "/studies/demo/leaderboards/",
        {
            "coefficients": "demo-v1",
            "bootstrap": "2000",
            "seed": "20260831",
            "model": "bradley_terry",
        },
    ),
    (
        "leaderboard (Davidson)",
        "/studies/demo/leaderboards/",
        {
            "coefficients": "demo-v1",
            "bootstrap": "2000",
            "seed": "20260831",
            "model": "davidson",
        },
    ),
)
POLL = re.compile(r'hx-get="([^"]+)" hx-trigger="every 2s"')
ABLATION = "/studies/demo/judge-ablation/"
ON_LOAD = re.compile(r'hx-get="([^"]+)" hx-trigger="load"')


def started_computations(client: httpx.Client, base: str) -> None:
    """Time a started plan and leaderboard: the form's response, its page, and the result's arrival."""
    for name, path, fields in STARTED:
        form = client.get(path)
        start = time.perf_counter()
        posted = client.post(
            path, data={**fields, "csrfmiddlewaretoken": _csrf(form)}, headers={"Referer": base + path}
        )
        posted_seconds = time.perf_counter() - start
        assert posted.status_code == 302, f"{path}: status {posted.status_code}"
        page = client.get(posted.headers["Location"])
        page_seconds = time.perf_counter() - start
        polls = POLL.findall(page.text)
        poll = html.unescape(polls[0]) if polls else ""  # the newest run's (the list shows newest first)
        while poll and 'hx-trigger="every 2s"' in client.get(poll).text:
            time.sleep(0.2)
        print(
            f"{name}: form's response {posted_seconds:.2f} s, page {page_seconds:.2f} s "
            f"({'computing indicator, polls' if polls else 'no poll: the result or nothing'}), "
            f"result in by {time.perf_counter() - start:.2f} s"
        )
    # The judge ablation (the form's 1,000 resamples): its answer, then the result's own request.
    form = client.get(ABLATION)
    start = time.perf_counter()
    posted = client.post(
        ABLATION,
        data={"bootstrap": "1000", "seed": "0", "csrfmiddlewaretoken": _csrf(form)},
        headers={"Referer": base + ABLATION},
    )
    posted_seconds = time.perf_counter() - start
    assert posted.status_code == 200, f"{ABLATION}: status {posted.status_code}"
    pending = ON_LOAD.findall(posted.text)
    if pending:
        client.get(ABLATION + html.unescape(pending[0]), headers={"HX-Request": "true"})
    print(
        f"judge ablation: form's response {posted_seconds:.2f} s "
        f"({'computing indicator' if pending else 'the result, computed in the request'}), "
        f"result in by {time.perf_counter() - start:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--password", default=None)
    parser.add_argument("--no-reports", action="store_true", help="skip the report pages")
    parser.add_argument("--no-started", action="store_true", help="skip the started plan and leaderboard")
    args = parser.parse_args()
    client = httpx.Client(base_url=args.base, timeout=300)
    login = client.get("/accounts/login/")
    done = client.post(
        "/accounts/login/",
        data={
            "username": "researcher",
            "password": args.password or _saved_password(),
            "csrfmiddlewaretoken": _csrf(login),
        },
        headers={"Referer": args.base + "/accounts/login/"},
    )
    assert done.status_code == 302, "login failed"
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not args.no_started:
        started_computations(client, args.base)
    if args.no_reports:
        return
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
            print(
                f"{path} ({load} load): page {page_seconds:.2f} s (status {page.status_code}), "
                f"{len(sources)} figures by {figures:.2f} s"
            )
    verdict = "met" if worst < TARGET_SECONDS else "NOT met"
    print(f"slowest page {worst:.2f} s; target < {TARGET_SECONDS:.0f} s: {verdict}")


if __name__ == "__main__":
    main()
