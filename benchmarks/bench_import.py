"""Benchmark of ``import_study`` (docs/protocol.md "Files") on a paper-sized bundle.

Generates a bundle of 1,000 pages × 10 systems (600 × 800 PNGs drawn with Pillow: text lines,
a table, a photo-like gradient; media regions on every third page so neutralization runs; a
few failed renders; 3 human comparisons per page) into a temporary folder, then runs
``manage.py migrate`` and ``manage.py import_study`` as subprocesses against a scratch SQLite
database and MEDIA_ROOT, and prints pages, candidates, images, wall seconds and the peak RSS of
the import process.

Run: .venv/bin/python benchmarks/bench_import.py [--pages 1000] [--systems 10] [--zip] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 600, 800
AXES = [
    {"id": "GLOBAL_LAYOUT_FIDELITY", "scope": "fixed", "description": "Regions, columns, spacing."},
    {"id": "TEXT_VISUAL_PRESENTATION", "scope": "fixed", "description": "Wrapping, typography."},
    {"id": "TABLE", "scope": "conditional", "description": "Rows, columns, alignment."},
]
PHOTO_BOX = [600, 700, 934, 950]


def draw_page(seed: int, jitter: int) -> Image.Image:
    """A document-like page: a title, text lines, a table and a photo-like gradient box."""
    rng = random.Random(seed)
    image = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    dx = rng.randint(-jitter, jitter)
    draw.rectangle((40 + dx, 30, 40 + dx + rng.randint(250, 450), 60), fill=(20, 20, 40))
    y = 90
    while y < 340:
        width = rng.randint(300, 520)
        draw.rectangle((40 + dx, y, 40 + dx + width, y + 8), fill=(60, 60, 70))
        y += 16 + rng.randint(0, jitter)
    for row in range(6):  # a table
        top = 360 + row * 26
        draw.line((40, top, 560, top), fill=(120, 120, 120))
        for col in range(4):
            draw.rectangle((50 + col * 130, top + 8, 50 + col * 130 + rng.randint(40, 110), top + 16), fill=(80, 80, 90))
    x0, y0 = int(PHOTO_BOX[0] * WIDTH / 1000), int(PHOTO_BOX[1] * HEIGHT / 1000)
    x1, y1 = int(PHOTO_BOX[2] * WIDTH / 1000), int(PHOTO_BOX[3] * HEIGHT / 1000)
    base = rng.randint(0, 200)
    for i in range(y1 - y0):  # photo-like gradient
        draw.line((x0, y0 + i, x1, y0 + i), fill=((base + i) % 256, (base * 2 + i // 2) % 256, 180))
    return image


def write_image(args: tuple[str, int, int]) -> None:
    path, seed, jitter = args
    draw_page(seed, jitter).save(path, format="PNG", compress_level=1)


def generate(folder: Path, pages: int, systems: int) -> dict[str, int]:
    (folder / "images").mkdir(parents=True)
    system_ids = [f"sys{j:02d}" for j in range(systems)]
    rng = random.Random(20260830)
    doc: dict[str, object] = {
        "slug": "bench-import",
        "title": "Import benchmark",
        "kind": "pairwise_reference",
        "instructions_md": "Pick the more faithful candidate.",
        "axes": AXES,
        "systems": [{"id": s, "name": f"System {s}"} for s in system_ids],
    }
    jobs: list[tuple[str, int, int]] = []
    page_rows, candidates, comparisons = [], [], []
    failed = 0
    for p in range(pages):
        pid = f"p{p:04d}"
        media = [{"kind": "photo", "bbox_1000": PHOTO_BOX}] if p % 3 == 0 else []
        page_rows.append({
            "id": pid, "image": f"images/{pid}.png", "media": media, "meta": {"n": p},
            "targets": [{"axis": "TABLE", "role": "table", "bbox_1000": [66, 450, 934, 600], "description": "table"}],
        })
        jobs.append((str(folder / "images" / f"{pid}.png"), p * 1000, 0))
        rendered_systems = []
        for j, sid in enumerate(system_ids):
            if p % 97 == 5 and j == systems - 1:  # a few failed renders
                candidates.append({"page": pid, "system": sid, "image": None, "rendered": False, "media": []})
                failed += 1
                continue
            name = f"images/{pid}-{sid}.png"
            candidates.append({"page": pid, "system": sid, "image": name, "rendered": True, "media": media})
            jobs.append((str(folder / name), p * 1000, 3 + j))
            rendered_systems.append(sid)
        for k in range(3):
            a, b = rng.sample(rendered_systems, 2)
            comparisons.append({"id": f"{pid}-c{k}", "page": pid, "a": a, "b": b, "set": "human"})
        # rng.sample may repeat a pair on a page; keep the first of each unordered pair.
        seen: set[frozenset[str]] = set()
        unique = []
        for c in comparisons[-3:]:
            key = frozenset((c["a"], c["b"]))
            if key not in seen:
                seen.add(key)
                unique.append(c)
        comparisons[-3:] = unique
    doc.update(pages=page_rows, candidates=candidates, comparisons=comparisons)
    with ProcessPoolExecutor() as pool:
        list(pool.map(write_image, jobs, chunksize=64))
    (folder / "study.json").write_text(json.dumps(doc))
    return {"pages": pages, "candidates": len(candidates), "failed": failed, "comparisons": len(comparisons),
            "images": len(jobs)}


def _process_tree(root: int) -> dict[int, tuple[int, float]]:
    """{pid: (rss bytes, cpu seconds)} of a process and its descendants, from /proc (Linux)."""
    parents: dict[int, int] = {}
    stats: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        stats[pid] = (int(fields[21]) * page, (int(fields[11]) + int(fields[12])) / tick)
    tree, frontier = {root}, [root]
    while frontier:
        current = frontier.pop()
        for pid, parent in parents.items():
            if parent == current and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return {pid: stats[pid] for pid in tree if pid in stats}


def run_measured(command: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float, int, float]:
    """Run a command; wall seconds, peak summed RSS of its process tree, and its tree's CPU seconds."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        peak, cpu_by_pid = 0, {}
        while process.poll() is None:
            tree = _process_tree(process.pid)
            peak = max(peak, sum(rss for rss, _ in tree.values()))
            cpu_by_pid.update({pid: cpu for pid, (_, cpu) in tree.items()})
            time.sleep(0.25)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        result = subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())
    return result, seconds, peak, sum(cpu_by_pid.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--zip", action="store_true", help="import a .zip of the bundle instead of the folder")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="arbiter-bench-import-"))
    try:
        started = time.perf_counter()
        counts = generate(work / "bundle", args.pages, args.systems)
        target = work / "bundle"
        if args.zip:
            target = work / "bundle.zip"
            with zipfile.ZipFile(target, "w") as archive:
                for path in sorted((work / "bundle").rglob("*")):
                    if path.is_file():
                        archive.write(path, path.relative_to(work / "bundle").as_posix())
        size = sum(p.stat().st_size for p in (work / "bundle").rglob("*") if p.is_file())
        print(f"generated {counts['images']:,} images ({size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s")

        env = dict(os.environ, DATABASE_URL=f"sqlite:///{work}/db.sqlite3", MEDIA_ROOT=str(work / "media"))
        env.pop("CELERY_BROKER_URL", None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result, seconds, peak_tree, tree_cpu = run_measured([*manage, "import_study", str(target)], env)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_kb = usage.ru_maxrss
        cpu = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
        if result.returncode != 0:
            print(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "import failed")
            sys.exit(1)
        stored = sum(1 for p in (work / "media").rglob("*.png"))
        print(f"slug: {result.stdout.strip()}")
        print(f"pages: {counts['pages']:,}  candidates: {counts['candidates']:,} ({counts['failed']} failed renders)  "
              f"comparisons: {counts['comparisons']:,}")
        print(f"stored images (originals + neutralized): {stored:,}")
        print(f"import: {seconds:.1f} s wall, {max(cpu, tree_cpu):.1f} s CPU incl. image workers "
              f"({counts['images'] / seconds:.0f} images/s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"peak memory: {peak_kb / 1024:.0f} MB largest process (getrusage), "
              f"{peak_tree / 2**20:.0f} MB summed over the import's process tree (sampled)")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
