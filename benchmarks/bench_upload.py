"""Benchmark of the upload page with HTML outputs (issue 45): 12 references and 48 HTML pages.

Writes 12 reference PNGs (1,000 px wide) and, for 4 systems, an HTML page per reference (headings,
paragraphs, a table, an inline SVG chart, a photo beside the pages), zips them, and starts a
`make run`-style server (gunicorn, one process of four threads, a scratch SQLite database, no
broker: runs go to the server's background queue). A researcher then uploads the .zip on
``/studies/new/`` as a dry run (media shown as they are: the PNG references have no media regions), waits for the run's page to say it is done, and presses the
result's "Create the study" button. Prints, for each run: the seconds until the run's page first
shows (the upload's answer plus the page), the seconds until done, the pages rendered by the run
and the pages kept from the dry run (the real run should render 0), and the load average.

Run: .venv/bin/python benchmarks/bench_upload.py [--references 12] [--systems 4] [--keep]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import httpx
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.annotation.test_new_study_live import CSRF_RE, PASSWORD, STATUS_RE, logged_in, shell  # noqa: E402
from tests.http_servers import free_port, wait_until_serving  # noqa: E402

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font: 15px/1.45 sans-serif; margin: 32px; color: #222 }} h1 {{ font-size: 26px }}
table {{ border-collapse: collapse }} td, th {{ border: 1px solid #999; padding: 4px 8px }}
</style></head><body><h1>Report {page}: {system}</h1>
<p>{text}</p><img src="photo.png" width="320" height="180" alt="">
<h2>Results</h2><table><tr><th>Quarter</th><th>Revenue</th><th>Margin</th></tr>{rows}</table>
<svg width="400" height="160">{bars}</svg><p>{text}</p></body></html>"""
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "judges", "rate", "every", "page"]


def png_bytes(size: tuple[int, int], seed: int) -> bytes:
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    for i in range(12):
        y = 40 + i * (size[1] - 80) // 12
        right = max(60, size[0] - 40 - (seed * 37 + i * 53) % (size[0] // 3))
        draw.rectangle((40, y, right, y + 8), fill=(60, 60, 60))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def html_page(page: int, system: int) -> str:
    text = " ".join(WORDS[(page + system + i) % len(WORDS)] for i in range(120))
    rows = "".join(f"<tr><td>Q{q}</td><td>{(page + 1) * q * 13 + system}</td><td>{(q * 7 + page) % 40}%</td></tr>"
                   for q in range(1, 5))
    bars = "".join(f'<rect x="{20 + i * 45}" y="{150 - h}" width="30" height="{h}" fill="#468"/>'
                   for i, h in enumerate(((page * 31 + system * 17 + i * 23) % 120 + 10) for i in range(8)))
    return PAGE.format(page=page, system=f"system {system}", text=text, rows=rows, bars=bars)


def upload_zip(references: int, systems: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for p in range(references):
            archive.writestr(f"refs/p{p:02d}.png", png_bytes((1000, 1300), p))
            for s in range(systems):
                archive.writestr(f"sys{s}/p{p:02d}.html", html_page(p, s))
        for s in range(systems):
            archive.writestr(f"sys{s}/photo.png", png_bytes((320, 180), 99 + s))
    return buffer.getvalue()


def wait_done(client: httpx.Client, location: str, started: float) -> tuple[float, str]:
    while True:
        status = STATUS_RE.search(client.get(location).text)[1]  # type: ignore[index]
        if status not in ("queued", "running"):
            return time.monotonic() - started, status
        time.sleep(0.25)


def run_json(client: httpx.Client, location: str) -> dict:  # type: ignore[type-arg]
    token = location.rstrip("/").rsplit("/", 1)[-1]
    return client.get(f"/api/studies/new/runs/{token}/").json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", type=int, default=12)
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="arbiter-bench-upload-"))
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("CACHE_URL", "CELERY_BROKER_URL", "DATABASE_URL")},
        "DJANGO_SETTINGS_MODULE": "config.settings.local", "DATABASE_URL": f"sqlite:///{work}/db.sqlite3",
        "MEDIA_ROOT": str(work / "media"), "ARBITER_BUNDLE_ARCHIVE": str(work / "bundles"),
        "ARBITER_NEW_STUDY_RENDERS": str(work / "renders"),
    }  # fmt: skip
    server = None
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        shell(env, (
            "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group;"
            "from annotation.roles import ensure_groups; ensure_groups();"
            f"get_user_model().objects.create_user('bench', password={PASSWORD!r}).groups.add(Group.objects.get(name='researcher'))"
        ))  # fmt: skip
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--workers", "1", "--threads", "4",
             "--timeout", "0", "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
            cwd=ROOT, env=env, start_new_session=True,
        )  # fmt: skip
        wait_until_serving(f"{url}/accounts/login/", server)
        archive = upload_zip(args.references, args.systems)
        pages = args.references * args.systems
        print(f"upload: {args.references} references, {pages} HTML pages ({args.systems} systems), {len(archive):,} bytes")
        client = logged_in(url, "bench")
        load = [os.getloadavg()[0]]
        csrf = CSRF_RE.search(client.get("/studies/new/").text)[1]  # type: ignore[index]
        options = json.dumps({"render": {"viewport": "1000x800"}})
        started = time.monotonic()
        answer = client.post("/studies/new/", data={
            "csrfmiddlewaretoken": csrf, "kind": "pairwise_reference", "reference": "refs", "dry_run": "1",
            "title": "Bench upload", "options": options, "neutralize": "no",  # PNG references without media regions
        }, files={"archive": ("outputs.zip", archive, "application/zip")})  # fmt: skip
        dry = answer.headers["Location"]
        client.get(dry)
        dry_shown = time.monotonic() - started
        dry_s, dry_status = wait_done(client, dry, started)
        dry_run = run_json(client, dry)
        load.append(os.getloadavg()[0])
        page = client.get(dry).text
        started = time.monotonic()
        made = client.post(f"{dry}create/", data={"csrfmiddlewaretoken": CSRF_RE.search(page)[1]})  # type: ignore[index]
        real = made.headers["Location"]
        client.get(real)
        real_shown = time.monotonic() - started
        real_s, real_status = wait_done(client, real, started)
        real_run = run_json(client, real)
        load.append(os.getloadavg()[0])
        for name, shown, seconds, status, run in (("dry run", dry_shown, dry_s, dry_status, dry_run),
                                                  ("real run", real_shown, real_s, real_status, real_run)):
            progress = run["progress"]
            print(f"{name}: {status}; page shown after {shown:.2f} s, done after {seconds:.1f} s; "
                  f"{progress.get('rendered')} pages rendered, {progress.get('kept')} kept from the dry run, "
                  f"per system {progress.get('groups')}")
        print(f"together {dry_s + real_s:.1f} s; load average {', '.join(f'{x:.1f}' for x in load)}")
        print("before (issue 45, rendering inside the request): dry run 63 s, real run 74 s, 48 pages rendered twice")
        if real_status != "done" or real_run["progress"].get("rendered") != 0:
            sys.exit(f"the real run rendered pages again, or failed: {real_run['error'] or dry_run['error']}")
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
