"""config/gunicorn_worker.py on a real gunicorn: keep-alive connections spread evenly over the
processes, whichever process happens to wake first, and every connection is served."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))

# A WSGI application answering with its process id, so the test sees which process holds a connection.
APP = '''
import os

def application(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve(tmp_path: Path):  # type: ignore[no-untyped-def]
    (tmp_path / "pid_app.py").write_text(APP)
    (tmp_path / "gunicorn.conf.py").write_text("")  # not the project's: no Django here
    started: list[subprocess.Popen[bytes]] = []

    def start(worker_class: str, workers: int) -> int:
        port = _free_port()
        process = subprocess.Popen(
            [GUNICORN, "-c", str(tmp_path / "gunicorn.conf.py"), "--pythonpath", f"{tmp_path},{ROOT}",
             "-k", worker_class, "-w", str(workers), "--threads", "2", "--keep-alive", "30",
             "-b", f"127.0.0.1:{port}", "--log-level", "warning", "pid_app:application"],
            cwd=tmp_path)
        started.append(process)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return port
            except OSError:
                time.sleep(0.1)
        raise AssertionError("gunicorn did not start")

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


def _open(port: int, n: int) -> tuple[list[http.client.HTTPConnection], list[str]]:
    connections, pids = [], []
    for _ in range(n):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", "/")
        response = connection.getresponse()
        assert response.status == 200
        pids.append(response.read().decode())
        connections.append(connection)  # kept open: the process that answered keeps it
    return connections, pids


def test_keep_alive_connections_are_spread_evenly_over_the_processes(serve) -> None:  # type: ignore[no-untyped-def]
    port = serve("config.gunicorn_worker.BalancedThreadWorker", 3)
    time.sleep(1.0)  # every process up and listening
    connections, pids = _open(port, 30)
    held = Counter(pids)
    assert len(held) == 3, held
    assert max(held.values()) - min(held.values()) <= 2, held
    # Each connection stays with its process: a second request on it is answered by the same one.
    for connection, pid in zip(connections, pids, strict=True):
        connection.request("GET", "/")
        assert connection.getresponse().read().decode() == pid
    # Closing one process's connections sends the next ones there, back to an even spread.
    fullest = held.most_common(1)[0][0]
    for connection, pid in zip(connections, pids, strict=True):
        if pid == fullest:
            connection.close()
    time.sleep(1.5)  # the process sees the connections closed within a turn of its loop
    _more, more_pids = _open(port, 9)
    total = Counter(p for p in pids if p != fullest) + Counter(more_pids)
    assert max(total.values()) - min(total.values()) <= 2, total
    assert more_pids.count(fullest) >= 6, more_pids


def test_a_worker_killed_without_freeing_its_slot_does_not_stop_the_others_listening(serve) -> None:  # type: ignore[no-untyped-def]
    # This configuration has no child_exit hook: the killed worker's slot (holding few
    # connections) stays in the table until a live worker finds its process gone.
    port = serve("config.gunicorn_worker.BalancedThreadWorker", 2)
    time.sleep(1.0)
    connections, pids = _open(port, 4)
    victim = int(Counter(pids).most_common()[-1][0])
    for connection, pid in zip(connections, pids, strict=True):
        if int(pid) == victim:
            connection.close()
    os.kill(victim, signal.SIGKILL)
    _more, more_pids = _open(port, 8)  # served, by the survivor and the master's replacement
    assert str(victim) not in more_pids and len(more_pids) == 8


def test_a_stopped_worker_does_not_keep_the_others_from_taking_new_connections(serve) -> None:  # type: ignore[no-untyped-def]
    """SIGSTOP one of three workers while it holds the fewest connections (none): the others hold
    more than its count plus one, yet keep taking new ones, each served within a second, because
    its heartbeat goes stale. Without the heartbeat nobody listened until gunicorn's timeout."""
    from config.gunicorn_worker import STALE_SECONDS, TURN_SECONDS

    port = serve("config.gunicorn_worker.BalancedThreadWorker", 3)
    time.sleep(1.0)
    connections, pids = _open(port, 9)  # keep-alive load: three each
    victim = int(Counter(pids).most_common()[-1][0])
    for connection, pid in zip(connections, pids, strict=True):
        if int(pid) == victim:
            connection.close()
    time.sleep(1.0)  # the victim publishes that it holds none
    os.kill(victim, signal.SIGSTOP)
    try:
        time.sleep(STALE_SECONDS + 2 * TURN_SECONDS)  # its heartbeat goes stale
        served, waits = [], []
        for _ in range(8):
            start = time.monotonic()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
            connection.request("GET", "/")
            response = connection.getresponse()
            waits.append(time.monotonic() - start)
            assert response.status == 200
            served.append(int(response.read().decode()))
            connections.append(connection)  # kept open: the load grows
        assert victim not in served and len(served) == 8
        assert max(waits) < 1.0, waits
        # The kept-alive connections of the live workers are still served meanwhile.
        for connection, pid in zip(connections[:9], pids, strict=True):
            if int(pid) != victim:
                connection.request("GET", "/")
                assert connection.getresponse().read().decode() == pid
    finally:
        os.kill(victim, signal.SIGCONT)
    # Resumed, it beats again and takes connections once more (it holds the fewest).
    time.sleep(1.0)
    _more, more_pids = _open(port, 6)
    assert str(victim) in more_pids, more_pids
