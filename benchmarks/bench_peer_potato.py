"""Peer benchmark: Arbiter against Potato (``potato-annotation`` from PyPI) under the same load.

One run, one closed-loop generator (``bench_raters.py``'s: N participants, each one request at a
time, no think time unless ``--think``), the systems in turn on loopback:

- Potato, JSON client (``potato-json*``): ``POST /updateinstance`` (the label, submit), then
  ``POST /annotate {"action": "next_instance"}`` (its navigation, counted as submit), whose answer
  names the next item; ``GET /api/current_instance`` (fetch) when a participant starts and after a
  failed navigation;
- Potato, HTML page (``potato-html``): the same with the form's ``next_instance`` action, the
  navigation counted as a page fetch;
- Potato, JSON client without navigation (``potato-json-direct``): ``GET /api/spans/<id>`` (the
  item's text, fetch) and ``POST /updateinstance`` (submit), item after item by id;
- Arbiter, rater JSON API: trial (fetch), its three images (fetch), vote (submit);
- Arbiter, full HTML flow: the htmx answer (submit) returns the next trial's page; its three
  images (fetch);
- ``arbiter-api-adaptive`` / ``arbiter-html-adaptive``: the same on an adaptive study whose trials
  are chosen when served (docs/protocol.md "Serve-time choice"): the serve-time cost.

Potato's settings (``potato_setting``): ``potato-json``/``potato-html`` its defaults over 10,000
items (every participant is handed every item at once); ``-docs`` as its docs suggest for the
benchmark study: the study's 240 comparisons, ``num_annotators_per_item`` the study's raters per
comparison, ``max_annotations_per_user`` one block; ``-fastest`` one annotator per item and no
per-user cap (``-1``: one item handed out at a time), over a pool the run cannot exhaust;
``-direct`` one annotator per item and Potato's default cap (every unfinished item handed to a
participant at once), which is what lets a client label by id. ``--items`` overrides the size.

How Potato is run, and why (read from Potato 2.12.1's source and its repository's docs):

- Served as its published image serves a task: gunicorn, one worker (Potato keeps its item pool
  and user state in one process; its entrypoint refuses more) × 8 threads, on the ``create_app``
  factory. ``potato start`` runs Flask's development server (``--potato-server start``).
- No ``output_annotation_format``: a deprecated key that 2.12.1 reads as a periodic export of
  every annotation, run inside a request; it never changed where labels are stored.
- Items sized to the study. Every page Potato renders counts its progress by walking the whole
  unfinished item pool (``get_progress_pending_ids_for_user``), so the cost of a navigation grows
  with the pool: the 10,000 items this benchmark first used, against a study of 240 comparisons,
  made each page walk 10,000 items. The fastest setting retires items as they are labelled, so its
  pool shrinks during the run.
- Where Potato's CPU goes in a navigating client (py-spy, the docs setting): the navigation's page
  render and what Potato does to every HTML answer (content fingerprints for each static URL,
  BeautifulSoup over the page to find its front-end assets, the generated-template folder looked
  up on disk) take most of it; ``/updateinstance`` with its state-file save about a seventh.
- Two requests per label when navigating. ``/updateinstance`` stores a label and does not move the
  participant; the navigation does, and its answer is the next item's page, naming the item. The
  API reference's ``POST /go_to {"action": "next_instance"}`` answers 400 in 2.12.1 (that route
  reads a form field ``go_to``, an item number). Asking ``/api/current_instance`` again before each
  label would add a third request that tells the client nothing new.
- No navigation at all (``-direct``): ``/updateinstance`` stores a label for any item assigned to
  the participant, and ``/api/spans/<id>`` answers any item's text, so a client holding every
  item labels them by id without a page render. This is Potato's cheapest path, several times
  cheaper per label than navigating, and the likeliest reading of an outside figure measured with
  "one annotator per item, no per-user cap". It is not a rater's page: nothing of Potato's own
  interface (progress, required-answer checks, the item's order) takes part, and one annotator per
  item holds only because the client splits the ids (Potato does not check a cap at submission).
- Each label rewrites the participant's whole state file (indented JSON, fsync) and appends to its
  history file (fsync): Potato's storage, not configurable, kept.
- The navigation's HTTP 500s are Potato's ("deque mutated during iteration": the progress walk
  meets another request retiring an item from the shared queue; the participant has moved by
  then). The client asks where the participant is instead of navigating again; navigating again
  from the new, unlabelled item is what answered 400 in this benchmark before.

Potato is installed into a scratch virtual environment (``--venv``, default ``var/peer/potato``,
never committed) with gunicorn beside it; each setting's task folder is ``var/peer/task-<system>``
(config, server log, state files). Arbiter runs gunicorn + PostgreSQL as in ``bench_raters.py``.
Per level (``--raters``, default 10,50) and system: fetch and submit p95, stored votes per second,
errors, server CPU per request (and PostgreSQL's for Arbiter). Afterwards every acknowledged vote
is looked up where each system stores it (Potato's per-user state files, Arbiter's database): the
run fails if one is missing.

    .venv/bin/python benchmarks/bench_peer_potato.py [--seconds 30] [--raters 10,50] [--think 0]
        [--systems potato-json-docs,potato-json-fastest,arbiter-html] [--items N]
        [--potato-server gunicorn|start] [--port 9210] [--rounds 1]

Absolute figures depend on the machine and on what else runs on it; the ratios within one run
are the comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_raters as br

ROOT = br.ROOT
POTATO_PASSWORD = "bench-password-1"
FETCH_KINDS = ("trial", "image", "page")
SUBMIT_KINDS = ("vote", "next")
INSTANCE_RE = re.compile(r'<input id="instance_id" name="instance_id" type="hidden" value="([^"]*)"')


# --- Potato ----------------------------------------------------------------------------------


def potato_install(venv: Path, version: str) -> Path:
    """``potato`` from PyPI in its own virtual environment (created once, reused), with gunicorn
    beside it: Potato's published image installs ``potato-annotation`` and ``gunicorn`` together
    and serves the ``create_app`` factory on gunicorn (see ``potato_server``)."""
    marker = venv / f".potato-{version}"
    if not marker.exists():
        print(f"installing potato-annotation=={version} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"potato-annotation=={version}"], check=True)
        marker.touch()
    if not (venv / "bin" / "gunicorn").exists():
        print(f"installing gunicorn into {venv} (Potato's production server) ...", flush=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "gunicorn"], check=True)
    return venv


@dataclass(frozen=True)
class PotatoSetting:
    """How Potato hands out items: ``per_item`` annotators per item (``num_annotators_per_item``;
    None: unlimited, its default), ``per_user`` items per participant (``max_annotations_per_user``;
    None: its default, every item; -1: no cap) and ``items``, the pairs in its data file."""

    per_item: int | None = None
    per_user: int | None = None
    items: int = 10_000


STUDY_COMPARISONS = 240  # the benchmark study's comparisons (bench_raters.build_study: 4 blocks of 60)
FASTEST_VOTES_PER_S = 200  # the fastest setting's pool: this many votes a second stay available


def potato_setting(system: str, *, raters_per_comparison: int, block: int, seconds: float, levels: int,
                   items: int | None = None) -> PotatoSetting:
    """``potato-json`` / ``potato-html``: the configuration this benchmark first used (Potato's
    defaults over 10,000 items); ``-docs``: as its docs suggest for the benchmark study, the study's
    240 comparisons with the study's raters per comparison each and one block per participant;
    ``-fastest``: one annotator per item and no per-user cap, over a pool that cannot run dry in the
    run (``FASTEST_VOTES_PER_S`` for every second of every level). ``items`` overrides the size."""
    if system.endswith("-docs"):
        return PotatoSetting(per_item=raters_per_comparison, per_user=block, items=items or STUDY_COMPARISONS)
    if system.endswith("-fastest"):
        return PotatoSetting(per_item=1, per_user=-1, items=items or int(FASTEST_VOTES_PER_S * seconds * levels))
    if system.endswith("-direct"):  # Potato's default cap: every item handed to every participant at once
        return PotatoSetting(per_item=1, items=items or int(FASTEST_VOTES_PER_S * seconds * levels))
    return PotatoSetting(items=items or 10_000)


def potato_task(folder: Path, port: int, setting: PotatoSetting = PotatoSetting()) -> Path:
    """A pairwise task of ``setting.items`` text pairs, every participant allowed (no consent pages).

    No ``output_annotation_format``: 2.12.1 reads that deprecated key as ``export_annotation_format``
    and then exports every annotation once a minute inside whichever request saves next; where
    annotations are stored (``output_annotation_dir``, one state file per participant) does not
    depend on it. Assignment is Potato's default, fixed order.
    """
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    (folder / "data").mkdir(parents=True)
    with (folder / "data" / "items.jsonl").open("w") as f:
        for i in range(setting.items):
            f.write(json.dumps({"id": str(i), "text": [f"Candidate A of item {i}", f"Candidate B of item {i}"]}) + "\n")
    config = {
        "port": port, "annotation_task_name": "Arbiter peer benchmark", "task_dir": ".",
        "output_annotation_dir": "output/",
        "data_files": ["data/items.jsonl"], "item_properties": {"id_key": "id", "text_key": "text"},
        "user_config": {"allow_all_users": True, "users": []}, "alert_time_each_instance": 10_000_000,
        "annotation_schemes": [{
            "annotation_type": "pairwise", "name": "preference", "description": "Which is better?",
            "mode": "binary", "items_key": "text", "labels": ["A", "B"], "allow_tie": True,
            "label_requirement": {"required": True},
        }],
        "site_dir": "default",
    }
    if setting.per_item is not None:
        config["num_annotators_per_item"] = setting.per_item
    if setting.per_user is not None:
        config["max_annotations_per_user"] = setting.per_user
    path = folder / "config.yaml"
    path.write_text(json.dumps(config, indent=1))  # JSON is YAML
    return path


POTATO_THREADS = 8  # Potato's image: GUNICORN_WORKERS=1 (its state lives in one process), GUNICORN_THREADS=8


@contextmanager
def potato_server(venv: Path, config: Path, port: int, server: str = "gunicorn",
                  threads: int = POTATO_THREADS) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Potato on loopback. ``gunicorn``: as its published image serves a task (its
    ``docker-entrypoint.sh``): one worker, ``threads`` threads, the ``create_app`` factory, access
    and error logs to the server's log; ``--keep-alive``/``--backlog`` as Arbiter's benchmark
    gunicorn. ``start``: ``potato start``, Flask's threaded development server."""
    base = f"http://127.0.0.1:{port}"
    log = (config.parent / "server.log").open("wb")
    if server == "gunicorn":
        command = [str(venv / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
                   "--threads", str(threads), "--timeout", "120", "--keep-alive", "30", "--backlog", "2048",
                   "--access-logfile", "-", "--error-logfile", "-",
                   f"potato.flask_server:create_app('{config.name}')"]
    else:
        command = [str(venv / "bin" / "potato"), "start", str(config), "-p", str(port)]
    process = subprocess.Popen(command, cwd=config.parent, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        for _ in range(300):
            try:
                if httpx.get(base + "/", timeout=1).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            raise SystemExit(f"potato did not start (see {config.parent / 'server.log'})")
        yield base, process
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its state files are written with every update
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


async def potato_sign_up(base: str, participants: list[str]) -> dict[str, dict[str, str]]:
    """Register and log in every participant before the clock starts (its password hashing is
    deliberately slow and is not what a rater waits for between items); their session cookies."""
    sessions: dict[str, dict[str, str]] = {}
    gate = asyncio.Semaphore(4)

    async def one(participant: str) -> None:
        async with gate, httpx.AsyncClient(base_url=base, timeout=120.0) as client:
            login = {"email": participant, "pass": POTATO_PASSWORD}
            await client.post("/register", data=login)
            r = await client.post("/auth", data=login)
            if r.status_code not in (200, 302):
                raise SystemExit(f"potato refused the login of {participant}: HTTP {r.status_code}")
            sessions[participant] = {c.name: c.value or "" for c in client.cookies.jar}

    await asyncio.gather(*(one(p) for p in participants))
    return sessions


def potato_direct_flow(sessions: dict[str, dict[str, str]], raters: int) -> br.Flow:
    """Two JSON requests per label, no navigation: ``GET /api/spans/<id>`` (the item's text; the
    API reference's "Get Instance Content") and ``POST /updateinstance``, item after item.

    Potato stores a label for any item assigned to the participant, wherever the participant's page
    is. With its default cap every participant is handed every unfinished item at once, so a
    client that knows the item ids (they are the researcher's own data file) can label them in
    sequence. Rater ``i`` of ``raters`` labels items ``i``, ``i + raters``, ...: one
    annotator per item, which Potato itself does not enforce at submission.
    """

    async def session(client: br.LoadClient, participant: str, deadline: float, think: float,
                      stats: br.Stats, rng: random.Random) -> bool:
        if participant not in sessions:
            return False
        client.set_cookies(sessions[participant])
        stats.joins += 1
        item = int(participant.rsplit("-r", 1)[1].split("-")[0])
        failures = 0
        while time.perf_counter() < deadline and failures < 3:
            c = await br.timed(stats, "trial", client.get(f"/api/spans/{item}"))  # the item's text, by id
            if c is None or c.status_code != 200:
                stats.errors[f"trial: HTTP {getattr(c, 'status_code', '-')}"] += 1
                failures += 1
                item += raters
                continue
            value = rng.choice(["A", "B", "tie"])
            body = {"instance_id": str(item), "type": "label", "schema": "preference",
                    "state": [{"name": "preference", "value": value}]}
            v = await br.timed(stats, "vote", client.post("/updateinstance", json=body))
            if v is None or v.status_code != 200 or v.json().get("status") != "success":
                stats.errors[f"vote: HTTP {getattr(v, 'status_code', '-')}"] += 1
                failures += 1
            else:
                stats.acknowledged[f"{participant}/{item}"] = value
                failures = 0
            item += raters
            if think > 0:
                await asyncio.sleep(rng.expovariate(1 / think))
        return False

    return session


def potato_flow(kind: str, sessions: dict[str, dict[str, str]]) -> br.Flow:
    """A signed-up participant labels its current item and moves on, as Potato's own page does:
    ``POST /updateinstance`` (the label), then ``POST /annotate`` with the ``next_instance`` action
    (JSON for ``json``, the form for ``html``). The navigation answers the next item's page, which
    names the item (the page's script reads it from there too), so the client asks
    ``/api/current_instance`` (``json``) or ``GET /annotate`` (``html``) only when it starts and
    after a failed navigation. A navigation that names no item, or the same one, is the per-user
    cap: the participant makes way for the next.

    Potato 2.12.1 at times answers a navigation with HTTP 500 after it has moved the participant
    ("deque mutated during iteration": the page's progress counter walks the shared item queue while
    another request retires an item). The failure is counted and the client asks where it now is
    rather than navigating again: a second ``next_instance`` from an unlabelled item is refused with
    400 ("Required annotation(s) not completed"), which is where this benchmark's earlier 400s came
    from. Three failures in a row end the participant's rater for the run.
    """

    async def where(client: br.LoadClient, stats: br.Stats) -> str | None:
        """The participant's current item (None: none, the participant is done), or "" on an error."""
        if kind == "json":
            r = await br.timed(stats, "trial", client.get("/api/current_instance"))
            if r is not None and r.status_code == 404:
                return None
            if r is None or r.status_code != 200:
                stats.errors[f"trial: HTTP {getattr(r, 'status_code', '-')}"] += 1
                return ""
            return str(r.json()["instance_id"])
        page = await br.timed(stats, "page", client.get("/annotate", follow_redirects=True))
        if page is None or page.status_code != 200:
            stats.errors[f"page: HTTP {getattr(page, 'status_code', '-')}"] += 1
            return ""
        found = INSTANCE_RE.search(page.text)
        return found.group(1) if found else None

    async def session(client: br.LoadClient, participant: str, deadline: float, think: float,
                      stats: br.Stats, rng: random.Random) -> bool:
        if participant not in sessions:
            return False  # every participant signed up for this rater has reached the cap
        client.set_cookies(sessions[participant])
        stats.joins += 1
        current = await where(client, stats)
        failures = 0
        while time.perf_counter() < deadline:
            if current is None:
                return True  # no item left for this participant: its cap reached
            if current == "":  # an error: ask again where the participant is
                failures += 1
                if failures >= 3:
                    return False
                current = await where(client, stats)
                continue
            if f"{participant}/{current}" not in stats.acknowledged:
                value = rng.choice(["A", "B", "tie"])
                body = {"instance_id": current, "type": "label", "schema": "preference",
                        "state": [{"name": "preference", "value": value}]}
                v = await br.timed(stats, "vote", client.post("/updateinstance", json=body))
                if v is None or v.status_code != 200 or v.json().get("status") != "success":
                    stats.errors[f"vote: HTTP {getattr(v, 'status_code', '-')}"] += 1
                    current = ""
                    continue
                stats.acknowledged[f"{participant}/{current}"] = value
            if kind == "json":
                nav = client.post("/annotate", json={"action": "next_instance", "instance_id": current})
            else:
                nav = client.post("/annotate", data={"action": "next_instance"})
            n = await br.timed(stats, "next" if kind == "json" else "page", nav)
            if n is not None and n.status_code == 200:
                found = INSTANCE_RE.search(n.text)
                following = found.group(1) if found else None
                if following == current:
                    return True  # the same item again: no next item, its cap reached
                current, failures = following, 0
            else:
                stats.errors[f"{'next' if kind == 'json' else 'page'}: HTTP {getattr(n, 'status_code', '-')}"] += 1
                failures += 1
                if failures >= 3:
                    return False
                current = await where(client, stats)  # still the labelled item: the loop navigates again
            if think > 0:
                await asyncio.sleep(rng.expovariate(1 / think))
        return False  # the run is over

    return session


def potato_stored(output: Path) -> dict[str, str]:
    """Every stored label, ``user/instance`` -> value, from Potato's per-user state files."""
    stored: dict[str, str] = {}
    for state in output.glob("*/user_state.json"):
        data = json.loads(state.read_text())
        for instance, labels in (data.get("instance_id_to_label_to_value") or {}).items():
            for label, value in labels:
                if label.get("schema") == "preference":
                    stored[f"{data['user_id']}/{instance}"] = value
    return stored


# --- the run ---------------------------------------------------------------------------------


def summary(system: str, level: br.Level) -> dict[str, object]:
    s = level.stats
    fetch = [x for k in FETCH_KINDS for x in s.latencies.get(k, [])]
    submit = [x for k in SUBMIT_KINDS for x in s.latencies.get(k, [])]
    return {
        "system": system, "n": level.n, "fetch_p95": br.pct(fetch, 95), "submit_p95": br.pct(submit, 95),
        "stored_per_s": len(s.acknowledged) / level.seconds, "errors": sum(s.errors.values()),
        "cpu_ms": level.per_request_ms(level.server_cpu),
        "db_cpu_ms": level.per_request_ms(level.database_cpu) if level.database_cpu else None,
        "cpu_per_vote_ms": 1000 * (level.server_cpu + level.database_cpu) / max(len(s.acknowledged), 1),
        # The load generator's own CPU (it shares the cores with the server under test).
        "client_cpu_per_vote_ms": 1000 * getattr(level, "client_cpu", 0.0) / max(len(s.acknowledged), 1),
        "requests": level.requests, "acknowledged": len(s.acknowledged),
        # Arbiter's SQL statements per stored vote, every request of the flow counted (Server-Timing).
        "sql_per_vote": (sum(sum(q) for q in s.queries.values()) / max(len(s.acknowledged), 1)
                         if s.queries else None),
    }


def rounds_mean(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """One row per system and level: the mean of its rounds' figures."""
    by: dict[tuple[object, object], list[dict[str, object]]] = {}
    for r in rows:
        by.setdefault((r["system"], r["n"]), []).append(r)
    merged = []
    for (system, n), group in by.items():
        row: dict[str, object] = {"system": system, "n": n}
        for key in group[0]:
            if key not in row:
                values = [g[key] for g in group]
                row[key] = None if any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]
        merged.append(row)
    return merged


def print_rounds(rows: list[dict[str, object]]) -> None:
    """Each round's stored votes per second, and the adaptive study's share of the uniform one's."""
    print("\n| round | system | N | stored votes/s | CPU per stored vote |")
    print("|---|---|---|---|---|")
    seen: dict[tuple[object, object], int] = {}
    for r in rows:
        k = (r["system"], r["n"])
        seen[k] = seen.get(k, 0) + 1
        print(f"| {seen[k]} | {r['system']} | {r['n']} | {r['stored_per_s']:.1f} | {r['cpu_per_vote_ms']:.1f} ms |")


def print_table(rows: list[dict[str, object]]) -> None:
    print("\n| system | N | fetch p95 ms | submit p95 ms | stored votes/s | errors | server CPU per request "
          "| server + database CPU per stored vote | load generator's CPU per stored vote | SQL statements per stored vote |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = f"{r['cpu_ms']:.2f} ms" + (f" + PostgreSQL {r['db_cpu_ms']:.2f} ms" if r["db_cpu_ms"] else "")
        sql = f"{r['sql_per_vote']:.1f}" if r.get("sql_per_vote") is not None else "-"
        print(f"| {r['system']} | {r['n']} | {r['fetch_p95']:.0f} | {r['submit_p95']:.0f} | "
              f"{r['stored_per_s']:.0f} | {r['errors']} | {cpu} | {r['cpu_per_vote_ms']:.1f} ms | "
              f"{r['client_cpu_per_vote_ms']:.1f} ms | {sql} |")
    by = {(r["system"], r["n"]): r for r in rows}
    pairs = [("arbiter-api", "potato-json"), ("arbiter-html", "potato-html"), ("arbiter-html", "potato-json"),
             ("arbiter-api", "potato-json-docs"), ("arbiter-html", "potato-json-docs"),
             ("arbiter-api", "potato-json-fastest"), ("arbiter-html", "potato-json-fastest"),
             ("arbiter-api", "potato-json-direct"), ("arbiter-html", "potato-json-direct"),
             ("arbiter-api-adaptive", "potato-json"), ("arbiter-html-adaptive", "potato-json"),
             ("arbiter-html-adaptive", "potato-html"), ("arbiter-api-adaptive", "arbiter-api"),
             ("arbiter-html-adaptive", "arbiter-html")]
    lines = []
    for a, p in pairs:
        for n in sorted({int(r["n"]) for r in rows}):  # type: ignore[call-overload]
            ra, rp = by.get((a, n)), by.get((p, n))
            if ra and rp and rp["stored_per_s"] and rp["cpu_ms"]:
                lines.append(f"| {a} / {p} | {n} | {ra['stored_per_s'] / rp['stored_per_s']:.2f} | "  # type: ignore[operator]
                             f"{ra['fetch_p95'] / rp['fetch_p95']:.2f} | {ra['submit_p95'] / rp['submit_p95']:.2f} | "  # type: ignore[operator]
                             f"{ra['cpu_ms'] / rp['cpu_ms']:.2f} | "  # type: ignore[operator]
                             f"{ra['cpu_per_vote_ms'] / rp['cpu_per_vote_ms']:.2f} |")  # type: ignore[operator]
    if lines:
        print("\n| ratio Arbiter / Potato | N | stored/s | fetch p95 | submit p95 | server CPU per request "
              "| CPU per stored vote |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(lines))


ARBITER_BLOCK = 62  # the benchmark study's assignment: 60 comparisons and 2 hidden repeats (bench_raters.py)


def arbiter_slots(seconds: float, levels: list[int], systems: int) -> int:
    """The benchmark study's raters per block, hence per comparison. No rater may find the study
    full: every rater's first assignment, and one more per 60 answers at up to 250 answers/s, for
    each Arbiter system measured on the study."""
    answers = 250 * seconds * len(levels) * systems
    return max(40, (sum(levels) * systems + int(answers / 60)) // 4 + 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="per level and system")
    parser.add_argument("--raters", default="10,50")
    parser.add_argument("--think", type=float, default=0.0, help="mean pause between items, seconds (0: closed loop)")
    parser.add_argument("--ramp", type=float, default=1.0)
    parser.add_argument("--items", type=int, default=None,
                        help="Potato's pairwise items (default: the study's 240 for -docs, a pool for 200 votes/s for "
                             "-fastest, 10,000 for the first configuration)")
    parser.add_argument("--potato-server", choices=("gunicorn", "start"), default="gunicorn",
                        help="gunicorn: as Potato's image serves a task; start: `potato start` (Flask's development server)")
    parser.add_argument("--potato-threads", type=int, default=POTATO_THREADS, help="gunicorn threads for Potato")
    parser.add_argument("--systems", default="potato-json,potato-json-docs,potato-json-fastest,potato-html,"
                                              "arbiter-api,arbiter-html")
    parser.add_argument("--potato-version", default="2.12.1")
    parser.add_argument("--venv", type=Path, default=ROOT / "var" / "peer" / "potato")
    parser.add_argument("--port", type=int, default=9210, help="loopback port (Potato; Arbiter takes port + 1)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/arbiter_peer_bench")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure the Arbiter studies this many times, alternating their order; the tables "
                             "give the mean of the rounds")
    args = parser.parse_args()
    levels = [int(x) for x in args.raters.split(",")]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.seconds:.0f} s per level, "
          f"closed loop{f', think {args.think} s' if args.think else ''}")
    rows: list[dict[str, object]] = []
    problems: list[str] = []

    potato_systems = [s for s in systems if s.startswith("potato")]
    arbiter_count = max(len([s for s in systems if s.startswith("arbiter") and s.endswith("-adaptive")]),
                        len([s for s in systems if s.startswith("arbiter") and not s.endswith("-adaptive")]), 1)
    raters_per_comparison = arbiter_slots(args.seconds, levels, arbiter_count)
    if potato_systems:
        venv = potato_install(args.venv, args.potato_version)
        for system in potato_systems:
            setting = potato_setting(system, raters_per_comparison=raters_per_comparison, block=ARBITER_BLOCK,
                                     seconds=args.seconds, levels=len(levels), items=args.items)
            print(f"  {system}: {setting.items:,} items, num_annotators_per_item {setting.per_item or 'unset'}, "
                  f"max_annotations_per_user {setting.per_user or 'unset'}; "
                  + (f"gunicorn 1 worker × {args.potato_threads} threads" if args.potato_server == "gunicorn"
                     else "potato start (Flask's development server)"))
            task = potato_task(ROOT / "var" / "peer" / f"task-{system}", args.port, setting)
            # A capped participant makes way for a new one: enough of them signed up for the run
            # (up to 10 labels a second per rater).
            per_rater = 1 if not setting.per_user or setting.per_user < 0 else 1 + int(10 * args.seconds / setting.per_user)
            with potato_server(venv, task, args.port, args.potato_server, args.potato_threads) as (base, process):
                levels_stats = []
                for n in levels:
                    label = f"{system}-n{n}"
                    sessions = asyncio.run(potato_sign_up(
                        base, [f"{label}-r{i}-{j}" for i in range(n) for j in range(1, per_rater + 1)]
                    ))
                    level = br.measure_level(base, (potato_direct_flow(sessions, n) if system.endswith("-direct")
                                                    else potato_flow(system.split("-")[1], sessions)), n, seconds=args.seconds,
                                             think=args.think, ramp=args.ramp, label=label,
                                             server_pid=process.pid)
                    rows.append(summary(system, level))
                    levels_stats.append(level.stats)
                    print(f"  {system} N={n}: {level.requests} requests, errors {dict(level.stats.errors) or 0}")
            stored = potato_stored(task.parent / "output")
            acknowledged = {k: v for s in levels_stats for k, v in s.acknowledged.items()}
            missing = sum(1 for k, v in acknowledged.items() if stored.get(k) != v)
            print(f"  {system}: {len(acknowledged)} acknowledged, {missing} not stored as acknowledged")
            if missing:
                problems.append(f"{system}: {missing} acknowledged votes not stored")

    groups = [
        ("uniform", [s for s in systems if s.startswith("arbiter") and not s.endswith("-adaptive")]),
        ("adaptive", [s for s in systems if s.startswith("arbiter") and s.endswith("-adaptive")]),
    ]
    # Rounds alternate the order of the studies (uniform first, then adaptive first, ...), so
    # neither is always measured on a machine the other has just warmed or loaded.
    rounds = [groups if r % 2 == 0 else groups[::-1] for r in range(args.rounds)]
    arbiter_rows: list[dict[str, object]] = []
    for allocation, arbiter_systems in (group for order in rounds for group in order):
        if not arbiter_systems:
            continue
        slots = arbiter_slots(args.seconds, levels, len(arbiter_systems))
        with br.arbiter_server(database_url=args.database_url, raters_per_block=slots, workers=args.workers,
                               threads=args.threads, port=args.port + 1, allocation=allocation) as (base, link, process):
            all_stats = []
            for system in arbiter_systems:
                for n in levels:
                    level = br.measure_level(base, br.arbiter_flow(link, system.split("-")[1]), n,  # api or html
                                             seconds=args.seconds, think=args.think, ramp=args.ramp,
                                             label=f"{system}-n{n}", server_pid=process.pid,
                                             database_url=args.database_url)
                    arbiter_rows.append(summary(system, level))
                    all_stats.append(level.stats)
                    print(f"  {system} N={n}: {level.requests} requests, errors {dict(level.stats.errors) or 0}"
                          + (f", study full for {level.stats.full}" if level.stats.full else ""))
            time.sleep(0.5)
            check = br.verify_votes(all_stats)
            print(f"  arbiter: votes {check}")
            if check["lost"] or check["duplicated"] or check["unacknowledged"]:
                problems.append(f"arbiter: {check}")

    if args.rounds > 1:
        print_rounds(arbiter_rows)
    print_table(rows + rounds_mean(arbiter_rows))
    if problems:
        raise SystemExit("integrity check failed: " + "; ".join(problems))
    print("\nevery acknowledged vote is stored, on every system")


if __name__ == "__main__":
    main()
