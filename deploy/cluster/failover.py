"""Rater load with a fault in the middle, and what must hold after it (issue 28 item 5).

The load is ``benchmarks/bench_raters.py``'s (its aiohttp client, the HTML flow, its answers and
its vote check), with what the trial page does when an answer is lost on the way
(``static/annotation/trial.js``): the same form, with the same idempotency key, is sent again
(0.5 s apart, doubling, five times) after a refused connection or a 502/503/504. Every request is
recorded on a timeline, so a fault's cost is measured: requests failed, the last failure after
the fault, and whether every rater got going again.

Used by ``tests/deploy/test_cluster_failover.py`` and ``benchmarks/bench_cluster.py``.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_raters import (  # noqa: E402  (the load generator, reused)
    AXIS_RE,
    IMAGE_RE,
    KEY_RE,
    TOKEN_RE,
    LoadClient,
    Reply,
    Stats,
    random_answer,
    verify_votes,
)

RETRIED = (502, 503, 504)
RESENDS = 5


@dataclass
class Timeline:
    """Every request: (start, end, kind, ok) in seconds since the load began."""

    began: float = field(default_factory=time.perf_counter)
    events: list[tuple[float, float, str, bool]] = field(default_factory=list)
    resent: int = 0

    def record(self, start: float, kind: str, ok: bool) -> None:
        self.events.append((start - self.began, time.perf_counter() - self.began, kind, ok))

    def summary(self, fault_at: float | None) -> dict[str, Any]:
        failed = [e for e in self.events if not e[3]]
        out: dict[str, Any] = {"requests": len(self.events), "failed": len(failed), "resent": self.resent}
        if fault_at is not None:
            after = [e for e in self.events if e[0] >= fault_at]
            ok_after = [e for e in after if e[3]]
            out["failed_started_before_fault"] = sum(1 for e in failed if e[0] < fault_at)
            out["failed_started_after_fault"] = sum(1 for e in failed if e[0] >= fault_at)
            # Recovery: from the fault to the end of the last failed request (0 if none failed).
            out["recovered_after_s"] = round(max((e[1] for e in failed if e[1] >= fault_at), default=fault_at) - fault_at, 2)
            out["ok_after_fault"] = len(ok_after)
        return out


async def _send(client: LoadClient, timeline: Timeline, kind: str, method: str, url: str, resends: int = RESENDS,
                **kwargs: Any) -> Reply | None:
    """One request as the page sends it: resent after a lost connection or a 502/503/504."""
    reply: Reply | None = None
    for attempt in range(resends + 1):
        start = time.perf_counter()
        try:
            reply = await (client.get(url, **kwargs) if method == "GET" else client.post(url, **kwargs))
        except (aiohttp.ClientError, TimeoutError):
            reply = None
        ok = reply is not None and reply.status_code not in RETRIED and reply.status_code < 500
        timeline.record(start, kind, ok and reply is not None and reply.status_code == 200)
        if ok:
            return reply
        if attempt < resends:
            timeline.resent += 1
            await asyncio.sleep(0.5 * 2 ** attempt)
    return reply


async def _session(client: LoadClient, link: str, participant: str, deadline: float, think: float, stats: Stats,
                   timeline: Timeline, rng: random.Random, image_resends: int | None) -> bool:
    r = await _send(client, timeline, "join", "GET", f"/s/{link}/", params={"participant": participant},
                    follow_redirects=True)
    if r is None or r.status_code != 200:
        stats.errors[f"join: HTTP {getattr(r, 'status_code', '-')}"] += 1
        return time.perf_counter() < deadline
    if b"This study is full" in r.content:
        stats.full += 1
        return False
    stats.joins += 1
    csrf = client.cookie("csrftoken")
    html = r.text
    while time.perf_counter() < deadline:
        token, key = TOKEN_RE.search(html), KEY_RE.search(html)
        if token is None or key is None:
            return True  # finished: the completion page
        for url in dict.fromkeys(IMAGE_RE.findall(html)) if image_resends is not None else ():
            img = await _send(client, timeline, "image", "GET", url, resends=image_resends or 0)
            if img is None or img.status_code != 200 or not img.content.startswith(b"\x89PNG"):
                stats.errors[f"image: HTTP {getattr(img, 'status_code', '-')}"] += 1
        verdict, confidence, axes = random_answer(rng, list(dict.fromkeys(AXIS_RE.findall(html))))
        form = {"verdict": verdict, "confidence": str(confidence), "rationale": "", "idempotency_key": key.group(1),
                **{f"axis:{a}": str(v) for a, v in axes.items()}}
        headers = {"X-CSRFToken": csrf, "HX-Request": "true", "Referer": str(client.base_url) + "/"}
        v = await _send(client, timeline, "vote", "POST", f"/t/{token.group(1)}/vote/", data=form, headers=headers)
        if v is None or v.status_code != 200:
            stats.errors[f"vote: HTTP {getattr(v, 'status_code', '-')}"] += 1
            return True  # a new participant (the page would show the error)
        stats.acknowledged[token.group(1)] = key.group(1)
        html = v.text
        if think > 0:
            await asyncio.sleep(rng.expovariate(1 / think))
    return False


async def _rater(base: str, link: str, prefix: str, deadline: float, think: float, stats: Stats, timeline: Timeline,
                 seed: int, delay: float, image_resends: int | None) -> None:
    rng = random.Random(seed)
    await asyncio.sleep(delay)
    n = 0
    while time.perf_counter() < deadline:
        n += 1
        async with LoadClient(base, timeout=30.0) as client:
            if not await _session(client, link, f"{prefix}-{n}", deadline, think, stats, timeline, rng, image_resends):
                return


async def _load(base: str, link: str, n: int, seconds: float, think: float, ramp: float,
                fault: tuple[float, Callable[[], None]] | None, label: str,
                image_resends: int | None) -> tuple[Stats, Timeline, float | None]:
    stats, timeline = Stats(), Timeline()
    deadline = timeline.began + seconds
    fault_at: list[float] = []

    async def inject() -> None:
        if fault is None:
            return
        await asyncio.sleep(fault[0])
        fault_at.append(time.perf_counter() - timeline.began)
        await asyncio.to_thread(fault[1])

    await asyncio.gather(inject(), *(
        _rater(base, link, f"{label}-r{i}", deadline, think, stats, timeline, seed=i, delay=ramp * i / n,
               image_resends=image_resends)
        for i in range(n)
    ))
    return stats, timeline, (fault_at[0] if fault_at else None)


def run_load(base: str, link: str, *, raters: int = 50, seconds: float = 60.0, think: float = 1.0, ramp: float = 5.0,
             fault: tuple[float, Callable[[], None]] | None = None, label: str = "f",
             image_resends: int | None = RESENDS) -> tuple[Stats, Timeline, float | None]:
    """N closed-loop raters for ``seconds``; ``fault`` = (at seconds, action run in a thread).

    ``image_resends=0``: images asked once, as a browser's ``<img>`` does (the rater answers
    whatever they showed); by default resent like answers, so every failure is a counted error;
    ``None``: no image asked at all (what the pages and answers cost without them).
    """
    return asyncio.run(_load(base, link, raters, seconds, think, ramp, fault, label, image_resends))


def over_assigned_blocks(slug: str = "bench") -> list[tuple[int, int, int]]:
    """Blocks with more live rater assignments than planned: (block id, live, target)."""
    from django.db.models import Count, Q

    from annotation.models import Block

    blocks = Block.objects.filter(study__slug=slug).annotate(
        live=Count("assignments", filter=Q(assignments__rater__isnull=False) & ~Q(assignments__state="voided")))
    return [(b.pk, b.live, b.target_raters) for b in blocks if b.live > b.target_raters]


def check_votes(*stats: Stats) -> dict[str, int]:
    """bench_raters' check (acknowledged vs stored, duplicates) over every run given, plus over-assigned blocks."""
    result = verify_votes(list(stats))
    result["over_assigned_blocks"] = len(over_assigned_blocks())
    return result
