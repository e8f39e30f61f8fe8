"""The login throttle across real web processes and nodes (SECURITY.md row 24; issue 32 item 2).

Real gunicorns (the project's ``gunicorn.conf.py``, ``WEB_CONCURRENCY=3``, the settings ``make run``
uses) on one SQLite database file, flooded with 40 simultaneous wrong passwords over HTTP. Counters
kept per process (``LocMemCache``) allowed one limit per process: 15 password checks with three
processes. Here they live in the database (the default without a shared cache) or in Redis
(``CACHE_URL``), and every flood gets at most ``ARBITER_LOGIN_MAX_FAILURES`` (5) password checks,
counted by Django's ``user_login_failed`` signal in the server processes (appended to a file), the
way tests/security/test_login_throttle.py counts them in-process.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.http_servers import wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-arbiter-123"

# The project's WSGI application, plus a receiver writing each failed password check to a file.
APP = """
import json, os
from config.wsgi import application
from django.contrib.auth.signals import user_login_failed

def _failed(sender, credentials, **kwargs):
    with open(os.environ["ARBITER_TEST_CHECKS"], "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "username": credentials.get("username")}) + "\\n")

user_login_failed.connect(_failed, weak=False, dispatch_uid="checks-file")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Site:
    """A migrated SQLite database file with accounts to flood, and the environment its web servers run with."""

    ACCOUNTS = 5  # a fresh account per flood: three in the first test, one in each two-node test

    def __init__(self, home: Path) -> None:
        self.home = home
        (home / "checks_app.py").write_text(APP)
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DJANGO_DEBUG": "0",
            "DATABASE_URL": f"sqlite:///{home / 'site.sqlite3'}",
            "MEDIA_ROOT": str(home / "media"),
            "ARBITER_TEST_CHECKS": str(home / "checks.jsonl"),
            "PYTHONPATH": f"{home}{os.pathsep}{ROOT}",
        }
        for name in ("CACHE_URL", "CELERY_BROKER_URL", "ARBITER_LOGIN_COUNTERS"):
            self.env.pop(name, None)  # the default deployment: no shared cache, no broker
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=self.env, check=True
        )
        # Every flood's account made at once (one Django start-up instead of one per flood).
        self.fresh_accounts = [f"rita-{secrets.token_hex(4)}" for _ in range(self.ACCOUNTS)]
        code = (
            "from django.contrib.auth import get_user_model;"
            f"[get_user_model().objects.create_user(u, password={PASSWORD!r}) for u in {self.fresh_accounts!r}]"
        )
        subprocess.run(
            [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
            cwd=ROOT, env=self.env, check=True,
        )  # fmt: skip


class Nodes:
    """Web nodes (a gunicorn each, three processes) on the site, started when first asked for and
    kept for the module: the two-node test floods the node the one-node test flooded, and one more."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.started: dict[tuple[tuple[str, str], ...], list[tuple[str, subprocess.Popen[bytes]]]] = {}

    def __call__(self, nodes: int = 1, **extra: str) -> list[str]:
        running = self.started.setdefault(tuple(sorted(extra.items())), [])
        new = []
        while len(running) < nodes:
            port = _free_port()
            process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
                 "-b", f"127.0.0.1:{port}", "--log-level", "warning", "checks_app:application"],
                cwd=self.site.home, env={**self.site.env, "WEB_CONCURRENCY": "3", **extra}, start_new_session=True,
            )  # fmt: skip
            running.append((f"http://127.0.0.1:{port}", process))
            new.append(running[-1])
        for url, process in new:
            wait_until_serving(f"{url}/accounts/login/", process)
        _workers_up([process for _, process in new], 3)  # every process of every node forked
        return [url for url, _ in running[:nodes]]

    def stop(self) -> None:
        processes = [process for running in self.started.values() for _, process in running]
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return Site(tmp_path_factory.mktemp("throttle-site"))


@pytest.fixture(scope="module")
def serve(site: Site) -> Iterator[Callable[..., list[str]]]:
    """``serve(nodes, **env)``: the URLs of that many web nodes with that extra environment; stopped after the module."""
    nodes = Nodes(site)
    yield nodes
    nodes.stop()


def _workers_up(masters: list[subprocess.Popen[bytes]], each: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = subprocess.run(["ps", "-o", "ppid=", "-A"], capture_output=True, text=True).stdout.split()
        if all(out.count(str(master.pid)) >= each for master in masters):
            return
        time.sleep(0.2)
    pytest.fail("gunicorn workers did not start")


def _account(site: Site) -> str:
    """A fresh account in the site's database (fresh counters, in Redis too)."""
    return site.fresh_accounts.pop()


def _checks(site: Site, username: str) -> list[int]:
    path = site.home / "checks.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row["pid"] for row in rows if row["username"] == username]


def _flood(urls: list[str], username: str, kinds: list[str], n: int = 40) -> list[int]:
    """``n`` wrong passwords at once, spread over ``urls`` and the endpoints in ``kinds``."""
    clients = {url: httpx.Client(base_url=url, timeout=60) for url in urls}
    tokens = {}
    if "login" in kinds:
        for url, client in clients.items():
            page = client.get("/accounts/login/").text
            tokens[url] = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    barrier = threading.Barrier(n)
    statuses = [0] * n

    def attempt(i: int) -> None:
        url, kind = urls[i % len(urls)], kinds[(i // len(urls)) % len(kinds)]
        client = clients[url]
        data = {"username": username, "password": f"wrong-{i}"}
        barrier.wait()
        if kind == "token":
            statuses[i] = client.post("/api/auth/token/", json=data).status_code
        else:
            data["csrfmiddlewaretoken"] = tokens[url]
            statuses[i] = client.post("/accounts/login/", data=data, headers={"Referer": url}).status_code

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients.values():
        client.close()
    return statuses


def _right_password_refused(urls: list[str], username: str) -> None:
    for url in urls:
        answer = httpx.post(
            f"{url}/api/auth/token/", json={"username": username, "password": PASSWORD}, timeout=30
        )
        assert answer.status_code == 429, answer.text


def _database_counters(site: Site) -> int:
    with sqlite3.connect(site.home / "site.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM annotation_logincounter").fetchone()[0])


def _flood_and_check(site: Site, urls: list[str], kinds: list[str]) -> None:
    username = _account(site)
    statuses = _flood(urls, username, kinds)
    checks = _checks(site, username)
    assert 1 <= len(checks) <= 5, (kinds, len(checks), statuses)
    assert statuses.count(429) >= 35, (kinds, statuses)
    _right_password_refused(urls, username)


@pytest.mark.same_on_any_database  # the site is a SQLite file of its own
def test_forty_parallel_wrong_passwords_on_three_processes_get_at_most_five_checks(
    site: Site, serve: Callable[..., list[str]]
) -> None:
    """The token API, the login page, and both at once (one limit for the two): a fresh account each."""
    urls = serve()
    for kinds in (["token"], ["login"], ["token", "login"]):
        before = _database_counters(site)
        _flood_and_check(site, urls, kinds)
        assert _database_counters(site) == before + 2  # this account's pair and account counters


@pytest.mark.same_on_any_database
def test_two_web_nodes_on_one_database_share_the_limit(site: Site, serve: Callable[..., list[str]]) -> None:
    _flood_and_check(site, serve(nodes=2), ["token", "login"])


@pytest.mark.broker
def test_two_web_nodes_on_redis_share_the_limit(site: Site, serve: Callable[..., list[str]]) -> None:
    """``CACHE_URL`` set: the counters are in Redis (the broker's Redis of the CI's service pass)."""
    broker = str(settings.CELERY_BROKER_URL)
    assert broker.startswith("redis://"), "this test needs a Redis broker URL"
    urls = serve(nodes=2, CACHE_URL=broker)
    before = _database_counters(site)
    _flood_and_check(site, urls, ["token", "login"])
    assert _database_counters(site) == before  # counted in Redis, not in the table
