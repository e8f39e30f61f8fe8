"""Benchmark of ``render_pages`` (issue 38): 1,000 generated HTML pages, three renderers, one run.

Generates pages like the outputs of a document-to-HTML system (headings and text, a table, an
image of the page's folder, a bar chart drawn on a canvas by a script), then renders them with:

- ``arbiter``: ``annotation.render.pages.render_folder`` (the command's service) with its
  isolation and determinism on, ``--workers`` browsers (default 2);
- ``playwright``: a plain Playwright loop: one browser, a new page per file (``file://``), a
  full-page screenshot, nothing else;
- ``html2image``: html2image 2.0.7 from PyPI (installed by the benchmark into ``var/peer/html2image``; not a project
  dependency), which starts a headless Chromium per page, viewport-sized.

All three use Debian's ``/usr/bin/chromium`` at 1280 × 720. Each renderer runs in a child
process; its CPU is the child's whole process tree (``RUSAGE_CHILDREN`` after it exits: the
browser, its renderers and Playwright's driver included). Prints pages/s and CPU per page for
each, the load average, and Arbiter's ratio to the plain loop (target: ≥ 1.5 × the pages/s, CPU
per page no higher).

For Arbiter it also prints the peak memory of the render process tree (PSS, sampled twice a
second) and the highest per-page browser peak its JSONs record (what the memory limit measures).

Run: .venv/bin/python benchmarks/bench_render.py [--pages 1000] [--workers 2] [--renderers arbiter,playwright,html2image] [--keep]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1280, 720
TARGET_RATIO = 1.5
WORDS = ("layout", "table", "figure", "result", "method", "model", "page", "score", "render", "value", "section",
         "data", "chart", "report")


def generate(folder: Path, pages: int) -> None:
    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    for k in range(4):
        image = Image.new("RGB", (480, 300), (40 + 50 * k, 110, 200 - 40 * k))
        draw = ImageDraw.Draw(image)
        for i in range(12):
            draw.ellipse((20 + 35 * i, 40 + 15 * (i % 5), 80 + 35 * i, 100 + 15 * (i % 5)), fill=(230, 200 - 10 * i, 60))
        buffer = io.BytesIO()
        image.save(buffer, "PNG")
        (folder / f"photo{k}.png").write_bytes(buffer.getvalue())
    for p in range(pages):
        r = random.Random(p)

        def text(n: int, r: random.Random = r) -> str:
            return " ".join(r.choice(WORDS) for _ in range(n))

        rows = "".join(
            f"<tr><td>{text(2)}</td><td>{r.randint(0, 9999)}</td><td>{r.random():.3f}</td><td>{text(3)}</td></tr>"
            for _ in range(r.randint(4, 14))
        )
        bars = [r.randint(10, 170) for _ in range(r.randint(5, 12))]
        html = f"""<!doctype html><html><head><meta charset="utf-8"><title>Page {p}</title><style>
body {{ font-family: sans-serif; margin: 32px; color: #222; }} h1 {{ font-size: 28px; }}
table {{ border-collapse: collapse; margin: 16px 0; }} td {{ border: 1px solid #bbb; padding: 4px 8px; }}
.row {{ display: flex; gap: 24px; align-items: flex-start; }} figure {{ margin: 0; }}
</style></head><body>
<h1>{text(4).title()}</h1>
<p>{text(r.randint(30, 90))}</p>
<div class="row"><figure><img src="photo{p % 4}.png" width="360" height="225" alt=""><figcaption>{text(6)}</figcaption></figure>
<div class="chart"><canvas id="c" width="420" height="220"></canvas></div></div>
<h2>{text(3).title()}</h2><table>{rows}</table>
<p>{text(r.randint(40, 160))}</p>
<script>
const g = document.getElementById('c').getContext('2d'); const bars = {json.dumps(bars)};
g.strokeStyle = '#444'; g.beginPath(); g.moveTo(30, 10); g.lineTo(30, 200); g.lineTo(410, 200); g.stroke();
bars.forEach((h, i) => {{ g.fillStyle = i % 2 ? '#e6550d' : '#3182bd'; g.fillRect(40 + i * 30, 200 - h, 22, h); }});
g.fillStyle = '#222'; g.font = '12px sans-serif'; g.fillText('{text(2)}', 40, 215);
</script></body></html>"""
        (folder / f"p{p:04d}.html").write_text(html, encoding="utf-8")


def tree_pss_mb() -> float:
    """The proportional set size of this process and every process under it (Playwright's driver,
    the browsers): shared pages split between their users, so the sum is the tree's real share."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    parents[int(entry.name)] = int(f.read().rpartition(")")[2].split()[1])
            except OSError:
                continue
    tree, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total / 1024


def run_arbiter(src: Path, out: Path, workers: int) -> None:
    import threading

    sys.path.insert(0, str(ROOT))
    from annotation.render.pages import render_folder
    from annotation.render.settings import RenderSettings

    peak = [0.0]
    done = threading.Event()

    def sample() -> None:  # twice a second: the render process tree's memory
        while not done.wait(0.5):
            peak[0] = max(peak[0], tree_pss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = render_folder(src=src, out=out, settings=RenderSettings(viewport_width=WIDTH, viewport_height=HEIGHT),
                           workers=workers, resume=False)
    done.set()
    sampler.join()
    browser = [json.loads(p.read_text()).get("memory_mb") or 0 for p in out.glob("*.json")]
    print(json.dumps({"rendered": result.rendered, "failed": result.failed, "peak_pss_mb": peak[0],
                      "browser_peak_mb": max(browser, default=0)}))


def run_playwright(src: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    rendered = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--disable-gpu"])
        for path in sorted(src.glob("*.html")):
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.goto(path.resolve().as_uri())
            page.screenshot(path=str(out / f"{path.stem}.png"), full_page=True)
            page.close()
            rendered += 1
        browser.close()
    print(json.dumps({"rendered": rendered, "failed": 0}))


def run_html2image(src: Path, out: Path) -> None:
    from html2image import Html2Image

    flags = ["--disable-gpu", "--hide-scrollbars", "--no-sandbox"] if os.geteuid() == 0 else ["--disable-gpu", "--hide-scrollbars"]
    hti = Html2Image(browser="chromium", browser_executable=CHROMIUM, output_path=str(out), size=(WIDTH, HEIGHT),
                     custom_flags=flags, disable_logging=True)
    paths = sorted(src.glob("*.html"))
    hti.screenshot(url=[p.resolve().as_uri() for p in paths], save_as=[f"{p.stem}.png" for p in paths])
    rendered = sum(1 for p in paths if (out / f"{p.stem}.png").is_file())
    print(json.dumps({"rendered": rendered, "failed": len(paths) - rendered}))


HTML2IMAGE = "html2image==2.0.7"
PEER_DIR = ROOT / "var" / "peer" / "html2image"  # never committed (var/ is ignored)


def html2image_install() -> Path:
    """html2image from PyPI into a folder of its own (not a project dependency); reused once installed."""
    marker = PEER_DIR / ".installed"
    if not marker.is_file() or marker.read_text() != HTML2IMAGE:
        shutil.rmtree(PEER_DIR, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(PEER_DIR), HTML2IMAGE],
                       check=True)
        marker.write_text(HTML2IMAGE)
    return PEER_DIR


def measure(name: str, src: Path, out: Path, workers: int) -> dict[str, float]:
    """Run one renderer in a child process; its wall time and the CPU of its whole process tree."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if name == "html2image":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(html2image_install()), env.get("PYTHONPATH", "")) if p)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    child = subprocess.run(
        [sys.executable, __file__, "--child", name, "--src", str(src), "--out", str(out), "--workers", str(workers)],
        capture_output=True, text=True, cwd=ROOT, check=False, env=env,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if child.returncode != 0:
        raise SystemExit(f"{name} failed:\n{child.stderr[-2000:]}")
    counts = json.loads(child.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--renderers", default="arbiter,playwright,html2image")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--src", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        {"arbiter": lambda: run_arbiter(args.src, args.out, args.workers),
         "playwright": lambda: run_playwright(args.src, args.out),
         "html2image": lambda: run_html2image(args.src, args.out)}[args.child]()
        return
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    scratch = Path(tempfile.mkdtemp(prefix="bench_render_"))
    try:
        src = scratch / "pages"
        generate(src, args.pages)
        print(f"{args.pages} pages in {src}; load average before: {os.getloadavg()[0]:.1f}")
        results: dict[str, dict[str, float]] = {}
        for name in args.renderers.split(","):
            results[name] = m = measure(name, src, scratch / name, args.workers)
            print(f"{name:>10}: {m['rendered']:.0f} rendered, {m['failed']:.0f} failed; {m['wall']:.1f} s wall, "
                  f"{args.pages / m['wall']:.2f} pages/s, {1000 * m['cpu'] / args.pages:.0f} ms CPU per page; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
            if "peak_pss_mb" in m:
                print(f"{name:>10}: memory: the whole render process tree (Python, Playwright's driver, "
                      f"{args.workers} browsers) peaked at {m['peak_pss_mb']:.0f} MB PSS; one browser at "
                      f"{m['browser_peak_mb']:.0f} MB by the limit's measure (anonymous + shared resident)", flush=True)
        if "arbiter" in results and "playwright" in results:
            a, p = results["arbiter"], results["playwright"]
            speed = p["wall"] / a["wall"]
            cpu = a["cpu"] / p["cpu"]
            print(f"arbiter / plain playwright loop: {speed:.2f} × the pages/s (target ≥ {TARGET_RATIO} ×: "
                  f"{'met' if speed >= TARGET_RATIO else 'NOT met'}), {cpu:.2f} × the CPU per page "
                  f"(target ≤ 1: {'met' if cpu <= 1 else 'NOT met'})")
        if "arbiter" in results and "html2image" in results:
            print(f"arbiter / html2image: {results['html2image']['wall'] / results['arbiter']['wall']:.2f} × the pages/s")
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
