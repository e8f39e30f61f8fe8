"""Load benchmark of the rater flow: N concurrent raters against gunicorn + PostgreSQL on loopback.

Each simulated rater joins through the study link (``?participant=``) and then, like a browser
(``--flow html``, default): fetches the trial's three images (once each, as a browser cache
would), posts its answer as htmx does — the response is the next trial's HTML — and pauses for an
exponential "think time" (``--think`` mean). ``--flow api`` uses the JSON rater API instead (fetch
trial, images, submit). 5 % of submissions are sent twice, like a double click. A rater that
finishes its assignment joins again under a new participant id. Arrivals are spread over
``--ramp`` seconds. Reported per N: latency p50 / p95 / p99 (all requests, the steady-state
"flow" without joins, and per kind), throughput, errors, and CPU per request (server processes;
PostgreSQL not included; and this load generator). Afterwards every acknowledged vote is checked
against the database: none lost, none duplicated, none stored without an acknowledgement.

Run (own database, dropped and recreated; nothing else is touched):
    .venv/bin/python benchmarks/bench_raters.py [--seconds 30] [--raters 50,200] [--think 1.0]
        [--flow html|api] [--ramp 5] [--workers 3 --threads 2]
        [--database-url postgres://postgres@127.0.0.1:5432/arbiter_raters_bench]
Target: p95 < 100 ms at 200 raters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PY = sys.executable
GUNICORN = str(Path(PY).with_name("gunicorn"))


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    acknowledged: dict[str, str] = field(default_factory=dict)  # trial token -> idempotency key
    replay_mismatch: int = 0
    joins: int = 0
    full: int = 0
    queries: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # from Server-Timing
    db_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    app_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # time inside Django


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def server_cpu_seconds(master_pid: int) -> float:
    """User + system CPU of the gunicorn master and its workers (from /proc; Linux only)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pids = [master_pid]
    try:
        children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
        pids += [int(p) for p in children]
    except OSError:
        return float("nan")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def pid_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_backend_cpu(database_url: str) -> dict[int, float]:
    """CPU seconds of every PostgreSQL backend connected to the benchmark's database (by pid)."""
    import psycopg

    parsed = urlparse(database_url)
    if not parsed.scheme.startswith("postgres"):
        return {}
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [name])]
    return {pid: pid_cpu_seconds(pid) for pid in pids}


def postgres_cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the backends spent between two snapshots (a backend that started meanwhile counts whole)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recreate_database(url: str, *, create: bool = True) -> None:
    if url.startswith("sqlite:"):
        path = Path(urlparse(url).path)
        if path.name in ("arbiter.sqlite3", "") or not path.name.endswith(".sqlite3"):
            raise SystemExit(f"refusing to recreate {path}: give a dedicated benchmark file (*.sqlite3)")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    if not re.fullmatch(r"[a-z0-9_]+", name) or name in ("arbiter", "postgres"):
        raise SystemExit(f"refusing to recreate database {name!r}: give a dedicated benchmark database")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if create:
            conn.execute(f"CREATE DATABASE {name}")


def build_study(pages: int, blocks: int, block_size: int, raters_per_block: int,
                allocation: str = "uniform") -> tuple[str, str]:
    """The benchmark study. ``adaptive``: a one-place uniform start, then ``blocks - 1`` serve-time
    blocks (docs/protocol.md "Serve-time choice"), so nearly every trial is chosen when served."""
    import django

    django.setup()
    from annotation.services.adaptive_allocation import study_allocation_set
    from annotation.services.scheduling import blocks_schedule
    from annotation.services.serve_time import serve_block_create
    from tests.annotation.rater_factories import make_rater_study

    rs = make_rater_study(slug="bench", pages=pages, failed_render=False, image_size=(700, 1400))
    if allocation == "adaptive":
        blocks_schedule(study=rs.study, blocks=1, block_size=block_size, repeats=2, min_gap=5, raters=[1], seed=1)
        study_allocation_set(study=rs.study, allocation="adaptive", target={"kind": "top_k", "k": 1})
        rs.study.refresh_from_db()
        for position in range(2, blocks + 1):
            serve_block_create(study=rs.study, position=position, size=block_size, target_raters=raters_per_block,
                               seed=position, repeats=2, min_gap=5)
    else:
        blocks_schedule(study=rs.study, blocks=blocks, block_size=block_size, repeats=2, min_gap=5,
                        raters=[raters_per_block] * blocks, seed=1)
    return rs.study.link_token, rs.study.slug


@dataclass
class Reply:
    """One answered request, read whole (what the flows look at)."""

    status_code: int
    headers: Any
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LoadClient:
    """One simulated browser: keep-alive connections and a cookie jar, on aiohttp.

    The generator shares the two cores with the server under test, so its own CPU per request
    matters: aiohttp's client costs 0.12 ms of CPU per request where httpx's asynchronous client
    costs 1.0 ms (measured on this machine against a trivial WSGI app; docs/benchmarks-history.md), and
    with httpx the generator took a third of the machine at N = 50.
    """

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self.base_url = base_url
        self.session = aiohttp.ClientSession(
            base_url=base_url, cookie_jar=aiohttp.CookieJar(unsafe=True),  # unsafe: cookies for 127.0.0.1
            timeout=aiohttp.ClientTimeout(total=timeout),
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=10.0),  # below the server's keep-alive
        )

    async def __aenter__(self) -> LoadClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()

    def cookie(self, name: str) -> str:
        return next((c.value for c in self.session.cookie_jar if c.key == name), "")

    def set_cookies(self, cookies: dict[str, str]) -> None:
        self.session.cookie_jar.update_cookies(cookies)

    async def get(self, url: str, *, params: dict[str, str] | None = None, follow_redirects: bool = False) -> Reply:
        async with self.session.get(url, params=params, allow_redirects=follow_redirects) as r:
            return Reply(r.status, r.headers, await r.read())

    async def post(self, url: str, *, data: dict[str, str] | None = None, json: Any = None,
                   headers: dict[str, str] | None = None) -> Reply:
        async with self.session.post(url, data=data, json=json, headers=headers) as r:
            return Reply(r.status, r.headers, await r.read())


async def timed(stats: Stats, kind: str, coro):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    try:
        response = await coro
    except (aiohttp.ClientError, TimeoutError) as exc:
        stats.errors[f"{kind}: {type(exc).__name__}"] += 1
        return None
    stats.latencies[kind].append((time.perf_counter() - start) * 1000)
    timing = SERVER_TIMING_RE.search(response.headers.get("server-timing", ""))
    if timing:
        stats.db_ms[kind].append(float(timing[1]))
        stats.queries[kind].append(int(timing[2]))
        if timing[3]:
            stats.app_ms[kind].append(float(timing[3]))
    return response


SERVER_TIMING_RE = re.compile(r'db;dur=([\d.]+);desc="(\d+) queries"(?:.*?app;dur=([\d.]+))?')


TOKEN_RE = re.compile(r'action="/t/([^/"]+)/vote/"')
KEY_RE = re.compile(r'name="idempotency_key" value="([^"]+)"')
AXIS_RE = re.compile(r'name="axis:([A-Za-z0-9_]+)"')
IMAGE_RE = re.compile(r'src="(/t/[^"]+\.png)"')


def random_answer(rng: random.Random, axes: list[str]) -> tuple[str, int, dict[str, int]]:
    return (rng.choice(["A", "B", "TIE", "A", "B", "CANNOT_JUDGE"]), rng.randint(1, 5),
            {a: rng.randint(-2, 2) for a in axes})


async def think_until(seconds: float, deadline: float) -> None:
    """A rater's pause, cut at the run's end: no request follows the deadline, so waiting past it
    (up to about ``think`` × ln N for the longest of N pauses: 50 s of CI's load check) measures
    nothing."""
    await asyncio.sleep(max(0.0, min(seconds, deadline - time.perf_counter())))


async def fetch_images(client: LoadClient, urls: list[str], stats: Stats) -> None:
    for url in urls:
        img = await timed(stats, "image", client.get(url))
        if img is None or img.status_code != 200 or not img.content.startswith(b"\x89PNG"):
            stats.errors[f"image: HTTP {getattr(img, 'status_code', '-')}"] += 1


async def html_trials(client, html: str, csrf: str, deadline: float, think: float, stats: Stats,  # type: ignore[no-untyped-def]
                      rng: random.Random) -> None:
    """What a browser does: each htmx POST of an answer returns the next trial's HTML."""
    while time.perf_counter() < deadline:
        token, key = TOKEN_RE.search(html), KEY_RE.search(html)
        if token is None or key is None:
            return  # finished: the completion page
        await fetch_images(client, list(dict.fromkeys(IMAGE_RE.findall(html))), stats)  # the browser cache dedupes
        verdict, confidence, axes = random_answer(rng, list(dict.fromkeys(AXIS_RE.findall(html))))
        form = {"verdict": verdict, "confidence": str(confidence), "rationale": "", "idempotency_key": key.group(1),
                **{f"axis:{a}": str(v) for a, v in axes.items()}}
        headers = {"X-CSRFToken": csrf, "HX-Request": "true", "Referer": str(client.base_url) + "/"}
        sends = 2 if rng.random() < 0.05 else 1  # a double click now and then
        next_html = None
        for _ in range(sends):
            r = await timed(stats, "vote", client.post(f"/t/{token.group(1)}/vote/", data=form, headers=headers))
            if r is None or r.status_code != 200:
                stats.errors[f"vote: HTTP {getattr(r, 'status_code', '-')}"] += 1
                continue
            stats.acknowledged[token.group(1)] = key.group(1)
            next_html = r.text
        if next_html is None:
            return
        html = next_html
        if think > 0:
            await think_until(rng.expovariate(1 / think), deadline)


async def api_trials(client, link: str, csrf: str, deadline: float, think: float, stats: Stats,  # type: ignore[no-untyped-def]
                     rng: random.Random) -> None:
    """The JSON API: the current trial once, then each vote's answer brings the next one (one request
    per vote), its images, the break's Continue when one stands before it."""
    headers = {"X-CSRFToken": csrf, "Referer": str(client.base_url) + "/"}
    data: dict[str, Any] | None = None
    while time.perf_counter() < deadline:
        if data is None:
            r = await timed(stats, "trial", client.get(f"/api/rater/{link}/trial/"))
            if r is None or r.status_code != 200:
                stats.errors[f"trial: HTTP {getattr(r, 'status_code', '-')}"] += 1
                await asyncio.sleep(0.5)
                continue
            data = r.json()
        if data.get("break_due"):
            r = await timed(stats, "trial", client.post(data["continue_url"], headers=headers))
            data = r.json() if r is not None and r.status_code == 200 else None
            continue
        if data["finished"]:
            return
        await fetch_images(client, list(data["images"].values()), stats)
        verdict, confidence, axes = random_answer(rng, [a["id"] for a in data["axes"]])
        body = {"verdict": verdict, "confidence": confidence, "axes": axes, "rationale": "",
                "idempotency_key": data["idempotency_key"]}
        answers = []
        for _ in range(2 if rng.random() < 0.05 else 1):
            v = await timed(stats, "vote", client.post(data["vote_url"], json=body, headers=headers))
            if v is None or v.status_code != 200:
                stats.errors[f"vote: HTTP {getattr(v, 'status_code', '-')}"] += 1
                continue
            answers.append(v.json())
            stats.acknowledged[data["trial"]] = body["idempotency_key"]
        # A resent vote answers the same, but its next trial comes with a fresh key of its own.
        recorded = [{k: v for k, v in a.items() if k != "next_trial"} for a in answers]
        if len(recorded) == 2 and recorded[0] != recorded[1]:
            stats.replay_mismatch += 1
        data = answers[-1]["next_trial"] if answers else None
        if think > 0:
            await think_until(rng.expovariate(1 / think), deadline)


# A flow is one participant's session: (client, participant id, deadline, think, stats, rng) -> go on?
Flow = Callable[[LoadClient, str, float, float, Stats, random.Random], Awaitable[bool]]


def arbiter_flow(link: str, kind: str) -> Flow:
    """Join through the study link, then answer through the HTML pages (htmx) or the JSON API."""

    async def session(client: LoadClient, participant: str, deadline: float, think: float, stats: Stats,
                      rng: random.Random) -> bool:
        r = await timed(stats, "join", client.get(f"/s/{link}/", params={"participant": participant},
                                                  follow_redirects=True))
        if r is None or r.status_code != 200:
            stats.errors[f"join: HTTP {getattr(r, 'status_code', '-')}"] += 1
            return False
        if b"This study is full" in r.content:
            stats.full += 1
            return False
        stats.joins += 1
        csrf = client.cookie("csrftoken")
        if kind == "html":
            await html_trials(client, r.text, csrf, deadline, think, stats, rng)
        else:
            await api_trials(client, link, csrf, deadline, think, stats, rng)
        return True

    return session


async def rater(
    base: str, flow: Flow, prefix: str, deadline: float, think: float, stats: Stats, seed: int, delay: float,
) -> None:
    """A closed-loop participant: one request at a time; a finished participant comes back as a new one."""
    rng = random.Random(seed)
    await asyncio.sleep(delay)  # arrivals spread over the ramp-up, as participants trickle in
    n = 0
    while time.perf_counter() < deadline:
        n += 1
        async with LoadClient(base, timeout=30.0) as client:
            if not await flow(client, f"{prefix}-{n}", deadline, think, stats, rng):
                return


async def warm_up(base: str, link: str, n: int) -> None:
    """Each gunicorn worker imports the URLconf (and with it numpy/scipy) on its first request:
    a one-time start-up cost of seconds that must not be counted as rater latency."""
    async with LoadClient(base, timeout=120.0) as client:
        for _ in range(3):
            await asyncio.gather(*(client.get(f"/s/{link}/") for _ in range(n)))


async def run_level(
    base: str, flow: Flow, n: int, seconds: float, think: float, ramp: float, label: str
) -> Stats:
    stats = Stats()
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(
        rater(base, flow, f"{label}-r{i}", deadline, think, stats, seed=i, delay=ramp * i / n)
        for i in range(n)
    ))
    return stats


def verify_votes(all_stats: list[Stats]) -> dict[str, int]:
    from annotation.models import Trial, Vote

    acknowledged: dict[str, str] = {}
    for s in all_stats:
        acknowledged.update(s.acknowledged)
    stored = dict(
        Vote.objects.filter(trial__assignment__block__study__slug="bench").values_list("trial__token", "idempotency_key")
    )
    lost = sum(1 for token, key in acknowledged.items() if stored.get(token) != key)
    unacknowledged = sum(1 for token in stored if token not in acknowledged)
    per_trial = Trial.objects.filter(assignment__block__study__slug="bench", vote__isnull=False).count()
    return {"acknowledged": len(acknowledged), "stored": len(stored), "lost": lost,
            "unacknowledged": unacknowledged, "duplicated": len(stored) - per_trial}


def report(n: int, stats: Stats, seconds: float) -> None:
    print(f"\n(load average now {os.getloadavg()[0]:.1f}; 'flow' = trial + image + vote, the steady state; html flow: 'vote' returns the next trial)")
    every = [x for values in stats.latencies.values() for x in values]
    total = len(every)
    print(f"\nN = {n} raters, {seconds:.0f} s: {total} requests ({total / seconds:.0f}/s), "
          f"{len(stats.acknowledged)} votes, {stats.joins} joins, errors {sum(stats.errors.values())}"
          + (f" {dict(stats.errors)}" if stats.errors else "")
          + (f", replay mismatches {stats.replay_mismatch}" if stats.replay_mismatch else "")
          + (f", study full for {stats.full}" if stats.full else ""))
    steady = [x for kind in ("trial", "image", "vote") for x in stats.latencies.get(kind, [])]
    print(f"  {'kind':<6} {'count':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'queries':>8} {'db ms':>6} {'app ms':>6}")
    for kind in ("all", "flow", "join", "trial", "image", "vote"):
        values = {"all": every, "flow": steady}.get(kind) or stats.latencies.get(kind, [])
        if values:
            q, db, app = stats.queries.get(kind), stats.db_ms.get(kind), stats.app_ms.get(kind)
            server = f" {sum(q) / len(q):>8.1f} {sum(db) / len(db):>6.2f}" if q and db else ""
            server += f" {sum(app) / len(app):>6.2f}" if app else ""
            print(f"  {kind:<6} {len(values):>7} {pct(values, 50):>8.1f} {pct(values, 95):>8.1f} "
                  f"{pct(values, 99):>8.1f}{server}")


@dataclass
class Level:
    """One load level's outcome: the generator's stats and the CPU the server side spent."""

    n: int
    stats: Stats
    seconds: float
    requests: int
    server_cpu: float  # seconds, the server processes
    database_cpu: float  # seconds, PostgreSQL backends (0 on SQLite)

    def per_request_ms(self, cpu: float) -> float:
        return 1000 * cpu / self.requests if self.requests else float("nan")


def measure_level(base: str, flow: Flow, n: int, *, seconds: float, think: float, ramp: float, label: str,
                  server_pid: int, database_url: str = "") -> Level:
    cpu0, client0 = server_cpu_seconds(server_pid), sum(os.times()[:2])
    pg0 = postgres_backend_cpu(database_url) if database_url else {}
    stats = asyncio.run(run_level(base, flow, n, seconds, think, ramp, label=label))
    server = server_cpu_seconds(server_pid) - cpu0
    pg = postgres_cpu_delta(pg0, postgres_backend_cpu(database_url)) if database_url else 0.0
    requests = sum(len(v) for v in stats.latencies.values())
    level = Level(n=n, stats=stats, seconds=seconds, requests=requests, server_cpu=server, database_cpu=pg)
    level.client_cpu = sum(os.times()[:2]) - client0  # type: ignore[attr-defined]
    return level


def gunicorn_command(port: int, *, workers: int, threads: int, root: Path = ROOT) -> list[str]:
    """The benchmark's gunicorn on loopback (``workers`` × ``threads``), run from a checkout's root.

    The worker is gunicorn.conf.py's stock gthread; a checkout that still has the balanced worker
    ``config/gunicorn_worker.py`` (removed in issue 41; ``bench_ab.py --b-root``) runs that one.
    """
    balanced = (root / "config" / "gunicorn_worker.py").exists()
    worker = "config.gunicorn_worker.BalancedThreadWorker" if balanced else "gthread"
    return [GUNICORN, "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", str(workers), "-k", worker,
            "--threads", str(threads), "--backlog", "2048", "--keep-alive", "30", "--log-level", "warning"]


def wait_until_serving(base: str, link: str, *, what: str, tries: int = 150) -> None:
    """Wait until the study link answers 200 (a worker imports its views on start)."""
    for _ in range(tries):
        try:
            if httpx.get(f"{base}/s/{link}/", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} did not start")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session (gunicorn's master and workers, or runserver)."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


_MEDIA: list[Path] = []


def _media_root() -> Path:
    if not _MEDIA:
        import atexit
        import shutil

        _MEDIA.append(Path(tempfile.mkdtemp(prefix="arbiter-bench-media-")))
        atexit.register(shutil.rmtree, _MEDIA[0], ignore_errors=True)
    return _MEDIA[0]


@contextmanager
def arbiter_server(*, database_url: str, raters_per_block: int, workers: int, threads: int, port: int,
                   server: str = "gunicorn", keep_db: bool = False,
                   allocation: str = "uniform") -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """A fresh benchmark database and study, served on loopback: yields (base URL, link token, process).

    ``server``: ``gunicorn`` (``workers`` × ``threads``, gthread; ``make run`` serves 1 × 4) or
    ``runserver`` (Django's threaded development server).
    """
    # One media folder per process: Django's settings (MEDIA_ROOT) are read once, so a second
    # server started by the same process (bench_peer_potato's adaptive study) must find its
    # study's images where this process wrote them.
    media = _media_root()
    env = dict(os.environ, DATABASE_URL=database_url, MEDIA_ROOT=str(media),
               DJANGO_SETTINGS_MODULE="config.settings.local", DJANGO_DEBUG="0", DATABASE_CONN_MAX_AGE="600",
               LOG_LEVEL="ERROR", ARBITER_SERVER_TIMING="1")  # queries per request (never on a study's server)
    os.environ.update(env)
    print(f"database {database_url} (recreated), media {media}")
    recreate_database(database_url)
    subprocess.run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    t0 = time.perf_counter()
    link, _ = build_study(pages=80, blocks=4, block_size=60, raters_per_block=raters_per_block, allocation=allocation)
    print(f"study: 240 comparisons in 4 blocks of 60 (+2 hidden repeats), {4 * raters_per_block} planned assignments, "
          f"built in {time.perf_counter() - t0:.1f} s; images 700×1400 px"
          + ("; adaptive: a one-place uniform start, then 3 serve-time blocks" if allocation == "adaptive" else ""))
    from django.db import connections

    connections.close_all()  # SQLite: no connection of this process holds the file while the server writes
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    if server == "runserver":
        command = [PY, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--skip-checks"]
        what = "Django runserver (threaded)"
    else:
        command = gunicorn_command(port, workers=workers, threads=threads)
        what = f"gunicorn {workers} workers × {threads} threads"
    process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL if server == "runserver" else None,
                               stderr=subprocess.DEVNULL if server == "runserver" else None)
    try:
        wait_until_serving(base, link, what=server)
        print(f"{what} on {base}; load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        asyncio.run(warm_up(base, link, workers * threads))
        yield base, link, process
    finally:
        stop_server(process)
        if not keep_db:
            connections.close_all()
            try:
                recreate_database(database_url, create=False)  # drop it
            except Exception as exc:  # the figures are printed; a failed clean-up only leaves the database
                print(f"could not clean the benchmark database: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--raters", default="50,200")
    parser.add_argument("--think", type=float, default=1.0, help="mean pause between trials, seconds (0: none)")
    parser.add_argument("--ramp", type=float, default=5.0, help="arrivals spread over this many seconds")
    parser.add_argument("--flow", choices=("html", "api"), default="html",
                        help="html: the trial page and htmx answer posts, as a browser; api: the JSON rater API")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/arbiter_raters_bench",
                        help="PostgreSQL (a dedicated database, recreated) or sqlite:////path/bench.sqlite3")
    parser.add_argument("--server", choices=("gunicorn", "runserver"), default="gunicorn",
                        help="runserver: Django's threaded development server (`make run` is gunicorn 1 x 4)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="per worker (gunicorn.conf.py: two)")
    parser.add_argument("--port", type=int, default=0, help="loopback port for the server (0: a free one)")
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--allocation", choices=("uniform", "adaptive"), default="uniform",
                        help="adaptive: every trial after a one-place uniform start is chosen when served")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on any request error or any lost, duplicated or unacknowledged vote (CI)")
    args = parser.parse_args()
    levels = [int(x) for x in args.raters.split(",")]
    failed, failures, check = False, 0, {}
    # Enough planned assignments that no rater finds the study full: every rater's first one, and
    # one more per 60 answers at up to 250 answers/s (an assignment is 62 trials).
    slots = max(40, (sum(levels) + int(250 * args.seconds * len(levels) / 60)) // 4 + 10)
    database_url = args.database_url if args.database_url.startswith("postgres") else ""
    with arbiter_server(database_url=args.database_url, raters_per_block=slots, workers=args.workers,
                        threads=args.threads, port=args.port, server=args.server, keep_db=args.keep_db,
                        allocation=args.allocation) as (base, link, server):
        print(f"think time mean {args.think} s, arrivals over {args.ramp} s, {args.flow} flow")
        all_stats = []
        for n in levels:
            level = measure_level(base, arbiter_flow(link, args.flow), n, seconds=args.seconds, think=args.think,
                                  ramp=args.ramp, label=f"n{n}", server_pid=server.pid, database_url=database_url)
            report(n, level.stats, args.seconds)
            if level.requests:
                print(f"  CPU per request: server {level.per_request_ms(level.server_cpu):.2f} ms, "
                      f"PostgreSQL backends {level.per_request_ms(level.database_cpu):.2f} ms, "
                      f"load client {level.per_request_ms(level.client_cpu):.2f} ms")  # type: ignore[attr-defined]
            all_stats.append(level.stats)
        time.sleep(0.5)
        check = verify_votes(all_stats)
        ok = check["lost"] == 0 and check["duplicated"] == 0 and check["unacknowledged"] == 0
        print(f"\nvotes: {check} -> {'OK: none lost or duplicated' if ok else 'PROBLEM'}")
        failures = sum(sum(stats.errors.values()) for stats in all_stats)
        p95 = pct([x for s in all_stats for kind in ("image", "vote", "trial") for x in s.latencies.get(kind, [])], 95)
        print(f"load check: flow p95 {p95:.1f} ms (target < 100 ms), {failures} request errors")
        if args.check and (failures or not ok):
            failed = True
    if failed:
        raise SystemExit(f"load check failed: {failures} request errors, votes {check}")


if __name__ == "__main__":
    main()
