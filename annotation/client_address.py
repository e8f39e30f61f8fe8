"""The client's address behind a configured reverse proxy (SECURITY.md row 18).

``REMOTE_ADDR`` is the proxy's address when Arbiter runs behind one (README "Running at scale"),
so every client would share one login-throttle counter. Only a proxy the deployment names is
believed about ``X-Forwarded-For``:

- ``ARBITER_TRUSTED_PROXIES`` (addresses or networks): when ``REMOTE_ADDR`` is one of them, the
  ``X-Forwarded-For`` entries are read from the right, skipping trusted proxies; the first other
  entry is the client (what the outermost trusted proxy saw). Entries further left are the
  client's own claims and are never used.
- ``ARBITER_PROXY_HOPS`` = N (when no trusted proxies are named): the N-th entry from the right
  is the client; with fewer entries, ``REMOTE_ADDR``.
- neither: ``REMOTE_ADDR``; ``X-Forwarded-For`` is ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries if entry.strip())


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None, networks: Iterable[Network]) -> bool:
    return address is not None and any(address.version == n.version and address in n for n in networks)


def client_address_from(meta: Mapping[str, Any], *, trusted_proxies: Iterable[str] = (), proxy_hops: int = 0) -> str:
    """The client's address for a request's ``META`` under the given proxy settings."""
    remote = str(meta.get("REMOTE_ADDR", "") or "")
    forwarded = [entry.strip() for entry in str(meta.get("HTTP_X_FORWARDED_FOR", "") or "").split(",") if entry.strip()]
    networks = _networks(tuple(trusted_proxies))
    if networks:
        if not _trusted(_address(remote), networks):
            return remote
        for entry in reversed(forwarded):
            address = _address(entry)
            if not _trusted(address, networks):
                # An entry that is no address is kept as text: still one client's own key.
                return str(address) if address is not None else entry[:100]
        return str(_address(forwarded[0])) if forwarded and _address(forwarded[0]) else remote
    if proxy_hops > 0 and len(forwarded) >= proxy_hops:
        entry = forwarded[-proxy_hops]
        address = _address(entry)
        return str(address) if address is not None else entry[:100]
    return remote


def client_address(request: Any) -> str:
    """The client's address of a Django request (see the module docstring for the settings)."""
    return client_address_from(
        request.META,
        trusted_proxies=tuple(getattr(settings, "ARBITER_TRUSTED_PROXIES", ()) or ()),
        proxy_hops=int(getattr(settings, "ARBITER_PROXY_HOPS", 0) or 0),
    )
