"""Paired A/B benchmark of the rater flow: two servers side by side, each given half of the raters.

This machine's speed drifts by ±15 % within minutes (a shared virtual machine), more than most
changes to the hot path are worth, so runs one after the other cannot tell a 5 % change from
the drift. Here both variants run at the same time on the same database: server A from this
checkout, server B from ``--b-root`` (another checkout, e.g. ``git worktree add /tmp/before
HEAD~1``) and/or with ``--b-env`` settings, each gunicorn (``--workers`` × ``--threads``) getting
the same closed-loop load (``--raters`` / 2 each, the HTML flow of ``bench_raters.py``). Whatever
the machine does, it does to both. Printed per round: votes stored, server CPU per request,
answer and image p95 of each, and the ratios B / A; then the rounds' medians.

    .venv/bin/python benchmarks/bench_ab.py --b-env DATABASE_CONN_MAX_AGE=0 [--rounds 3] [--seconds 30]
    .venv/bin/python benchmarks/bench_ab.py --b-root /tmp/before [--raters 50]
    .venv/bin/python benchmarks/bench_ab.py --b-workers 2 --b-threads 2   (gunicorn's layout)

Both servers use one schema: B's code must not need other migrations than A's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_raters import (
    arbiter_flow,
    arbiter_server,
    free_port,
    gunicorn_command,
    pct,
    run_level,
    server_cpu_seconds,
    stop_server,
    verify_votes,
    wait_until_serving,
    warm_up,
)


def _pairs(values: list[str]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"not NAME=VALUE: {item!r}")
        out[key] = value
    return out


def start_b(*, root: Path, env: dict[str, str], workers: int, threads: int) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    process = subprocess.Popen(gunicorn_command(port, workers=workers, threads=threads, root=root), cwd=root, env=env,
                               start_new_session=True)
    return f"http://127.0.0.1:{port}", process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=int, default=50, help="in all, half per server")
    parser.add_argument("--seconds", type=float, default=30.0, help="per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ramp", type=float, default=2.0)
    parser.add_argument("--think", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--b-workers", type=int, default=None, help="server B's processes (default: --workers)")
    parser.add_argument("--b-threads", type=int, default=None, help="server B's threads (default: --threads)")
    parser.add_argument("--a-env", nargs="*", default=[], metavar="NAME=VALUE", help="settings of server A only")
    parser.add_argument("--b-env", nargs="*", default=[], metavar="NAME=VALUE", help="settings of server B only")
    parser.add_argument("--b-root", type=Path, default=None, help="checkout server B runs from (default: this one)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/arbiter_ab_bench")
    args = parser.parse_args()
    a_env, b_env = _pairs(args.a_env), _pairs(args.b_env)
    half = max(1, args.raters // 2)
    b_root = (args.b_root or Path(__file__).resolve().parents[1]).resolve()
    slots = (args.raters + int(250 * args.seconds * args.rounds / 60)) // 4 + 10
    base_env = dict(os.environ)
    os.environ.update(a_env)
    with arbiter_server(database_url=args.database_url, raters_per_block=slots, workers=args.workers,
                        threads=args.threads, port=0) as (base_a, link, server_a):
        # The benchmark's settings as server A got them, without A's own (B keeps what the shell had).
        env_b = {k: v for k, v in os.environ.items() if k not in a_env}
        env_b.update({k: base_env[k] for k in a_env if k in base_env}, **b_env)
        b_workers, b_threads = args.b_workers or args.workers, args.b_threads or args.threads
        base_b, server_b = start_b(root=b_root, env=env_b, workers=b_workers, threads=b_threads)
        try:
            wait_until_serving(base_b, link, what=f"server B at {base_b}", tries=300)
            asyncio.run(warm_up(base_b, link, b_workers * b_threads))
            print(f"A: {base_a} {a_env or ''} (this checkout); B: {base_b} {b_env or ''} ({b_root}); "
                  f"{half} raters each, {args.seconds:.0f} s per round")
            print(f"{'round':>5} {'votes A':>8} {'votes B':>8} {'B/A':>5}  {'CPU/req A':>9} {'CPU/req B':>9} {'B/A':>5}  "
                  f"{'vote p95 A':>10} {'vote p95 B':>10}  {'image p95 A':>11} {'image p95 B':>11}")
            rows, everything = [], []
            for r in range(1, args.rounds + 1):
                cpu_a0, cpu_b0 = server_cpu_seconds(server_a.pid), server_cpu_seconds(server_b.pid)

                async def both(r: int = r):  # type: ignore[no-untyped-def]
                    return await asyncio.gather(
                        run_level(base_a, arbiter_flow(link, "html"), half, args.seconds, args.think, args.ramp, f"a{r}"),
                        run_level(base_b, arbiter_flow(link, "html"), half, args.seconds, args.think, args.ramp, f"b{r}"),
                    )

                stats_a, stats_b = asyncio.run(both())
                cpu_a = server_cpu_seconds(server_a.pid) - cpu_a0
                cpu_b = server_cpu_seconds(server_b.pid) - cpu_b0
                req_a = sum(len(v) for v in stats_a.latencies.values())
                req_b = sum(len(v) for v in stats_b.latencies.values())
                row = {
                    "votes_a": len(stats_a.acknowledged), "votes_b": len(stats_b.acknowledged),
                    "cpu_a": 1000 * cpu_a / max(1, req_a), "cpu_b": 1000 * cpu_b / max(1, req_b),
                    "vote_a": pct(stats_a.latencies["vote"], 95), "vote_b": pct(stats_b.latencies["vote"], 95),
                    "image_a": pct(stats_a.latencies["image"], 95), "image_b": pct(stats_b.latencies["image"], 95),
                    "errors": sum(stats_a.errors.values()) + sum(stats_b.errors.values()),
                }
                rows.append(row)
                everything += [stats_a, stats_b]
                print(f"{r:>5} {row['votes_a']:>8} {row['votes_b']:>8} {row['votes_b'] / max(1, row['votes_a']):>5.2f}  "
                      f"{row['cpu_a']:>9.2f} {row['cpu_b']:>9.2f} {row['cpu_b'] / row['cpu_a']:>5.2f}  "
                      f"{row['vote_a']:>10.1f} {row['vote_b']:>10.1f}  {row['image_a']:>11.1f} {row['image_b']:>11.1f}"
                      + (f"  errors {row['errors']}" if row["errors"] else ""))
            med = {k: statistics.median(row[k] for row in rows) for k in rows[0]}
            print(f"{'median':>5} {med['votes_a']:>8.0f} {med['votes_b']:>8.0f} {med['votes_b'] / max(1, med['votes_a']):>5.2f}  "
                  f"{med['cpu_a']:>9.2f} {med['cpu_b']:>9.2f} {med['cpu_b'] / med['cpu_a']:>5.2f}  "
                  f"{med['vote_a']:>10.1f} {med['vote_b']:>10.1f}  {med['image_a']:>11.1f} {med['image_b']:>11.1f}")
            time.sleep(0.5)
            check = verify_votes(everything)
            ok = check["lost"] == check["duplicated"] == check["unacknowledged"] == 0
            print(f"votes: {check} -> {'OK: none lost or duplicated' if ok else 'PROBLEM'}")
        finally:
            stop_server(server_b)


if __name__ == "__main__":
    main()
