"""Where a judge call may connect (SECURITY.md rows 7 and 20).

A judge base URL must not reach link-local or cloud-metadata addresses (unless its host is in
``ARBITER_JUDGE_HOST_ALLOWLIST``). This module decides that for an address and makes the call
connect to exactly the address it checked:

- :func:`blocked_address` also looks inside every IPv6 form that carries an IPv4 address —
  IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated ``::ffff:0:a.b.c.d``, IPv4-compatible
  ``::a.b.c.d``, NAT64 ``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``, 6to4 ``2002::/16``
  and Teredo ``2001::/32`` — so ``64:ff9b::a9fe:a9fe`` is 169.254.169.254 and refused.
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

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx
from django.conf import settings

from annotation.errors import ValidationFailed

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

BLOCKED_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),  # IPv4 link-local, incl. 169.254.169.254 metadata
    ipaddress.ip_network("fe80::/10"),  # IPv6 link-local
    ipaddress.ip_network("100.100.100.200/32"),  # Alibaba Cloud metadata
    ipaddress.ip_network("fd00:ec2::254/128"),  # AWS IPv6 metadata
)
BLOCKED_HOSTNAMES = ("metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal")
RESOLVE_TTL = 60.0

_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT IPv4-translated
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 address carries in a mapped or translated form."""
    found: list[ipaddress.IPv4Address] = []
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip in _TRANSLATED or any(ip in net for net in _NAT64):
        found.append(low32)
    if ip in _COMPATIBLE and int(ip) > 1:  # not :: or ::1
        found.append(low32)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def parse_address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0].strip("[]"))
    except ValueError:
        return None


def blocked_address(address: str | IPAddress) -> bool:
    """Whether an address (text or parsed) is link-local / metadata, in any IPv6 form of it."""
    ip = parse_address(address) if isinstance(address, str) else address
    if ip is None:
        return False
    candidates: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        candidates.extend(embedded_ipv4(ip))
    return any(c.version == net.version and c in net for c in candidates for net in BLOCKED_NETWORKS)


def allowlisted(host: str) -> bool:
    allow = {h.lower().rstrip(".") for h in getattr(settings, "ARBITER_JUDGE_HOST_ALLOWLIST", [])}
    return host.lower().rstrip(".") in allow


def refused(host: str) -> ValidationFailed:
    return ValidationFailed(
        f"the base URL host {host} is a link-local or cloud-metadata address; add it to "
        "ARBITER_JUDGE_HOST_ALLOWLIST if it really is a model endpoint",
        field="base_url",
    )


_resolved: dict[tuple[str, int], tuple[float, list[str]]] = {}
_resolved_lock = threading.Lock()


class ResolveFailed(OSError):
    """The host name did not resolve."""


def resolve(host: str, port: int) -> list[str]:
    """The host's addresses in the resolver's order (cached for ``RESOLVE_TTL`` seconds)."""
    now = time.monotonic()
    with _resolved_lock:
        hit = _resolved.get((host, port))
        if hit and now - hit[0] < RESOLVE_TTL:
            return hit[1]
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ResolveFailed(f"cannot resolve {host}: {exc.strerror or exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    with _resolved_lock:
        _resolved[(host, port)] = (now, addresses)
    return addresses


def checked_addresses(host: str, port: int) -> list[str]:
    """The addresses to connect to for ``host``; refused when any of them is blocked."""
    literal = parse_address(host)
    addresses = [str(literal)] if literal is not None else resolve(host, port)
    if not addresses or any(blocked_address(a) for a in addresses):
        raise refused(host)
    return addresses


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
    the judge host itself (docs/decisions.md, "Judge egress through a proxy").
    """
    transport = httpx.HTTPTransport(limits=limits, trust_env=False, verify=verify, proxy=proxy)
    # httpx has no parameter for httpcore's network backend; its pool reads this attribute for
    # every new connection (tests/judges/test_egress.py proves it is the one used).
    transport._pool._network_backend = PinnedBackend()
    return transport
