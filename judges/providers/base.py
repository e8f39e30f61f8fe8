"""What every provider adapter shares (docs/protocol.md "Judges and calibration"): the request, the reply, the
errors, the URL check.

- Explicit timeouts on every request; redirects are never followed.
- The API key is read from the judge's named environment variable at call time; it is never
  stored, logged or put into an error message.
- Endpoints are admin-configured only, and a base URL that points at link-local or cloud-metadata
  addresses is refused (:func:`check_base_url`) unless its host is in
  ``settings.ARBITER_JUDGE_HOST_ALLOWLIST``. Loopback is allowed (tests and local gateways).

Failures are split the way docs/protocol.md "Judges and calibration" counts them: :class:`TransportFailure`
(timeouts, connection errors, 408/413/429/5xx, a malformed envelope — retried with backoff) versus
:class:`ProviderRefused` (other 4xx such as a wrong key or model — not retried; its subclass
:class:`RunStopped` — bad key, no quota — also stops every other call of the judge). A reply
that arrives but cannot be an answer (over the size cap, nested too deeply) is
:class:`UnusableReply`, stored ``invalid``; one that is not a valid answer is the caller's
business (``judges.validation``).
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from annotation.errors import ValidationFailed
from judges import egress

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


class RunStopped(ProviderRefused):
    """Auth failure or exhausted quota: no call of this judge can succeed until an admin acts."""


class ParameterRefused(ProviderRefused):
    """A 400 naming one request parameter as refused for the model (unsupported, deprecated).

    ``param`` is the parameter as the provider named it; ``required`` when the protocol needs it
    (structured output the judge asks for, the image input itself): it is never dropped.
    ``said`` is the provider's own message (scrubbed, one line).
    """

    def __init__(self, message: str, *, param: str, status: int, said: str, required: bool = False) -> None:
        super().__init__(message)
        self.param = param
        self.status = status
        self.said = said
        self.required = required


class ImageRejected(TransportFailure):
    """The provider refused an image as too large (a 400 or 413): retried with smaller images."""


class UnusableReply(Exception):
    """A reply that arrived but cannot be an answer (too large, nested too deeply): ``invalid``."""

    def __init__(self, message: str, *, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class JudgeImage:
    label: str  # REFERENCE | CANDIDATE A | CANDIDATE B
    mime: str
    data: bytes
    encoded: str = ""  # the base64 text when already known (prepared images cache it)

    def base64(self) -> str:
        return self.encoded or base64.b64encode(self.data).decode("ascii")


@dataclass(frozen=True)
class JudgeRequest:
    """What a judge is asked (docs/protocol.md "Judges and calibration"): the prompt and three labelled
    images, in order."""

    prompt: str
    images: tuple[JudgeImage, ...]


def check_base_url(url: str, *, resolve: bool = False) -> str:
    """Refuse a judge base URL aimed at link-local / metadata addresses; return it normalized.

    ``resolve=True`` also checks every address the host name resolves to. A call connects only
    to addresses checked at that moment (``judges.pinned.pinned_transport``).
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


# -- what an adapter is given and gives back --------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A judge's call settings, detached from the database row (safe to pass to threads)."""

    provider: str
    base_url: str
    model: str
    api_key_env: str
    timeout: float
    concurrency: int
    max_tokens: int
    temperature: float | None
    name: str = ""
    seed: int | None = None
    send_temperature: bool = True  # False: never send temperature (add_judge --no-temperature)
    token_param: str = "auto"  # auto | max_tokens | max_completion_tokens
    reasoning_effort: str = ""
    structured_output: bool = True
    api_version: str = ""

    def effective_temperature(self) -> float | None:
        """The temperature sent: the judge's, else 0 where the model allows it, else none."""
        if not self.send_temperature:
            return None
        if self.temperature is not None:
            return float(self.temperature)
        if self.reasoning_effort or is_reasoning_model(self.model):
            return None
        return 0.0


_REASONING = re.compile(r"(?:^|/)(?:o\d(?:\b|-)|gpt-5|gpt-oss)", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """OpenAI reasoning families (o1, o3, o4-mini, GPT-5, gpt-oss) take no temperature and no max_tokens."""
    return bool(_REASONING.search(model or ""))


@dataclass(frozen=True)
class Turn:
    """One earlier attempt of a call sent back as a repair turn: what the model said, and why it failed."""

    reply: str
    error: str


@dataclass(frozen=True)
class Reply:
    """The model's answer text and what the provider reported about the call."""

    text: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    model: str = ""
    request_id: str = ""
    fingerprint: str = ""
    finish_reason: str = ""
    latency_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def usage(self) -> dict[str, int | None]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_tokens": self.cached_tokens}


def as_count(value: Any) -> int | None:
    """A token count from a provider's usage object (a non-negative integer), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _duration(value: str) -> float | None:
    """OpenAI's ``x-ratelimit-reset-*`` durations: ``1s``, ``6m0s``, ``250ms``, ``1h2m3.5s``."""
    value = value.strip()
    seconds = _seconds(value)
    if seconds is not None or not value:
        return seconds
    total = 0.0
    matched = False
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", value):
        matched = True
        total += float(number) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return total if matched else None


def _timestamp(value: str) -> float | None:
    """Anthropic's ``anthropic-ratelimit-*-reset``: an RFC 3339 time; seconds from now."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, when.timestamp() - time.time())


def rate_limit_reset(headers: Any) -> float | None:
    """Seconds until a 429 lifts, from every header the providers send (the longest applies).

    ``Retry-After`` (seconds or an HTTP date), ``retry-after-ms``, ``x-ratelimit-reset-requests`` /
    ``-tokens`` (OpenAI, Azure), ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset``.
    Only the limits that are exhausted count (``remaining`` 0, or no ``remaining`` header at all).
    """
    found: list[float] = []
    retry = _retry_after(headers.get("retry-after"))
    if retry is not None:
        found.append(retry)
    if headers.get("retry-after-ms"):
        with contextlib.suppress(ValueError):
            found.append(max(0.0, float(headers["retry-after-ms"]) / 1000))
    for kind in ("requests", "tokens"):
        reset = headers.get(f"x-ratelimit-reset-{kind}")
        remaining = headers.get(f"x-ratelimit-remaining-{kind}")
        if reset and (remaining is None or remaining.strip() in ("0", "0.0")):
            seconds = _duration(reset)
            if seconds is not None:
                found.append(seconds)
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        reset = headers.get(f"anthropic-ratelimit-{kind}-reset")
        remaining = headers.get(f"anthropic-ratelimit-{kind}-remaining")
        if reset and (remaining is None or remaining.strip() == "0"):
            seconds = _timestamp(reset)
            if seconds is not None:
                found.append(seconds)
    return max(found) if found else None


# Parameters a provider may refuse for a model, and the add_judge flag that stops sending them.
PARAMETER_FLAGS = {
    "max_tokens": "--token-param max_completion_tokens",
    "max_completion_tokens": "--token-param max_tokens",
    "max_output_tokens": "--token-param max_tokens",
    "temperature": "--no-temperature",
    "seed": "--seed none",
    "reasoning_effort": "--reasoning-effort none",
    "reasoning": "--reasoning-effort none",
    "thinking": "--reasoning-effort none",
    "thinkingConfig": "--reasoning-effort none",
    "response_format": "--no-structured-output",
    "text.format": "--no-structured-output",
    "tools": "--no-structured-output",
    "tool_choice": "--no-structured-output",
    "responseJsonSchema": "--no-structured-output",
    "responseMimeType": "--no-structured-output",
}
# What ``--adapt-parameters`` changes when the model refuses a parameter: the judge's fields (the
# Endpoint's of the same names), what that means in words, and the add_judge flag that undoes it.
ADAPTATIONS: dict[str, tuple[dict[str, Any], str, str]] = {
    "temperature": ({"send_temperature": False}, "temperature is no longer sent", "--send-temperature"),
    "seed": ({"seed": None}, "seed is no longer sent", "--seed N"),
    "max_tokens": ({"token_param": "max_completion_tokens"}, "the output cap is sent as max_completion_tokens",
                   "--token-param max_tokens"),
    "max_completion_tokens": ({"token_param": "max_tokens"}, "the output cap is sent as max_tokens",
                              "--token-param max_completion_tokens"),
    **{name: ({"reasoning_effort": ""}, "no reasoning effort is sent", "--reasoning-effort LEVEL")
       for name in ("reasoning_effort", "reasoning", "thinking", "thinkingConfig")},
}

# What a judge needs to be a judge (docs/protocol.md "Judges and calibration"): the schema where the judge
# asks for structured output, and the images. A refusal of one of these stops the run; it is never dropped.
STRUCTURED_OUTPUT_PARAMETERS = frozenset({"response_format", "text.format", "tools", "tool_choice",
                                          "responseJsonSchema", "responseMimeType"})
_PARAM_WORDS = re.compile(r"parameter|not supported|unsupported|does not support|not allowed|extra inputs|"
                          r"unknown name|unrecognized|not permitted|invalid|deprecated|no longer supported|"
                          r"not available|not compatible", re.IGNORECASE)
_IMAGE_INPUT = re.compile(
    r"(?<![A-Za-z_])(?:image_url|input_image|inline_data|inlineData)(?![A-Za-z_])"
    r"|(?:does not|doesn't|cannot|can't) (?:support|accept|process|read) (?:image|vision)"
    r"|(?:image|vision)(?: input)?s? (?:input )?(?:is|are) not (?:supported|allowed|enabled)"
    r"|not a (?:vision|multimodal) model|no (?:image|vision) (?:input )?support", re.IGNORECASE)


def image_input_refused(text: str) -> bool:
    """Does a provider's 400 say the model takes no image input at all (not that one is too large)?"""
    return bool(_IMAGE_INPUT.search(text)) and bool(_PARAM_WORDS.search(text) or "image" in text.lower())


def unsupported_parameter(error: Any, text: str) -> str | None:
    """The request parameter a provider's 400 names as unsupported, or None.

    Reads the structured ``error.param`` where the provider gives one (OpenAI), else looks for a
    parameter we send, quoted or as a field path, in a message that speaks of an unsupported
    parameter (Anthropic, Gemini, OpenAI-compatible servers).
    """
    if isinstance(error, dict):
        param = error.get("param")
        if isinstance(param, str) and param.split("[")[0] in PARAMETER_FLAGS:
            return param.split("[")[0]
    if not _PARAM_WORDS.search(text):
        return None
    best: tuple[int, str] | None = None
    for name in PARAMETER_FLAGS:
        match = re.search(rf"(?<![A-Za-z_]){re.escape(name)}(?![A-Za-z_])", text)
        if match and (best is None or match.start() < best[0]):
            best = (match.start(), name)
    return best[1] if best else None


_IMAGE_TOO_LARGE = re.compile(
    r"image[^.]{0,80}(?:exceed|too (?:large|big)|larger than|maximum|max(?:imum)? (?:size|dimension))"
    r"|(?:exceed|too (?:large|big))[^.]{0,40}image", re.IGNORECASE
)


def image_too_large(text: str) -> bool:
    """Does a provider's 400 say an image is over its limits (bytes or pixels)?"""
    return bool(_IMAGE_TOO_LARGE.search(text))


def _seconds(value: str | None) -> float | None:
    """A plain number of seconds (never negative), or None."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())

_SECRET_LIKE = re.compile(r"\b(?:sk|key|api|token)[-_][A-Za-z0-9_\-*.]{6,}", re.IGNORECASE)


def _scrub(text: str, key: str) -> str:
    """Provider error text without the key or anything shaped like one (some echo a masked key)."""
    if key:
        text = text.replace(key, "[redacted]")
    return _SECRET_LIKE.sub("[redacted]", text)
