"""Start-up cost of every Arbiter process (issue 41 item 5): what a command or a worker pays before its
first piece of work.

Each figure is taken in fresh interpreters (the median of ``--repeat`` runs):

- ``django.setup()``: settings, apps, models, admin modules (``config.settings.local``);
- the URL configuration loaded (``config.urls``, every view module it imports), after set-up;
- ``manage.py check`` as a subprocess, end to end;
- a rater web worker's start-up heap: the WSGI application loaded (``config.wsgi``), the URL
  configuration loaded and the rater's URLs resolved, as a worker's first requests do; the
  objects the garbage collector tracks, the bytes tracemalloc counts (in a separate
  run, as tracing slows imports), the process's peak RSS, and which scientific packages were loaded.

``--root DIR`` measures another checkout (e.g. ``git worktree add /tmp/base main``, ``--root /tmp/base``)
with this checkout's ``.venv``.

Run: .venv/bin/python benchmarks/bench_startup.py [--root DIR] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = tempfile.mkdtemp(prefix="bench-startup-")
SCIENTIFIC = ("numpy", "scipy", "pandas", "statsmodels", "matplotlib", "sklearn")

CHILD_SETUP = """
import json, os, sys, time
started, cpu = time.perf_counter(), time.process_time()
import django
django.setup()
setup, setup_cpu = time.perf_counter() - started, time.process_time() - cpu
started, cpu = time.perf_counter(), time.process_time()
from django.urls import get_resolver
get_resolver().url_patterns
urls, urls_cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"setup": setup, "setup_cpu": setup_cpu, "urls": urls, "urls_cpu": urls_cpu}))
"""

CHILD_HEAP = f"SCIENTIFIC = {SCIENTIFIC!r}\n" + """
import gc, json, os, resource, sys, tracemalloc
if os.environ.get("BENCH_TRACE"):
    tracemalloc.start()
import config.wsgi  # noqa: F401  (the WSGI application, as a gunicorn worker loads it)
from django.urls import get_resolver, resolve
get_resolver().url_patterns
for path in ("/s/link/", "/t/trial/vote/", "/t/trial/a.png", "/api/rater/link/trial/"):
    resolve(path)
gc.collect()
result = {
    "objects": len(gc.get_objects()),
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "modules": len(sys.modules),
    "scientific": [name for name in SCIENTIFIC if name in sys.modules],
}
if os.environ.get("BENCH_TRACE"):
    result["traced_mib"] = tracemalloc.get_traced_memory()[0] / 2**20
print(json.dumps(result))
"""


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    env["PYTHONPATH"] = str(root)
    env.pop("BENCH_TRACE", None)
    # Byte-code caches as every deployed process has them (the first, warm-up run writes them).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # A scratch SQLite file (the checks open a connection); never the checkout's own database.
    env["DATABASE_URL"] = f"sqlite:///{SCRATCH}/startup.sqlite3"
    return env


def _child(root: Path, code: str, **extra: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=_env(root) | extra, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = args.root.resolve()
    try:
        run(root, args.repeat)
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)


def run(root: Path, repeat: int) -> None:
    print(f"checkout: {root}; load average {os.getloadavg()[0]:.2f}")

    _child(root, CHILD_HEAP)  # warm-up: byte-code caches written, files in the page cache
    runs = [_child(root, CHILD_SETUP) for _ in range(repeat)]
    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"django.setup(): {median('setup'):.3f} s wall, {median('setup_cpu'):.3f} s CPU (median of {repeat}; target <= 0.4 s)")
    print(f"URL configuration after set-up: {median('urls'):.3f} s wall, {median('urls_cpu'):.3f} s CPU")

    checks, cpus = [], []
    for _ in range(repeat):
        started, before = time.perf_counter(), os.times()
        subprocess.run([sys.executable, "manage.py", "check"], cwd=root, env=_env(root), capture_output=True, check=True)
        after = os.times()
        checks.append(time.perf_counter() - started)
        cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
    print(f"manage.py check: {statistics.median(checks):.3f} s wall, {statistics.median(cpus):.3f} s CPU (median of {repeat})")

    heap = _child(root, CHILD_HEAP)
    traced = _child(root, CHILD_HEAP, BENCH_TRACE="1")
    print(
        f"rater web worker after start-up: {heap['objects']:,} gc-tracked objects, "
        f"{traced['traced_mib']:.1f} MiB traced (tracemalloc), peak RSS {heap['rss_mib']:.0f} MiB, "
        f"{heap['modules']:,} modules; scientific packages loaded: {', '.join(heap['scientific']) or 'none'}"
    )


if __name__ == "__main__":
    main()
