"""gunicorn's settings for Arbiter, read from the project root (``gunicorn config.wsgi``).

Measured on the rater flow (docs/benchmarks-history.md, "The gunicorn layout";
docs/decisions/0031-rater-hot-path.md): one process per core plus one, each with two threads. A
request holds the GIL between its database round trips; with eight threads per process an answer
waited behind the others after each of its round trips, with two it hardly waits, and the answer's
p95 fell with the same throughput. The second thread is what keeps the core busy while the first waits for PostgreSQL.

The worker is gunicorn's stock gthread (behind a load balancer it holds the proxy's connections,
not each browser's keep-alive, so how they spread over the processes is the balancer's business).

Override with the usual environment: ``WEB_CONCURRENCY`` (processes), ``GUNICORN_THREADS``, or
any flag in ``GUNICORN_CMD_ARGS`` or on the command line (a flag wins over this file).
"""

from __future__ import annotations

import os

wsgi_app = "config.wsgi:application"
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY") or (os.cpu_count() or 1) + 1)
threads = int(os.environ.get("GUNICORN_THREADS") or 2)
keepalive = 30  # seconds: a rater's browser keeps its connection between trials
timeout = 60
backlog = 2048


def on_starting(server: object) -> None:
    # Behind PgBouncer (DATABASE_POOLER): refuse to serve, in one line, when it pools statements.
    if os.environ.get("DATABASE_POOLER"):
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
        django.setup()
        from config.db.pooler import pooling_problem

        problem = pooling_problem()
        if problem:
            raise SystemExit(f"error: {problem}")


def child_exit(server: object, worker: object) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # its live gauges leave /metrics (config/metrics.py)
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
