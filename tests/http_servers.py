"""Helpers for tests that start a real server process (gunicorn) on loopback."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(url: str, process: subprocess.Popen[bytes], *, seconds: float = 90) -> None:
    """Poll ``url`` until it answers; fail the test if the process exits or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            httpx.get(url, timeout=5)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("gunicorn did not start")
            time.sleep(0.1)
