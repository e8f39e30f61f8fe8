"""Prometheus metrics of the rater paths and the stored votes (config/metrics.py serves ``/metrics``).

``prometheus_client`` keeps each value in this process, or, with ``PROMETHEUS_MULTIPROC_DIR`` set
before the process starts (gunicorn and Celery with several processes), in files of that folder,
which ``/metrics`` adds up across the processes (docs/decisions/0050-observability.md).
An ``observe`` or ``inc`` costs about a microsecond: the rater hot path stays as it was.
"""

from __future__ import annotations

import json
import logging
import re
import uuid

from prometheus_client import Counter, Gauge, Histogram

# Seconds inside the application (the image pass before Django included); the load balancer sees the rest.
RATER_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

RATER_REQUEST_SECONDS = Histogram(
    "arbiter_rater_request_seconds", "Time to answer a rater request, by view.",
    ["view"], buckets=RATER_LATENCY_BUCKETS,
)
# Database queries and database time of a rater request (annotation.middleware.ServerTimingMiddleware):
# kept off the rater's responses, where a count would tell a trial's role (issue 46).
RATER_REQUEST_QUERIES = Histogram(
    "arbiter_rater_request_queries", "Database queries of a rater request, by view.",
    ["view"], buckets=(0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50),
)
RATER_DB_SECONDS = Histogram(
    "arbiter_rater_db_seconds", "Database time of a rater request, by view.",
    ["view"], buckets=RATER_LATENCY_BUCKETS,
)
RATER_RESPONSES = Counter("arbiter_rater_responses", "Rater responses by view and status code.", ["view", "status"])
VOTES_STORED = Counter("arbiter_votes_stored", "Votes stored (an idempotent replay is not counted again).")
JUDGE_CALLS = Counter(
    "arbiter_judge_calls", "Judge calls by how they ended (valid, invalid, failed; released: handed back to the queue).",
    ["status"],
)
JUDGE_ATTEMPTS = Counter("arbiter_judge_attempts", "Judge call attempts by outcome.", ["outcome"])
DB_POOL_CONNECTIONS = Gauge(
    "arbiter_db_pool_connections", "PostgreSQL pool connections of the web processes (DATABASE_POOL_MAX_SIZE).",
    ["state"], multiprocess_mode="livesum",
)

request_log = logging.getLogger("arbiter.request")
REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._-]{8,64}")


def request_id_of(incoming: str | None) -> str:
    """The load balancer's request id when it is a plain token, else a new one."""
    return incoming if incoming and REQUEST_ID_RE.fullmatch(incoming) else uuid.uuid4().hex


def log_request(*, request_id: str, method: str, path: str, status: int, seconds: float, view: str) -> None:
    """One JSON line per request (``ARBITER_LOG_FORMAT=json``)."""
    request_log.info(json.dumps({
        "request_id": request_id, "method": method, "path": path, "status": status,
        "ms": round(seconds * 1000, 2), "view": view,
    }, separators=(",", ":")))
