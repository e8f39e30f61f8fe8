"""Provider clients (SPEC §6): OpenAI-compatible chat completions and Anthropic messages, on httpx.

- Explicit timeouts on every request; redirects are never followed.
- The API key is read from the judge's named environment variable at call time; it is never
  stored, logged or put into an error message.
- Endpoints are admin-configured only, and a base URL that points at link-local or cloud-metadata
  addresses is refused (:func:`check_base_url`) unless its host is in
  ``settings.ARBITER_JUDGE_HOST_ALLOWLIST``. Loopback is allowed (tests and local gateways).

Failures are split the way SPEC §6 counts them: :class:`TransportFailure` (timeouts, connection
errors, 408/413/429/5xx, a malformed envelope — retried with backoff) versus
:class:`ProviderRefused` (other 4xx such as a wrong key or model — not retried). A reply that
arrives but is not a valid answer is the caller's business (``judges.validation``).
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from annotation.errors import ValidationFailed
from judges import egress

ANTHROPIC_VERSION = "2023-06-01"
# Re-exported: the address rules live in judges.egress (SECURITY.md rows 7 and 20).
BLOCKED_NETWORKS = egress.BLOCKED_NETWORKS
BLOCKED_HOSTNAMES = egress.BLOCKED_HOSTNAMES


class TransportFailure(Exception):
    """No usable reply: retry with backoff. ``retry_after`` in seconds when the server said so."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ProviderRefused(Exception):
    """The provider refused the request for good (auth, unknown model, bad request): no retry."""


@dataclass(frozen=True)
class JudgeImage:
    label: str  # REFERENCE | CANDIDATE A | CANDIDATE B
    mime: str
    data: bytes

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True)
class JudgeRequest:
    """What a judge is asked (SPEC §6): the prompt and three labelled images, in order."""

    prompt: str
    images: tuple[JudgeImage, ...]


def check_base_url(url: str, *, resolve: bool = False) -> str:
    """Refuse a judge base URL aimed at link-local / metadata addresses; return it normalized.

    ``resolve=True`` also checks every address the host name resolves to. A call connects only
    to addresses checked at that moment (``judges.egress.post``).
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed("the base URL must be an http:// or https:// URL with a host", field="base_url")
    if parts.username or parts.password:
        raise ValidationFailed("the base URL must not carry credentials; use --api-key-env", field="base_url")
    host = parts.hostname.lower().rstrip(".")
    if egress.allowlisted(host):
        return url.strip().rstrip("/")
    if host in BLOCKED_HOSTNAMES or egress.blocked_address(host):
        raise egress.refused(host)
    if resolve and egress.parse_address(host) is None:
        try:
            egress.checked_addresses(host, parts.port or (443 if parts.scheme == "https" else 80))
        except egress.ResolveFailed as exc:
            raise TransportFailure(str(exc)) from None
    return url.strip().rstrip("/")


def api_key(env_name: str) -> str:
    """The judge's API key, from its environment variable, at call time. Never stored."""
    if not env_name:
        return ""
    value = os.environ.get(env_name, "")
    if not value:
        raise ProviderRefused(f"the environment variable {env_name} (the judge's API key) is not set")
    return value


# -- request bodies ------------------------------------------------------------------------------


def openai_body(request: JudgeRequest, *, model: str, max_tokens: int, temperature: float | None) -> dict[str, Any]:
    """Chat-completions body: one user message, prompt first, then each label and its data URL."""
    content: list[dict[str, Any]] = [{"type": "text", "text": request.prompt}]
    for image in request.images:
        content.append({"type": "text", "text": image.label})
        content.append(
            {"type": "image_url", "image_url": {"url": f"data:{image.mime};base64,{image.base64()}", "detail": "high"}}
        )
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def anthropic_body(request: JudgeRequest, *, model: str, max_tokens: int, temperature: float | None) -> dict[str, Any]:
    """Messages body: one user turn, each label then its base64 image, the prompt last."""
    content: list[dict[str, Any]] = []
    for image in request.images:
        content.append({"type": "text", "text": image.label})
        content.append({"type": "image", "source": {"type": "base64", "media_type": image.mime, "data": image.base64()}})
    content.append({"type": "text", "text": request.prompt})
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}]}
    if temperature is not None:
        body["temperature"] = temperature
    return body


def request_overhead_bytes(provider: str, request: JudgeRequest, *, model: str) -> int:
    """Body bytes other than the base64 image data (for the request-size budget)."""
    empty = JudgeRequest(request.prompt, tuple(JudgeImage(i.label, i.mime, b"") for i in request.images))
    builder = anthropic_body if provider == "anthropic" else openai_body
    return len(json.dumps(builder(empty, model=model, max_tokens=1, temperature=None)).encode()) + 64


# -- sending -------------------------------------------------------------------------------------


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_clients: dict[tuple[int, int, float], httpx.Client] = {}
_clients_lock = threading.Lock()


def _client(concurrency: int, timeout: float) -> httpx.Client:
    """One pooled client per process and limits (created after fork: keyed by pid)."""
    key = (os.getpid(), concurrency, timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = httpx.Client(
                timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
                transport=egress.pinned_transport(
                    limits=httpx.Limits(max_connections=max(concurrency, 1) * 2, max_keepalive_connections=max(concurrency, 1))
                ),
                follow_redirects=False,
                trust_env=False,
            )
            _clients[key] = client
        return client


@dataclass(frozen=True)
class Endpoint:
    provider: str
    base_url: str
    model: str
    api_key_env: str
    timeout: float
    concurrency: int
    max_tokens: int
    temperature: float | None


def encode_body(endpoint: Endpoint, request: JudgeRequest) -> bytes:
    builder = anthropic_body if endpoint.provider == "anthropic" else openai_body
    body = builder(request, model=endpoint.model, max_tokens=endpoint.max_tokens, temperature=endpoint.temperature)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def send(endpoint: Endpoint, body: bytes) -> str:
    """POST one judge request; the reply text. Raises TransportFailure or ProviderRefused."""
    if endpoint.provider == "demo":  # the built-in demo judge answers locally (judges.demo_judge)
        from judges.demo_judge import demo_reply

        return demo_reply(body)
    try:
        base = check_base_url(endpoint.base_url)  # the addresses are checked when connecting
    except ValidationFailed as exc:
        raise ProviderRefused(str(exc)) from None
    key = api_key(endpoint.api_key_env)
    headers = {"content-type": "application/json", "accept": "application/json"}
    if endpoint.provider == "anthropic":
        url = f"{base}/v1/messages"
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
    elif endpoint.provider == "openai":
        url = f"{base}/chat/completions"
        if key:
            headers["authorization"] = f"Bearer {key}"
    else:
        raise ProviderRefused(f"provider {endpoint.provider!r} cannot be called (imported outputs only)")
    try:
        # The client's transport connects to addresses checked just now and verifies the peer
        # (judges.egress, SECURITY.md row 20); a refusal surfaces as ValidationFailed.
        response = _client(endpoint.concurrency, endpoint.timeout).post(url, content=body, headers=headers)
    except ValidationFailed as exc:
        raise ProviderRefused(str(exc)) from None
    except egress.ResolveFailed as exc:
        raise TransportFailure(str(exc)) from None
    except httpx.TimeoutException as exc:
        raise TransportFailure(f"timed out after {endpoint.timeout:g} s ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise TransportFailure(f"connection failed ({type(exc).__name__})") from None
    status = response.status_code
    if status in (408, 413, 425, 429) or status >= 500:
        raise TransportFailure(
            f"HTTP {status}{' request too large' if status == 413 else ''}",
            status=status,
            retry_after=_retry_after(response.headers.get("retry-after")),
        )
    if status >= 300:
        raise ProviderRefused(f"HTTP {status}: {_scrub(' '.join(response.text[:200].split()), key)}")
    try:
        envelope = response.json()
    except ValueError:
        raise TransportFailure(f"HTTP {status} with a body that is not JSON") from None
    try:
        return _reply_text(endpoint.provider, envelope)
    except (KeyError, IndexError, TypeError):
        raise TransportFailure("the provider's response has no message text") from None


def _reply_text(provider: str, envelope: Any) -> str:
    if provider == "anthropic":
        parts = envelope["content"]
        return "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    content = envelope["choices"][0]["message"]["content"]
    if isinstance(content, list):  # some gateways return content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        return ""
    if not isinstance(content, str):
        raise TypeError("content")
    return content


_SECRET_LIKE = re.compile(r"\b(?:sk|key|api|token)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


def _scrub(text: str, key: str) -> str:
    """Provider error text without the key or anything shaped like one (some echo a masked key)."""
    if key:
        text = text.replace(key, "[redacted]")
    return _SECRET_LIKE.sub("[redacted]", text)
