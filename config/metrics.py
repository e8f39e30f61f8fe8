"""``/metrics`` for Prometheus, the rater-path timing middleware and the optional JSON request log.

``/metrics`` answers staff sessions and clients whose address (``annotation.client_address``: behind a
trusted proxy, the forwarded one) is in ``ARBITER_METRICS_ALLOW`` (addresses or networks); anyone
else gets a 404, as for a page that does not exist. With ``PROMETHEUS_MULTIPROC_DIR`` set the values
of every gunicorn process are added up (``gunicorn.conf.py`` removes a dead worker's live gauges).

``ARBITER_LOG_FORMAT=json`` logs one JSON line per request on the ``arbiter.request`` logger, with a
request id that is also the ``X-Request-ID`` response header (a valid incoming one, e.g. from the
load balancer, is kept).
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Callable, Iterable

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from annotation.client_address import client_address
from annotation.metrics import (
    DB_POOL_CONNECTIONS,
    RATER_REQUEST_SECONDS,
    RATER_RESPONSES,
    log_request,
    request_id_of,
)

POOL_SAMPLE_SECONDS = 1.0


class RequestMetricsMiddleware:
    """Times the rater views (``rater:*``) into ``arbiter_rater_request_seconds``; with JSON logs on,
    logs every request and sends its ``X-Request-ID``. Samples the database pool once a second."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.json_log = settings.ARBITER_LOG_FORMAT == "json"
        self._pool_sampled = 0.0

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        request_id = request_id_of(request.META.get("HTTP_X_REQUEST_ID")) if self.json_log else ""
        response = self.get_response(request)
        elapsed = time.perf_counter() - start
        match = request.resolver_match
        view = match.view_name if match is not None else ""
        if view.startswith("rater:"):
            RATER_REQUEST_SECONDS.labels(view=view).observe(elapsed)
            RATER_RESPONSES.labels(view=view, status=str(response.status_code)).inc()
        if self.json_log:
            response["X-Request-ID"] = request_id
            log_request(request_id=request_id, method=request.method or "", path=request.path,
                        status=response.status_code, seconds=elapsed, view=view)
        now = time.monotonic()
        if now - self._pool_sampled > POOL_SAMPLE_SECONDS:
            self._pool_sampled = now
            sample_pool()
        return response


def sample_pool() -> None:
    """psycopg's pool counters of this process (only with DATABASE_POOL_MAX_SIZE > 0)."""
    from django.db import connection

    pool = getattr(connection, "pool", None) if connection.vendor == "postgresql" else None
    if pool is None:
        return
    stats = pool.get_stats()
    size, available = stats.get("pool_size", 0), stats.get("pool_available", 0)
    DB_POOL_CONNECTIONS.labels(state="open").set(size)
    DB_POOL_CONNECTIONS.labels(state="in_use").set(max(size - available, 0))
    DB_POOL_CONNECTIONS.labels(state="waiting").set(stats.get("requests_waiting", 0))


class QueueCollector(Collector):
    """Judge calls waiting or running, read from the database when scraped (shared by every node)."""

    def collect(self) -> Iterable[GaugeMetricFamily]:
        from django.db.models import Count

        from judges.models import JudgeOutput, OutputStatus

        family = GaugeMetricFamily("arbiter_judge_queue", "Judge calls waiting (pending) or being made (running).",
                                   labels=["status"])
        counts = dict(
            JudgeOutput.objects.filter(status__in=[OutputStatus.PENDING, OutputStatus.RUNNING])
            .values_list("status").annotate(n=Count("id")).order_by()
        )
        for status in (OutputStatus.PENDING, OutputStatus.RUNNING):
            family.add_metric([str(status)], counts.get(status, 0))
        yield family


def _allowed(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_staff:
        return True
    networks = settings.ARBITER_METRICS_ALLOW_NETWORKS
    if not networks:
        return False
    try:
        address = ipaddress.ip_address(client_address(request))
    except ValueError:
        return False
    return any(address.version == n.version and address in n for n in networks)


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        raise Http404
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = REGISTRY
    body = generate_latest(registry) + generate_latest(_queue_registry())
    response = HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


_queue: CollectorRegistry | None = None


def _queue_registry() -> CollectorRegistry:
    global _queue
    if _queue is None:
        _queue = CollectorRegistry()
        _queue.register(QueueCollector())
    return _queue
