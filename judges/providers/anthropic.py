"""Anthropic Messages (``POST {base}/v1/messages``).

- ``anthropic-version`` is the judge's ``api_version`` (default :data:`DEFAULT_VERSION`, the
  current version of the Messages API), ``x-api-key``.
- ``system`` carries the system prompt; one user turn: each label then its base64 image, the
  prompt last.
- Structured output: one tool whose ``input_schema`` is the reply schema, forced with
  ``tool_choice`` (the mechanism every Claude model and API version accepts); the reply is the
  tool input, serialized as JSON. With extended thinking (``reasoning_effort``) a forced tool is
  not allowed, so the tool is offered (``auto``) and a plain-text answer is accepted too.
- ``temperature`` only when set or allowed (not with extended thinking); Anthropic has no seed.
- Images: the 5 MB limit is measured on the base64 text (see ``judges.limits_presets``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from judges.providers.base import Endpoint, JudgeRequest, Reply, Turn, as_count
from judges.providers.schema import SCHEMA_NAME
from judges.providers.wire import Adapter, header_request_id

DEFAULT_VERSION = "2023-06-01"
THINKING_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384}
TOOL_NAME = f"record_{SCHEMA_NAME}"


class Anthropic(Adapter):
    name = "anthropic"
    default_base_url = "https://api.anthropic.com"

    def url(self, endpoint: Endpoint) -> str:
        base = endpoint.base_url
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        headers = {"anthropic-version": endpoint.api_version or DEFAULT_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(self, endpoint: Endpoint, request: JudgeRequest, *, schema: dict[str, Any] | None,
             system: str, turns: Sequence[tuple[Turn, str]]) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for image in request.images:
            content.append({"type": "text", "text": image.label})
            content.append({"type": "image", "source": {"type": "base64", "media_type": image.mime,
                                                         "data": image.base64()}})
        content.append({"type": "text", "text": request.prompt})
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        for turn, repair in turns:
            messages.append({"role": "assistant", "content": turn.reply or "(no answer)"})
            messages.append({"role": "user", "content": repair})
        max_tokens = endpoint.max_tokens
        body: dict[str, Any] = {"model": endpoint.model, "max_tokens": max_tokens, "messages": messages}
        if system:
            body["system"] = system
        thinking = THINKING_BUDGETS.get(endpoint.reasoning_effort.lower()) if endpoint.reasoning_effort else None
        if thinking:
            body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
            body["max_tokens"] = max_tokens + thinking  # the budget counts against max_tokens
        temperature = endpoint.effective_temperature()
        if temperature is not None and not thinking:
            body["temperature"] = temperature
        if schema is not None:
            body["tools"] = [{"name": TOOL_NAME, "description": "Record the judgement.", "input_schema": schema}]
            body["tool_choice"] = {"type": "auto"} if thinking else {"type": "tool", "name": TOOL_NAME}
        return body

    def reply(self, envelope: Any, headers: Any) -> Reply:
        parts = envelope["content"]
        tool = [p for p in parts if p.get("type") == "tool_use" and p.get("name") == TOOL_NAME]
        if tool:
            text = json.dumps(tool[0]["input"], ensure_ascii=False)
        else:
            text = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
        usage = envelope.get("usage") or {}
        return Reply(
            text=text,
            input_tokens=as_count(usage.get("input_tokens")),
            output_tokens=as_count(usage.get("output_tokens")),
            cached_tokens=as_count(usage.get("cache_read_input_tokens")),
            model=str(envelope.get("model") or "")[:200],
            request_id=header_request_id(headers, "request-id") or str(envelope.get("id") or "")[:200],
            finish_reason="length" if envelope.get("stop_reason") == "max_tokens" else str(envelope.get("stop_reason") or ""),
        )
