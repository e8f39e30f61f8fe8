"""A real S3-compatible server for tests: moto's server mode (``moto[server]``) on loopback.

It runs in its own process on a free port; boto3 (through django-storages) talks to it over HTTP,
exactly as to a bucket elsewhere. ``pause()`` (SIGSTOP) makes it unreachable while keeping its
objects, as a network partition would; ``resume()`` (SIGCONT) brings it back.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "arbiter-test", "aws_secret_access_key": "arbiter-test-secret"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class S3Server:
    process: subprocess.Popen[bytes]
    endpoint: str

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            config=Config(connect_timeout=2, read_timeout=5, retries={"total_max_attempts": 1}), **CREDENTIALS,
        )

    def new_bucket(self) -> str:
        name = f"arbiter-test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.resume()
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_s3_server(timeout: float = 90.0) -> S3Server:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    server = S3Server(process=process, endpoint=f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto's S3 server exited with {process.returncode}")
        try:
            httpx.get(server.endpoint + "/moto-api/", timeout=1.0)
            return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"moto's S3 server did not answer on {server.endpoint} within {timeout:.0f} s")
