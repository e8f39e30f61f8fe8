"""The rater page's links (Django's ``reverse``), and the origin a request was served from.

A per-process cache of reversed URL patterns stood here (docs/benchmarks-history.md, "Rater hot
path, third pass (issue 18), 2026-12-01, this session's machine"); it had no current A/B of 10 %
or more and was removed (issue 47 item 6: its row in docs/benchmarks.md).
"""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import reverse

from annotation.models import Study


def url(name: str, *args: str) -> str:
    """``reverse(name, args=args)``."""
    return reverse(name, args=args)


def trial_links(study: Study, trial_token: str, *, revising: bool = False) -> dict[str, str]:
    """What a trial page links to: its answer form, problem report and undo, and the study's pages."""
    return {
        "answer": url("rater:revise" if revising else "rater:vote", trial_token),
        "problem": url("rater:problem", trial_token),
        "undo": url("rater:undo", trial_token),
        "instructions": url("rater:instructions", study.link_token),
        "pause": url("rater:pause", study.link_token),
        "link": url("rater:link", study.link_token),
    }


def serving_origin(request: HttpRequest) -> str:
    """The origin this request was served from (participant links when ARBITER_PUBLIC_URL is unset)."""
    return request.build_absolute_uri("/").rstrip("/")
