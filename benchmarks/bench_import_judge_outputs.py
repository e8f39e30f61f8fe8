"""Benchmark of ``import_judge_outputs`` (docs/protocol.md "Commands") on 50,000 JSONL lines (issue 29 item
5).

Builds a demo-like study (``make_demo_study --no-votes --no-judges``: 40 pages, 6 systems) and a
50,000-line judges JSONL on it (every human and deployment comparison × 5 judges × 2 orders ×
enough repeats; 90 % strict valid replies, 5 % fenced replies, 5 % prose that fails validation,
usage on every line), then times ``judge_outputs_import_jsonl`` alone (study and file built
beforehand). Baseline: 23.8 s for 50,000 lines, as measured when issue 29 was filed; target ≤ 3 s.

It runs once on a scratch SQLite database and, when ``DATABASE_URL`` names PostgreSQL, once there
too (in a scratch database ``<name>_bench_import`` created and dropped by the run). ``--root DIR``
times another checkout's code on the same data (e.g. the code before the change:
``git worktree add /tmp/base 7eb6e0c`` then ``--root /tmp/base``).

Run: .venv/bin/python benchmarks/bench_import_judge_outputs.py [--root DIR] [--lines N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE_SECONDS = 23.8
TARGET_SECONDS = 3.0
JUDGES = ("bench-gpt", "bench-claude", "bench-gemini", "bench-qwen", "bench-llama")


def _child(root: Path, lines: int) -> None:
    """Runs inside the scratch environment: build, write the file, time the import, print JSON."""
    sys.path.insert(0, str(root))
    os.chdir(root)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("make_demo_study", "--slug", "bench-import", "--no-votes", "--no-judges", stdout=quiet)
    from annotation.models import Axis, Comparison, Study
    from judges.models import JudgeOutput
    from judges.services.outputs import judge_outputs_import_jsonl

    study = Study.objects.get(slug="bench-import")
    axes = list(Axis.objects.filter(study=study).order_by("position"))
    comparisons = list(Comparison.objects.filter(study=study).select_related("page").order_by("pk"))
    per_repeat = len(comparisons) * len(JUDGES) * 2
    repeats = -(-lines // per_repeat)
    path = Path(os.environ["MEDIA_ROOT"]).parent / "judges.jsonl"
    n = 0
    with path.open("w", encoding="utf-8") as handle:
        for repeat in range(repeats):
            for judge_no, judge in enumerate(JUDGES):
                for c_no, comparison in enumerate(comparisons):
                    active = comparison.page.active_axis_ids(axes)
                    for order in ("primary", "swapped"):
                        if n >= lines:
                            break
                        pick = (c_no * 7 + judge_no * 3 + repeat) % 20
                        reply = {
                            "winner": "ABT"[pick % 3].replace("T", "TIE"),
                            "confidence": 1 + pick % 5,
                            "reason": f"line {n}: layout and text compared",
                            "axes": [{"id": a, "score": (pick + k) % 5 - 2} for k, a in enumerate(active)],
                        }
                        raw = json.dumps(reply)
                        if pick == 0:
                            raw = "Candidate A looks closer to me."
                        elif pick == 1:
                            raw = f"```json\n{raw}\n```"
                        record = {
                            "comparison": comparison.external_id,
                            "judge": judge,
                            "family": judge.split("-")[1],
                            "order": order,
                            "repeat": repeat,
                            "raw": raw,
                            "usage": {"input_tokens": 3000 + pick, "output_tokens": 80, "cached_tokens": 0},
                            "model": f"{judge}-2026-01",
                        }
                        handle.write(json.dumps(record) + "\n")
                        n += 1
    profile = os.environ.get("BENCH_PROFILE")  # a path: write the import's cProfile statistics there
    cpu = time.process_time()
    started = time.perf_counter()
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        counts = profiler.runcall(judge_outputs_import_jsonl, study=study, path=path)
        profiler.dump_stats(profile)
    else:
        counts = judge_outputs_import_jsonl(study=study, path=path)
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    stored = JudgeOutput.objects.filter(comparison__study=study).count()
    print(json.dumps({"seconds": seconds, "cpu": cpu, "lines": n, "stored": stored, "counts": counts}))


def _run(root: Path, database_url: str, lines: int) -> dict[str, object]:
    scratch = Path(tempfile.mkdtemp(prefix="arbiter-bench-jo-"))
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url or f"sqlite:///{scratch / 'db.sqlite3'}",
        MEDIA_ROOT=str(scratch / "media"),
        DJANGO_SETTINGS_MODULE="config.settings.test",
    )
    env.pop("CELERY_BROKER_URL", None)
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(root), "--lines", str(lines)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the scratch database, media and JSONL (~70 MB)
    if out.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _postgres_scratch(url: str, suffix: str = "bench_import") -> tuple[str, str, str]:
    """(scratch database URL, admin URL, scratch name) beside ``url``'s database."""
    base, _, name = url.rpartition("/")
    scratch = f"{name.split('?')[0]}_{suffix}"
    return f"{base}/{scratch}", f"{base}/postgres", scratch


def _psql(admin_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(admin_url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(sql)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose code is timed (default: this one)")
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        _child(args.child, args.lines)
        return 0
    root = args.root.resolve()
    runs = [("SQLite", "")]
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        runs.append(("PostgreSQL", url))
    failed = False
    print(f"import_judge_outputs, {args.lines:,} lines, code at {root}; load {os.getloadavg()[0]:.1f}")
    for backend, database_url in runs:
        if database_url:
            scratch_url, admin_url, name = _postgres_scratch(database_url)
            _psql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
            _psql(admin_url, f'CREATE DATABASE "{name}"')
            try:
                figures = _run(root, scratch_url, args.lines)
            finally:
                _psql(admin_url, f'DROP DATABASE IF EXISTS "{name}"')
        else:
            figures = _run(root, "", args.lines)
        seconds = float(figures["seconds"])  # type: ignore[arg-type]
        ok = seconds <= TARGET_SECONDS and figures["stored"] == figures["lines"]
        failed |= not ok
        print(
            f"  {backend:<10} {seconds:6.2f} s wall, {float(figures['cpu']):6.2f} s CPU (this process; "  # type: ignore[arg-type]
            f"the server's work is in the wall time) for {figures['lines']:,} lines ({figures['stored']:,} stored; "
            f"{figures['counts']})  target ≤ {TARGET_SECONDS:.0f} s  "
            f"{BASELINE_SECONDS / seconds:5.1f}x faster than the {BASELINE_SECONDS} s baseline"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
