"""The rater flow on the loopback cluster (deploy/cluster/cluster.py), and a web node lost under load.

One run, one fresh database (``arbiter_cluster_bench``, dropped and recreated), bench_raters'
study (40 pages, 4 blocks of 30 comparisons + 2 hidden repeats) and its HTML flow with the trial
page's resend of a lost answer (deploy/cluster/failover.py). N raters, closed loop, for
``--seconds`` each:

1. one node direct to PostgreSQL (today's single-box deployment; the rater's path on its prepared
   alias, ARBITER_RATER_PREPARED);
2. one node through PgBouncer (transaction pooling, nothing prepared);
3. the load balancer (HAProxy) over two nodes, both through PgBouncer;
4. the failover timeline: as 3, with web node 1 SIGKILLed a third of the way in;
5. CPU per vote on the cluster's layout (HAProxy over two nodes through PgBouncer, images in the
   S3 server), with the images and without them: the web nodes' gunicorn processes, the
   PostgreSQL backends of the benchmark's database, the S3 server (moto), HAProxy (the rater
   traffic and the nodes' S3 traffic) and PgBouncer, each divided by the votes stored, with the
   requests and object GETs per vote. ``--per-vote`` runs only this (and the warm-up).

Reported per run: requests/s, stored votes/s, p50/p95 of the flow (image + vote) and each kind,
failed requests; for 4: requests failed, resent, time from the kill to the last failure, and
acknowledged = stored. The baseline of each ratio is run 1.

On a 2-core machine every node shares the same two cores (and the load generator and
PostgreSQL with them): two nodes cannot be faster than one; the point of 3 and 4 is the
deployment's shape and what a lost node costs.

PostgreSQL's own background processes (WAL writer, checkpointer) serve every database of the
machine and are not counted; a vote's WAL is written by its backend at commit, which is.

Run: .venv/bin/python benchmarks/bench_cluster.py [--raters 50] [--seconds 20] [--think 1.0] [--per-vote]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_raters import (  # noqa: E402
    build_study,
    pct,
    pid_cpu_seconds,
    postgres_backend_cpu,
    postgres_cpu_delta,
    recreate_database,
    server_cpu_seconds,
)
from deploy.cluster.cluster import PG_URL, Cluster  # noqa: E402
from deploy.cluster.failover import check_votes, run_load  # noqa: E402

# Its own database (dropped and recreated: not the one `make cluster` uses) and Redis db.
DATABASE = os.environ.get("ARBITER_BENCH_CLUSTER_DATABASE", "arbiter_cluster_bench")
REDIS = os.environ.get("ARBITER_CLUSTER_REDIS", "redis://127.0.0.1:6379/7")


def figures(label: str, stats, timeline, seconds: float, votes_before: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    by_kind: dict[str, list[float]] = {}
    for start, end, kind, ok in timeline.events:
        if ok:
            by_kind.setdefault(kind, []).append((end - start) * 1000)
    flow = by_kind.get("image", []) + by_kind.get("vote", [])
    votes = len(stats.acknowledged)
    failed = sum(1 for e in timeline.events if not e[3])
    row = {"rps": len(timeline.events) / seconds, "votes_s": votes / seconds, "p50": pct(flow, 50), "p95": pct(flow, 95)}
    kinds = "  ".join(f"{k} p95 {pct(v, 95):.0f}" for k, v in sorted(by_kind.items()))
    print(f"{label:<44} {row['rps']:>6.0f} req/s {row['votes_s']:>6.1f} votes/s  flow p50 {row['p50']:>5.1f} "
          f"p95 {row['p95']:>6.1f} ms  ({kinds}; failed {failed})", flush=True)
    return row


def cpu_snapshot(c: Cluster, direct: str) -> dict[str, object]:
    """CPU seconds so far of each part of the cluster (see the module docstring)."""
    import resource

    return {
        "web": sum(server_cpu_seconds(c.pids[f"web{i}"]) for i in range(1, c.web_nodes + 1)),
        "postgres": postgres_backend_cpu(direct),
        "object store": pid_cpu_seconds(c.pids["s3"]) if "s3" in c.pids else 0.0,
        "haproxy": pid_cpu_seconds(c.pids["haproxy"]),
        "pgbouncer": pid_cpu_seconds(c.pids["pgbouncer"]),
        "load generator": resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime,
    }


def per_vote(label: str, c: Cluster, direct: str, link: str, args: argparse.Namespace, *, images: bool):  # type: ignore[no-untyped-def]
    """One run through the load balancer; CPU of each part per stored vote."""
    before = cpu_snapshot(c, direct)
    stats, timeline, _ = run_load(c.lb_url, link, raters=args.raters, seconds=args.seconds, think=args.think,
                                  label="images" if images else "no-images", image_resends=0 if images else None)
    after = cpu_snapshot(c, direct)
    votes = max(1, len(stats.acknowledged))
    spent = {k: (postgres_cpu_delta(before[k], after[k]) if k == "postgres" else after[k] - before[k])  # type: ignore[operator, arg-type]
             for k in before}
    gets = sum(1 for e in timeline.events if e[2] == "image")
    failed = sum(1 for e in timeline.events if not e[3])
    print(f"{label:<24} {len(stats.acknowledged) / args.seconds:>6.1f} votes/s, {len(timeline.events) / votes:.2f} requests "
          f"and {gets / votes:.2f} object GETs per vote ({gets / args.seconds:.0f} GETs/s), failed {failed}; CPU per vote: "
          + ", ".join(f"{k} {1000 * v / votes:.2f} ms" for k, v in spent.items()), flush=True)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--think", type=float, default=1.0)
    parser.add_argument("--failover-seconds", type=float, default=30.0)
    parser.add_argument("--per-vote", action="store_true", help="only the CPU per vote (run 6)")
    args = parser.parse_args()

    (ROOT / "var").mkdir(exist_ok=True)  # a fresh checkout has none yet
    run_dir = Path(tempfile.mkdtemp(prefix="arbiter-bench-cluster-", dir=ROOT / "var"))
    direct = f"{PG_URL}/{DATABASE}"
    recreate_database(direct)
    c = Cluster(run_dir=run_dir, database=DATABASE, redis_url=REDIS, extra_env={"MEDIA_ROOT": str(run_dir / "media")})
    print(f"cluster under {run_dir}: starting (HAProxy, 2 web nodes x {c.web_workers} processes x {c.web_threads} threads, "
          f"PgBouncer 1.18 transaction pooling, 2 Celery worker nodes); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs", flush=True)
    c.up()
    try:
        os.environ.update(DATABASE_URL=direct, MEDIA_ROOT=str(run_dir / "media"),
                          DJANGO_SETTINGS_MODULE="config.settings.local", DJANGO_DEBUG="0")
        # The study's images go where the nodes read them: the cluster's bucket (or its shared folder).
        os.environ.update({k: v for k, v in c.env().items() if k.startswith("AWS_") or k == "ARBITER_MEDIA_STORAGE"})
        planned = max(20, args.raters // 4 + int(6 * args.seconds))
        link, _ = build_study(pages=40, blocks=4, block_size=30, raters_per_block=planned)
        from django.db import connections

        connections.close_all()
        c.start_web(3, DATABASE_URL=direct, DATABASE_POOLER="")
        c.wait_serving()
        from deploy.cluster.cluster import http_ok

        for i in (3,):
            while not http_ok(f"{c.node_url(i)}/accounts/login/"):
                time.sleep(0.2)
        # Every process imports its views on its first requests: not counted as rater latency.
        warm = [run_load(c.lb_url, link, raters=10, seconds=3, think=0.2, label="warm")[0]]
        warm += [run_load(c.node_url(i), link, raters=4, seconds=2, think=0.2, label=f"warm{i}")[0] for i in (1, 3)]
        rows, every = {}, list(warm)
        if args.per_vote:
            print(f"\nN = {args.raters} raters, closed loop, think {args.think} s, {args.seconds:.0f} s each, through "
                  f"HAProxy over 2 nodes (PgBouncer; media {'in the S3 server' if c.s3 else 'on a shared folder'})")
            every.append(per_vote("with images", c, direct, link, args, images=True))
            every.append(per_vote("without images", c, direct, link, args, images=False))
            votes = check_votes(*every)
            print(f"  votes {votes}")
            return
        print(f"\nN = {args.raters} raters, closed loop, think {args.think} s, {args.seconds:.0f} s each; "
              f"flow = image + vote (the vote answers with the next trial)")
        runs = [("1 node direct to PostgreSQL", c.node_url(3)),
                ("1 node through PgBouncer", c.node_url(1)),
                ("HAProxy, 2 nodes through PgBouncer", c.lb_url)]
        for n, (label, url) in enumerate(runs):
            stats, timeline, _ = run_load(url, link, raters=args.raters, seconds=args.seconds, think=args.think,
                                          label=f"run{n}")
            every.append(stats)
            rows[label] = figures(label, stats, timeline, args.seconds, 0)
        base = rows[runs[0][0]]
        print("\nratios to run 1 (one node direct):")
        for label, row in rows.items():
            print(f"  {label:<44} votes/s x{row['votes_s'] / base['votes_s']:.2f}  flow p95 x{row['p95'] / base['p95']:.2f}")

        print("\nCPU per vote, HAProxy over 2 nodes through PgBouncer:")
        every.append(per_vote("with images", c, direct, link, args, images=True))
        every.append(per_vote("without images", c, direct, link, args, images=False))

        c.stop("web3")
        seconds = args.failover_seconds
        stats, timeline, at = run_load(c.lb_url, link, raters=args.raters, seconds=seconds, think=args.think,
                                       fault=(seconds / 3, lambda: c.kill("web1")), label="failover")
        print(f"\nfailover: web node 1 SIGKILLed at {at:.1f} s of {seconds:.0f} s through HAProxy")
        figures("HAProxy, 2 nodes, one killed", stats, timeline, seconds, 0)
        summary = timeline.summary(at)
        time.sleep(0.5)
        votes = check_votes(*every, stats)  # the study's votes: every run's acknowledgements
        print(f"  requests {summary['requests']}, failed {summary['failed']} (started before the kill "
              f"{summary['failed_started_before_fault']}, after {summary['failed_started_after_fault']}), "
              f"resent {summary['resent']}, last failure {summary['recovered_after_s']:.2f} s after the kill, "
              f"requests served after it {summary['ok_after_fault']}")
        ok = votes["lost"] == 0 and votes["duplicated"] == 0 and votes["over_assigned_blocks"] == 0
        print(f"  votes {votes} -> {'OK: acknowledged = stored, none doubled' if ok else 'PROBLEM'}; "
              f"raters' errors after resending: {dict(stats.errors) or 'none'}")
    finally:
        c.down()
        from django.db import connections

        connections.close_all()
        recreate_database(direct, create=False)
        import shutil

        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
