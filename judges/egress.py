"""Where a judge call may connect (SECURITY.md rows 7 and 20).

A judge base URL must not reach link-local or cloud-metadata addresses (unless its host is in
``ARBITER_JUDGE_HOST_ALLOWLIST``). This module decides that for an address:

- :func:`blocked_address` also looks inside every IPv6 form that carries an IPv4 address —
  IPv4-mapped ``::ffff:a.b.c.d``, IPv4-translated ``::ffff:0:a.b.c.d``, IPv4-compatible
  ``::a.b.c.d``, NAT64 ``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48``, 6to4 ``2002::/16``
  and Teredo ``2001::/32`` — so ``64:ff9b::a9fe:a9fe`` is 169.254.169.254 and refused.
- :func:`checked_addresses` resolves a host once and refuses it unless every address passes.

The connections themselves are made in :mod:`judges.pinned` (httpx is imported only by the code
that sends, not by every process that loads the judges app).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

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
