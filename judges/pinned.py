"""Judge connections pinned to the addresses :mod:`judges.egress` checked (SECURITY.md rows 7 and 20).

- :func:`pinned_transport` is an httpx transport whose every new connection resolves the host
  once (every address must pass), connects to one of exactly those addresses, and verifies the
  peer the socket actually reached before a byte is sent. URLs, ``Host`` headers, TLS SNI and
  certificate checks keep the host name. A DNS answer that changes between the check and the
  connection (rebinding) changes nothing: there is no second lookup.
- :func:`deadline` sets one absolute deadline for the exchanges of this thread: every connect,
  write and read of a pinned connection (TLS handshake included) waits at most the time left
  until it, and none starts once it has passed. httpx's own timeouts are per operation, so a
  server that drips its status line a byte at a time would otherwise never be cut off.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from annotation.errors import ValidationFailed
from judges.egress import (
    BLOCKED_HOSTNAMES,
    allowlisted,
    blocked_address,
    checked_addresses,
    parse_address,
    refused,
)

_deadline = threading.local()


@contextmanager
def deadline(at: float) -> Iterator[None]:
    """Within this block, this thread's pinned connections end every wait by ``at`` (monotonic)."""
    before = getattr(_deadline, "at", None)
    _deadline.at = at
    try:
        yield
    finally:
        _deadline.at = before


def time_left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to the time left before this thread's deadline; ``error`` once it has passed."""
    at: float | None = getattr(_deadline, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the exchange's deadline has passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read, write and TLS handshake ends by the thread's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._stream.write(buffer, time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                     time_left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, connecting only to checked addresses and verifying the peer."""

    def __init__(self) -> None:
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        name = host.lower().rstrip(".")
        if allowlisted(name):
            return DeadlineStream(self._sockets.connect_tcp(host, port, time_left(timeout, httpcore.ConnectTimeout),
                                                            local_address, socket_options))
        if name in BLOCKED_HOSTNAMES:
            raise refused(name)
        addresses = checked_addresses(name, port)
        for index, address in enumerate(addresses):
            try:
                # The lookup above may have used up the deadline: checked again per address.
                stream = DeadlineStream(self._sockets.connect_tcp(
                    address, port, time_left(timeout, httpcore.ConnectTimeout), local_address, socket_options))
            except httpcore.ConnectError:
                if index == len(addresses) - 1:
                    raise
                continue
            check_peer(stream, address, name)
            return stream
        raise refused(name)  # checked_addresses never returns an empty list

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("judge endpoints are reached over TCP only")

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)


def peer_address(stream: httpcore.NetworkStream) -> str | None:
    """The address a connected stream reached."""
    peer = stream.get_extra_info("server_addr")
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return None


def check_peer(stream: httpcore.NetworkStream, expected: str, host: str) -> None:
    """Refuse (and close) a connection whose peer is blocked or is not the address checked."""
    peer = peer_address(stream)
    if peer is not None and blocked_address(peer):
        stream.close()
        raise refused(host)
    if peer is None or parse_address(peer) != parse_address(expected):
        stream.close()
        raise ValidationFailed(
            f"the connection to {host} reached {peer or 'an unknown peer'}, not the checked address {expected}",
            field="base_url",
        )


def pinned_transport(*, limits: httpx.Limits, verify: ssl.SSLContext | bool = True,
                     proxy: str | None = None) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` (no proxies from the environment) whose connections are made by
    :class:`PinnedBackend`.

    With ``proxy`` (the deployment's ``ARBITER_JUDGE_PROXY``) the connections it makes are to the
    proxy, so it is the proxy's address that is checked and pinned; the proxy resolves and reaches
    the judge host itself (docs/decisions/0037-judge-egress-through-a-proxy.md).
    """
    transport = httpx.HTTPTransport(limits=limits, trust_env=False, verify=verify, proxy=proxy)
    # httpx has no parameter for httpcore's network backend; its pool reads this attribute for
    # every new connection (tests/judges/test_egress.py proves it is the one used).
    transport._pool._network_backend = PinnedBackend()
    return transport
