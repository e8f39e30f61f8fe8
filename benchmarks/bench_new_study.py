"""Benchmark of ``new_study`` (issue 29): folders of 1,000 pages × 10 systems to an imported study.

Draws the same document-like 600 × 800 pages as ``bench_import.py`` into ``refs/`` and one folder
per system (a few pages missing a system's image), then runs ``manage.py new_study
pairwise_reference --reference refs/ --system sys00=out/sys00/ …`` as subprocesses against a
scratch SQLite database and MEDIA_ROOT: ``--dry-run``, then the real run (bundle written,
imported all or nothing, kept). When ``DATABASE_URL`` names PostgreSQL the real run is repeated
there, in a scratch database ``<name>_bench_new_study`` created and dropped by the run. Prints
the wall and CPU seconds of each (CPU summed over the command's process tree, image workers
included), the load average, the wall and CPU seconds of each stage of the command (the stages
its progress line shows; CPU of the command's own process), and the ratio to the 30 s target
and to the 77.1 s bundle import of the same size before this work (docs/benchmarks.md,
``bench_import.py`` at 1,000 × 10). ``--profile FILE`` writes a cProfile of the command's own
process (SQLite run).

Run: .venv/bin/python benchmarks/bench_new_study.py [--pages 1000] [--systems 10] [--comparisons all|none]
[--profile FILE] [--images DIR] [--keep]
"""

from __future__ import annotations

import argparse
import itertools
import json
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
from bench_import_judge_outputs import _postgres_scratch, _psql

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


def _child(stages_file: str, profile: str, argv: list[str]) -> None:
    """Run ``manage.py`` with ``argv`` in this process, writing each progress stage's start (wall
    and CPU seconds of this process) to ``stages_file``; with ``profile``, under cProfile."""
    import cProfile

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from django.core.management import execute_from_command_line

    from annotation.progress import progress_reported

    stages: list[tuple[str, float, float]] = [("starting", time.perf_counter(), time.process_time())]

    def record(stage: str, done: int | None, total: int | None) -> None:
        if stage != stages[-1][0]:
            stages.append((stage, time.perf_counter(), time.process_time()))

    profiler = cProfile.Profile() if profile else None
    try:
        with progress_reported(record):
            if profiler is not None:
                profiler.runcall(execute_from_command_line, ["manage.py", *argv])
            else:
                execute_from_command_line(["manage.py", *argv])
    finally:
        stages.append(("end", time.perf_counter(), time.process_time()))
        Path(stages_file).write_text(json.dumps(stages))
        if profiler is not None:
            profiler.dump_stats(profile)


def _stage_lines(stages_file: Path) -> list[str]:
    stages = json.loads(stages_file.read_text())
    return [f"  {name:<24} {t1 - t0:6.1f} s wall {c1 - c0:6.1f} s CPU"
            for (name, t0, c0), (_, t1, c1) in itertools.pairwise(stages)]


def _real_run(command: list[str], env: dict[str, str], label: str, work: Path, profile: str) -> float:
    """One real ``new_study`` run; prints its figures and returns its wall seconds."""
    stages_file = work / f"stages-{label}.json"
    child = [sys.executable, __file__, "--child", str(stages_file), "--child-profile", profile,
             "--child-argv", json.dumps(command[2:])]
    load_before = os.getloadavg()[0]
    real, seconds, peak, cpu = run_measured(child, env)
    if real.returncode != 0:
        sys.exit(real.stderr.strip().splitlines()[-1] if real.stderr.strip() else "new_study failed")
    print(f"{label}: " + real.stdout.strip().replace("\n", "; "))
    print(f"{label}: new_study {seconds:.1f} s wall, {cpu:.1f} s CPU incl. image workers, peak {peak / 2**20:.0f} MB "
          f"summed (load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores)")
    print("\n".join(_stage_lines(stages_file)))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--comparisons", choices=("all", "none"), default="all")
    parser.add_argument("--profile", default="", help="write a cProfile of the command's process (SQLite run) here")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", default="", help=argparse.SUPPRESS)
    parser.add_argument("--child-argv", default="[]", help=argparse.SUPPRESS)
    parser.add_argument("--images", type=Path, help="draw the images into this folder once and reuse them on later runs")
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.child_profile, json.loads(args.child_argv))
        return
    postgres = os.environ.get("DATABASE_URL", "")
    postgres = postgres if postgres.startswith(("postgres://", "postgresql://")) else ""
    work = Path(tempfile.mkdtemp(prefix="arbiter-bench-new-study-"))
    try:
        started = time.perf_counter()
        source = work / "in"
        if args.images is not None:
            source = args.images.resolve() / f"{args.pages}x{args.systems}"
        done = source / "generated"
        if done.exists():
            print(f"reusing the images in {source}")
        else:
            shutil.rmtree(source, ignore_errors=True)
            images = generate(source, args.pages, args.systems)
            done.write_text(f"{images}\n")
            print(f"generated {images:,} images in {time.perf_counter() - started:.1f} s")
        env = dict(
            os.environ, DATABASE_URL=f"sqlite:///{work}/db.sqlite3", MEDIA_ROOT=str(work / "media"),
            ARBITER_BUNDLE_ARCHIVE=str(work / "bundles"),
        )
        env.pop("CELERY_BROKER_URL", None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        command = [*manage, "new_study", "pairwise_reference", "--reference", str(source / "refs"),
                   *[f"--system=sys{j:02d}={source / 'out' / f'sys{j:02d}'}" for j in range(args.systems)],
                   "--slug", "bench-new-study", "--comparisons", args.comparisons]
        dry, dry_seconds, _, dry_cpu = run_measured([*command, "--dry-run"], env)
        if dry.returncode != 0:
            sys.exit(dry.stderr.strip().splitlines()[-1])
        print(f"dry run: {dry_seconds:.1f} s wall, {dry_cpu:.1f} s CPU; "
              + "; ".join(line for line in dry.stdout.splitlines() if line.startswith(("would create", "a real run"))))
        seconds = _real_run(command, env, "SQLite", work, os.path.abspath(args.profile) if args.profile else "")
        if postgres:
            scratch_url, admin_url, name = _postgres_scratch(postgres, "bench_new_study")
            _psql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
            _psql(admin_url, f'CREATE DATABASE "{name}"')
            try:
                pg_env = dict(env, DATABASE_URL=scratch_url, MEDIA_ROOT=str(work / "media-pg"))
                subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=pg_env, check=True)
                _real_run(command, pg_env, "PostgreSQL", work, "")
            finally:
                _psql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
        print(f"target {TARGET_SECONDS:.0f} s: ratio {seconds / TARGET_SECONDS:.2f} (SQLite); "
              f"baseline import_study of 1,000 × 10 {BASELINE_IMPORT_SECONDS} s: ratio {seconds / BASELINE_IMPORT_SECONDS:.2f}"
              + ("" if args.pages == 1000 and args.systems == 10 else f" (this run: {args.pages} × {args.systems})"))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
