"""The rater page's links, without a full URL reversal for each.

A trial page names about ten URLs (its answer, three images, the problem report, undo, the
study's instructions, pause and link pages), and Django's ``reverse`` of each was a measurable share
of an answer's rendering (docs/benchmarks-history.md, "Rater hot path, third pass (issue 18),
2026-12-01, this session's machine"). ``url`` reverses a name once per process and script prefix with marker arguments, and fills each later call's arguments
into that pattern. Only for arguments ``reverse`` leaves as they are (tokens and slot names:
letters, digits, ``-`` and ``_``); anything else is reversed the usual way.
"""

from __future__ import annotations

import re
from functools import lru_cache

from django.http import HttpRequest
from django.urls import NoReverseMatch, get_script_prefix, reverse

from annotation.models import Study

_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
_MARK = "zArbiterArg{}z"
_MARK_RE = re.compile(r"zArbiterArg\d+z")


@lru_cache(maxsize=128)
def _pattern(name: str, arity: int, prefix: str) -> tuple[str, ...] | None:
    """The reversed URL of ``name`` split around its ``arity`` arguments (None: not reversible so)."""
    try:
        reversed_url = reverse(name, args=[_MARK.format(i) for i in range(arity)])
    except NoReverseMatch:
        return None
    marks = _MARK_RE.findall(reversed_url)
    if marks != [_MARK.format(i) for i in range(arity)]:
        return None
    return tuple(_MARK_RE.split(reversed_url))


def url(name: str, *args: str) -> str:
    """``reverse(name, args=args)``, from the name's cached pattern when the arguments are plain."""
    parts = _pattern(name, len(args), get_script_prefix()) if all(_PLAIN.fullmatch(a) for a in args) else None
    if parts is None:
        return reverse(name, args=args)
    pieces = [parts[0]]
    for arg, after in zip(args, parts[1:], strict=True):
        pieces += [arg, after]
    return "".join(pieces)


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
