"""``/livez`` and ``/healthz`` for load balancers and orchestrators
(docs/decisions/0049-several-web-nodes.md).

Answered by the first middleware, before the host check, the HTTPS redirect, sessions, CSRF and
authentication: a load balancer probes a node by its address over plain HTTP, and neither probe
reveals anything of a study.

- ``/livez``: the process answers (200, ``{"status": "ok"}``); no database, no storage.
- ``/healthz``: readiness. The database answers, every migration is applied, the media storage
  (the media folder or the bucket) answers: 200 when all pass, else 503, with each check's name and
  ``ok`` / ``fail``. ``?checks=database,migrations`` asks for some of them only (a load balancer that
  should keep a node in rotation while the bucket is away: its rater pages still work, its images
  answer 503 until the bucket is back).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from annotation.services.deployment import READINESS_CHECKS, readiness

LIVENESS_PATH = "/livez"
READINESS_PATH = "/healthz"


def _json(payload: dict[str, object], status: int) -> HttpResponse:
    response = HttpResponse(json.dumps(payload, separators=(",", ":")), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def livez() -> HttpResponse:
    return _json({"status": "ok"}, 200)


def healthz(request: HttpRequest) -> HttpResponse:
    asked = request.GET.get("checks")
    names = [n.strip() for n in asked.split(",") if n.strip()] if asked else None
    if names is not None and (not names or any(n not in READINESS_CHECKS for n in names)):
        return _json({"status": "fail", "error": f"checks: choose among {','.join(READINESS_CHECKS)}"}, 400)
    results = readiness(names)
    ok = all(results.values())
    return _json(
        {"status": "ok" if ok else "fail", "checks": {name: "ok" if passed else "fail" for name, passed in results.items()}},
        200 if ok else 503,
    )


class HealthMiddleware:
    """The two probes, answered before any other middleware (first in ``MIDDLEWARE``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if request.method in ("GET", "HEAD"):
            if path == LIVENESS_PATH:
                return livez()
            if path == READINESS_PATH:
                return healthz(request)
        return self.get_response(request)
