"""Provider clients (docs/protocol.md "Judges and calibration"): one adapter module per wire format behind one
interface.

========================  =================================================================
``openai``                Chat Completions; also OpenAI-compatible servers (vLLM, Ollama,
                          LiteLLM, OpenRouter) — :mod:`judges.providers.openai_chat`
``openai-responses``      Responses API — :mod:`judges.providers.openai_responses`
``anthropic``             Messages — :mod:`judges.providers.anthropic`
``gemini``                native ``generateContent`` — :mod:`judges.providers.gemini`
``azure-openai``          Azure OpenAI, v1 and deployment URLs — :mod:`judges.providers.azure_openai`
``demo``                  the built-in demo judge, answers locally (no URL, key or network;
                          made by ``make_demo_study``, not by ``add_judge``) — :mod:`judges.providers.demo`
========================  =================================================================

:func:`call` is the only thing that sends: it checks the base URL against the egress rules
(:func:`check_base_url`; the transport checks the addresses when connecting), reads the key
from the environment, builds the body
(structured output, system prompt, repair turns), makes one exchange under one deadline and a
size cap (:mod:`judges.providers.transport`), and sorts the outcome into a :class:`Reply` or one
of the errors of :mod:`judges.providers.base`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from annotation.errors import ValidationFailed
from judges.providers.anthropic import Anthropic
from judges.providers.azure_openai import AzureOpenAI
from judges.providers.base import (
    PARAMETER_FLAGS,
    STRUCTURED_OUTPUT_PARAMETERS,
    Endpoint,
    ImageRejected,
    JudgeImage,
    JudgeRequest,
    ParameterRefused,
    ProviderRefused,
    Reply,
    RunStopped,
    TransportFailure,
    Turn,
    UnusableReply,
    _scrub,
    api_key,
    check_base_url,
    image_input_refused,
    image_too_large,
    rate_limit_reset,
    unsupported_parameter,
)
from judges.providers.demo import Demo
from judges.providers.gemini import Gemini
from judges.providers.openai_chat import OpenAIChat
from judges.providers.openai_responses import OpenAIResponses
from judges.providers.schema import SYSTEM_PROMPT, repair_prompt, reply_schema
from judges.providers.wire import Adapter

if TYPE_CHECKING:
    from judges.replies import ReplyContract

__all__ = [
    "ADAPTERS",
    "REGISTRABLE",
    "Endpoint",
    "ImageRejected",
    "JudgeImage",
    "JudgeRequest",
    "ParameterRefused",
    "ProviderRefused",
    "Reply",
    "RunStopped",
    "TransportFailure",
    "Turn",
    "UnusableReply",
    "_scrub",
    "adapter_for",
    "api_key",
    "call",
    "check_base_url",
    "encode_body",
    "request_overhead_bytes",
]

ADAPTERS: dict[str, Adapter] = {
    a.name: a for a in (OpenAIChat(), OpenAIResponses(), Anthropic(), Gemini(), AzureOpenAI(), Demo())
}
# What add_judge / the API / the admin may register: the local demo judge is made by make_demo_study.
REGISTRABLE = tuple(name for name, adapter in ADAPTERS.items() if not adapter.local)


def adapter_for(provider: str) -> Adapter:
    try:
        return ADAPTERS[provider]
    except KeyError:
        raise ProviderRefused(f"provider {provider!r} cannot be called (expected one of {', '.join(ADAPTERS)})") from None


def build_body(endpoint: Endpoint, request: JudgeRequest, *, active_axes: Sequence[str] = (),
               turns: Sequence[Turn] = (), contract: ReplyContract | None = None) -> dict[str, Any]:
    """The JSON body of one attempt (the repair turns of earlier invalid replies included).

    ``contract`` (``judges.replies``) gives the schema and the repair turns of the reply the call asks
    for; without it, the verdict of docs/protocol.md "Judges and calibration" for ``active_axes``."""
    adapter = adapter_for(endpoint.provider)
    if contract is not None:
        schema = contract.schema() if endpoint.structured_output else None
        repairs = [(turn, contract.repair(turn.error)) for turn in turns]
    else:
        schema = reply_schema(active_axes) if endpoint.structured_output else None
        repairs = [(turn, repair_prompt(turn.error, active_axes)) for turn in turns]
    return adapter.body(endpoint, request, schema=schema, system=SYSTEM_PROMPT, turns=repairs)


def encode_body(endpoint: Endpoint, request: JudgeRequest, *, active_axes: Sequence[str] = (),
                turns: Sequence[Turn] = (), contract: ReplyContract | None = None) -> bytes:
    """The body as bytes. The JSON encoder never sees the base64 images (hundreds of KB each):
    the body is encoded with a short placeholder per image, which is then replaced by the base64
    text (its alphabet needs no JSON escaping)."""
    marks = [f"@@arbiter-image-{i}-{id(request)}@@" for i in range(len(request.images))]
    skeleton = JudgeRequest(request.prompt, tuple(
        JudgeImage(image.label, image.mime, b"", mark) for image, mark in zip(request.images, marks, strict=True)
    ))
    body = build_body(endpoint, skeleton, active_axes=active_axes, turns=turns, contract=contract)
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    parts: list[str] = []
    for mark, image in zip(marks, request.images, strict=True):
        head, found, text = text.partition(mark)
        if not found:
            raise ValueError("an image placeholder is missing from the encoded body")
        parts += [head, image.base64()]
    parts.append(text)
    return "".join(parts).encode()


def request_overhead_bytes(provider: str, request: JudgeRequest, *, model: str, active_axes: Sequence[str] = (),
                           contract: ReplyContract | None = None) -> int:
    """Body bytes other than the base64 image data (for the request-size budget)."""
    empty = JudgeRequest(request.prompt, tuple(JudgeImage(i.label, i.mime, b"") for i in request.images))
    endpoint = Endpoint(provider=provider, base_url="", model=model, api_key_env="", timeout=1.0, concurrency=1,
                        max_tokens=1, temperature=None)
    # Room for two repair turns on top of the first request.
    return len(encode_body(endpoint, empty, active_axes=active_axes, contract=contract)) + 4096


def _error_object(body: bytes) -> tuple[Any, str]:
    """The provider's error object and its message (capped, one line)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None, " ".join(body[:400].decode("utf-8", "replace").split())
    if isinstance(data, list) and data:
        data = data[0]  # Gemini sometimes wraps its error in a list
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return error, " ".join(str(error.get("message") or json.dumps(error)[:400]).split())
    return error, " ".join(json.dumps(data)[:400].split())


def _refusal(endpoint: Endpoint, status: int, body: bytes, key: str) -> Exception:
    error, message = _error_object(body)
    message = _scrub(message[:300], key)
    code = str((error or {}).get("code") or (error or {}).get("type") or (error or {}).get("status") or "") \
        if isinstance(error, dict) else ""
    # Only OpenAI's explicit code: Gemini words its per-minute 429s "exceeded your current quota" too.
    if code == "insufficient_quota" or "insufficient_quota" in message:
        return RunStopped(f"the provider reports no quota left for judge {endpoint.name or endpoint.model} "
                          f"(HTTP {status} insufficient_quota): top up the account, then run again")
    if status in (401, 403):
        return RunStopped(f"the provider refused the key in {endpoint.api_key_env or '(no key set)'} "
                          f"(HTTP {status}): {message}")
    if status in (400, 422) and image_too_large(message):
        return ImageRejected(f"HTTP {status} image too large: {message}", status=413)
    name = endpoint.name or "NAME"
    if status in (400, 422) and image_input_refused(message):
        return ParameterRefused(
            f"the model {endpoint.model} refused the image input (HTTP {status}: {message}); a judge must see the "
            "three images, so this is not dropped: register a model that takes images",
            param="image input", status=status, said=message, required=True,
        )
    param = unsupported_parameter(error, message) if status in (400, 422) else None
    if param in STRUCTURED_OUTPUT_PARAMETERS:
        return ParameterRefused(
            f"the model {endpoint.model} refused '{param}' (HTTP {status}: {message}), which judge {name} needs for "
            f"structured output, so it is not dropped: use a model that takes a JSON schema, or add_judge {name} "
            "--update --no-structured-output to rely on the validator alone",
            param=param, status=status, said=message, required=True,
        )
    if param:
        return ParameterRefused(
            f"the model {endpoint.model} does not accept the parameter '{param}' (HTTP {status}: {message}); fix: "
            f"add_judge {name} --update {PARAMETER_FLAGS[param]}",
            param=param, status=status, said=message,
        )
    return ProviderRefused(f"HTTP {status}: {message}")


def call(endpoint: Endpoint, request: JudgeRequest, *, active_axes: Sequence[str] = (), turns: Sequence[Turn] = (),
         body: bytes | None = None) -> Reply:
    """Send one attempt of a judge call; its :class:`Reply`. Raises the errors of ``judges.providers.base``."""
    adapter = adapter_for(endpoint.provider)
    if adapter.local:  # the demo judge: no URL, key or network
        return adapter.answer(body if body is not None else encode_body(endpoint, request, active_axes=active_axes,
                                                                        turns=turns))
    try:
        # No lookup here: the transport connects only to addresses it checks when connecting
        # (judges.pinned.pinned_transport, SECURITY.md row 20).
        base = check_base_url(endpoint.base_url)
    except ValidationFailed as exc:
        raise ProviderRefused(str(exc)) from None
    key = api_key(endpoint.api_key_env)
    if body is None:
        body = encode_body(endpoint, request, active_axes=active_axes, turns=turns)
    target = Endpoint(**{**endpoint.__dict__, "base_url": base})
    headers = {"content-type": "application/json", "accept": "application/json", **adapter.headers(target, key)}
    from judges.providers.transport import exchange  # httpx: loaded by the processes that send only

    got = exchange(adapter.url(target), body=body, headers=headers, timeout=endpoint.timeout,
                   concurrency=endpoint.concurrency)
    status = got.status
    if status == 429:
        refusal = _refusal(endpoint, status, got.body, key)
        if isinstance(refusal, RunStopped):
            raise refusal
        raise TransportFailure("HTTP 429 rate limited", status=429, retry_after=rate_limit_reset(got.headers))
    if status in (408, 413, 425) or status >= 500:
        raise TransportFailure(
            f"HTTP {status}{' request too large' if status == 413 else ''}",
            status=status,
            retry_after=rate_limit_reset(got.headers),
        )
    if status >= 300:
        raise _refusal(endpoint, status, got.body, key)
    try:
        envelope = json.loads(got.body)
    except RecursionError:
        raise UnusableReply("the provider's response is nested too deeply to read") from None
    except ValueError:
        raise TransportFailure(f"HTTP {status} with a body that is not JSON") from None
    try:
        reply = adapter.reply(envelope, got.headers)
    except (KeyError, IndexError, TypeError, AttributeError):
        raise TransportFailure("the provider's response has no message text") from None
    from dataclasses import replace

    return replace(reply, latency_ms=got.latency_ms)

