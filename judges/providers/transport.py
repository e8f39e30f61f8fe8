"""The one HTTP exchange of a judge call: one deadline, a reply size cap, the deployment's egress.

- One deadline for the whole exchange (wait for a pooled connection, connect, TLS, send, the
  status line and headers, every byte of the body): every socket wait of the exchange is cut to
  the time left (:func:`judges.pinned.deadline`), so a server that drips its status line, its
  headers or its body a byte at a time is cut off when ``timeout`` has passed, not per read.
  The lease of a call outlasts this deadline (``judges.services.calls.attempt_seconds``), so
  an attempt is over, its socket closed, before any other worker may take the call.
- The reply is read as a stream and abandoned past ``ARBITER_JUDGE_MAX_REPLY_BYTES`` (decoded
  bytes, so a compressed bomb is caught too): :class:`UnusableReply`.
- Redirects are never followed. The environment is ignored (``trust_env=False``) unless the
  deployment sets ``ARBITER_JUDGE_PROXY`` (an HTTPS proxy) and/or ``ARBITER_JUDGE_CA_BUNDLE`` (a CA
  file for TLS-inspecting gateways); both are off by default, and the base-URL allow-list check
  (:func:`judges.providers.base.check_base_url`) runs before every request either way.
- Every connection goes through :func:`judges.pinned.pinned_transport`: the host is resolved once,
  every address must pass the egress check, the socket connects to one of exactly those and the
  peer it reached is verified (a refusal is :class:`ProviderRefused`). Through a proxy, that is
  the proxy's address; the proxy resolves the judge host
  (docs/decisions/0037-judge-egress-through-a-proxy.md).
"""

from __future__ import annotations

import os
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings

from annotation.errors import ValidationFailed
from judges import egress as judges_egress
from judges import pinned
from judges.providers.base import ProviderRefused, TransportFailure, UnusableReply

ERROR_BODY_BYTES = 64 * 1024


def max_reply_bytes() -> int:
    return int(getattr(settings, "ARBITER_JUDGE_MAX_REPLY_BYTES", 8 * 1024 * 1024))


@dataclass(frozen=True)
class Exchange:
    status: int
    headers: httpx.Headers
    body: bytes
    latency_ms: int


# Per thread: one pool shared by 16 threads serializes them on its lock, and every request there
# polls each idle connection of the pool for expiry while holding it (benchmarks/bench_judges.py).
_local = threading.local()


def egress() -> tuple[str, str]:
    """The deployment's (proxy URL, CA bundle path); empty strings when unset."""
    return (str(getattr(settings, "ARBITER_JUDGE_PROXY", "") or ""), str(getattr(settings, "ARBITER_JUDGE_CA_BUNDLE", "") or ""))


def _verify(ca_bundle: str) -> ssl.SSLContext | bool:
    if not ca_bundle:
        return True
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise ProviderRefused(f"the CA bundle ARBITER_JUDGE_CA_BUNDLE={ca_bundle} cannot be used ({exc})") from None
    return context


def _thread_clients() -> dict[tuple[Any, ...], httpx.Client]:
    clients: dict[tuple[Any, ...], httpx.Client] | None = getattr(_local, "clients", None)
    if clients is None:
        clients = _local.clients = {}
    return clients


def close_thread_clients() -> None:
    """Close this thread's clients (a worker thread that is about to end calls it)."""
    for found in _thread_clients().values():
        found.close()
    _local.clients = {}


def client(concurrency: int, timeout: float) -> httpx.Client:
    """One pooled client per thread, limits and egress (created after fork: keyed by pid).

    Its connections are kept alive between the calls of the thread; a thread that ends without
    :func:`close_thread_clients` leaves them to the garbage collector.
    """
    proxy, ca_bundle = egress()
    key = (os.getpid(), concurrency, timeout, proxy, ca_bundle)
    clients = _thread_clients()
    found = clients.get(key)
    if found is None:
        found = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            # Connects only to the address it checked and verifies the peer (judges.egress,
            # SECURITY.md row 20); the proxy and the CA bundle are the transport's.
            transport=pinned.pinned_transport(
                limits=httpx.Limits(max_connections=max(concurrency, 1) * 2,
                                    max_keepalive_connections=max(concurrency, 1)),
                verify=_verify(ca_bundle),
                proxy=proxy or None,
            ),
            follow_redirects=False,
            trust_env=False,
        )
        clients[key] = found
    return found


def exchange(url: str, *, body: bytes | None, headers: dict[str, str], timeout: float, concurrency: int,
             method: str = "POST", cap: int | None = None) -> Exchange:
    """Send ``body``; the status, headers and (capped) body, within one deadline of ``timeout`` s."""
    began = time.monotonic()
    deadline = began + timeout
    cap = cap or max_reply_bytes()
    headers_in = False
    try:
        with pinned.deadline(deadline), \
                client(concurrency, timeout).stream(method, url, content=body, headers=headers) as response:
            headers_in = True
            limit = cap if response.status_code < 300 else ERROR_BODY_BYTES
            declared = response.headers.get("content-length", "")
            if response.status_code < 300 and declared.isdigit() and int(declared) > cap:
                raise UnusableReply(f"the reply is {int(declared):,} bytes, over the {cap:,}-byte cap")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                if time.monotonic() > deadline:
                    raise TransportFailure(f"the reply was still arriving after the {timeout:g} s deadline")
                size += len(chunk)
                if size > limit:
                    if response.status_code < 300:
                        raise UnusableReply(f"the reply is over the {cap:,}-byte cap")
                    chunks.append(chunk[: max(0, limit - (size - len(chunk)))])
                    break
                chunks.append(chunk)
            if time.monotonic() > deadline:
                raise TransportFailure(f"the reply was still arriving after the {timeout:g} s deadline")
            return Exchange(response.status_code, response.headers, b"".join(chunks),
                            int((time.monotonic() - began) * 1000))
    except ValidationFailed as exc:  # the egress check refused the address it was about to connect to
        raise ProviderRefused(str(exc)) from None
    except judges_egress.ResolveFailed as exc:
        raise TransportFailure(str(exc)) from None
    except httpx.TimeoutException as exc:
        if headers_in:
            raise TransportFailure(f"the reply was still arriving after the {timeout:g} s deadline") from None
        # Connect, send, or the status line and headers: all under the same deadline.
        raise TransportFailure(f"no reply within the {timeout:g} s deadline ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise TransportFailure(f"connection failed ({type(exc).__name__})") from None
