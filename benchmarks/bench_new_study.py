"""Benchmark of ``new_study`` (issue 29): folders of 1,000 pages × 10 systems to an imported study.

Draws the same document-like 600 × 800 pages as ``bench_import.py`` into ``refs/`` and one folder
per system (a few pages missing a system's image), then runs ``manage.py new_study
pairwise_reference --reference refs/ --system sys00=out/sys00/ …`` twice as subprocesses against
a scratch SQLite database and MEDIA_ROOT: ``--dry-run``, then the real run (bundle written,
imported all or nothing, kept). Prints the wall and CPU seconds of each, the ratio to the 30 s
target and to the 77.1 s bundle import of the same size before this work (docs/benchmarks.md,
``bench_import.py`` at 1,000 × 10).

Run: .venv/bin/python benchmarks/bench_new_study.py [--pages 1000] [--systems 10] [--comparisons all|none]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_import import ROOT, run_measured, write_image

BASELINE_IMPORT_SECONDS = 77.1  # import_study of 1,000 pages × 10 systems before issue 29 (docs/benchmarks.md)
TARGET_SECONDS = 30.0


def generate(folder: Path, pages: int, systems: int) -> int:
    jobs: list[tuple[str, int, int]] = []
    (folder / "refs").mkdir(parents=True)
    for j in range(systems):
        (folder / "out" / f"sys{j:02d}").mkdir(parents=True)
    for p in range(pages):
        jobs.append((str(folder / "refs" / f"p{p:04d}.png"), p * 1000, 0))
        for j in range(systems):
            if p % 97 == 5 and j == systems - 1:  # a few missing images: failed renders
                continue
            jobs.append((str(folder / "out" / f"sys{j:02d}" / f"p{p:04d}.png"), p * 1000, 3 + j))
    with ProcessPoolExecutor() as pool:
        list(pool.map(write_image, jobs, chunksize=64))
    return len(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--comparisons", choices=("all", "none"), default="all")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="arbiter-bench-new-study-"))
    try:
        started = time.perf_counter()
        images = generate(work / "in", args.pages, args.systems)
        print(f"generated {images:,} images in {time.perf_counter() - started:.1f} s")
        env = dict(
            os.environ, DATABASE_URL=f"sqlite:///{work}/db.sqlite3", MEDIA_ROOT=str(work / "media"),
            ARBITER_BUNDLE_ARCHIVE=str(work / "bundles"),
        )
        env.pop("CELERY_BROKER_URL", None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        command = [*manage, "new_study", "pairwise_reference", "--reference", str(work / "in" / "refs"),
                   *[f"--system=sys{j:02d}={work / 'in' / 'out' / f'sys{j:02d}'}" for j in range(args.systems)],
                   "--slug", "bench-new-study", "--comparisons", args.comparisons]
        dry, dry_seconds, _, dry_cpu = run_measured([*command, "--dry-run"], env)
        if dry.returncode != 0:
            sys.exit(dry.stderr.strip().splitlines()[-1])
        print(f"dry run: {dry_seconds:.1f} s wall, {dry_cpu:.1f} s CPU; "
              + "; ".join(line for line in dry.stdout.splitlines() if line.startswith(("would create", "a real run"))))
        real, seconds, peak, cpu = run_measured(command, env)
        if real.returncode != 0:
            sys.exit(real.stderr.strip().splitlines()[-1] if real.stderr.strip() else "new_study failed")
        print(real.stdout.strip())
        print(f"new_study: {seconds:.1f} s wall, {cpu:.1f} s CPU incl. image workers, peak {peak / 2**20:.0f} MB summed "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
        print(f"target {TARGET_SECONDS:.0f} s: ratio {seconds / TARGET_SECONDS:.2f}; "
              f"baseline import_study of 1,000 × 10 {BASELINE_IMPORT_SECONDS} s: ratio {seconds / BASELINE_IMPORT_SECONDS:.2f}"
              + ("" if args.pages == 1000 and args.systems == 10 else f" (this run: {args.pages} × {args.systems})"))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
