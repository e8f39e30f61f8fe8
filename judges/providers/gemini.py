"""Google Gemini, native ``generateContent`` (``POST {base}/v1beta/models/{model}:generateContent``).

``x-goog-api-key``; ``systemInstruction``; one user turn of ``text`` and ``inline_data`` parts;
``generationConfig`` with ``maxOutputTokens``, ``temperature`` / ``seed`` when set or allowed,
``responseMimeType: application/json`` and ``responseJsonSchema`` (structured output), and
``thinkingConfig`` from ``reasoning_effort`` (``thinkingLevel`` for Gemini 3, a
``thinkingBudget`` for 2.5). Thought parts are not part of the answer; thinking tokens are
counted as output tokens (they are billed as such).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from judges.providers.base import Endpoint, JudgeRequest, Reply, Turn, as_count
from judges.providers.wire import Adapter, header_request_id

THINKING_BUDGETS = {"minimal": 0, "low": 1024, "medium": 8192, "high": 24576}


def models_url(base: str) -> str:
    base = base.rstrip("/")
    return f"{base}/models" if base.rsplit("/", 1)[-1] in ("v1", "v1beta", "v1alpha") else f"{base}/v1beta/models"


class Gemini(Adapter):
    name = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"

    def url(self, endpoint: Endpoint) -> str:
        model = endpoint.model.removeprefix("models/")
        return f"{models_url(endpoint.base_url)}/{quote(model, safe='.-_')}:generateContent"

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    def body(self, endpoint: Endpoint, request: JudgeRequest, *, schema: dict[str, Any] | None,
             system: str, turns: Sequence[tuple[Turn, str]]) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"text": request.prompt}]
        for image in request.images:
            parts.append({"text": image.label})
            parts.append({"inline_data": {"mime_type": image.mime, "data": image.base64()}})
        contents: list[dict[str, Any]] = [{"role": "user", "parts": parts}]
        for turn, repair in turns:
            contents.append({"role": "model", "parts": [{"text": turn.reply or "(no answer)"}]})
            contents.append({"role": "user", "parts": [{"text": repair}]})
        config: dict[str, Any] = {"maxOutputTokens": endpoint.max_tokens}
        temperature = endpoint.effective_temperature()
        if temperature is not None:
            config["temperature"] = temperature
        if endpoint.seed is not None:
            config["seed"] = endpoint.seed
        if schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseJsonSchema"] = schema
        effort = endpoint.reasoning_effort.lower()
        if effort:
            if "gemini-3" in endpoint.model:
                config["thinkingConfig"] = {"thinkingLevel": effort}
            elif effort in THINKING_BUDGETS:
                config["thinkingConfig"] = {"thinkingBudget": THINKING_BUDGETS[effort]}
        body: dict[str, Any] = {"contents": contents, "generationConfig": config}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        return body

    def reply(self, envelope: Any, headers: Any) -> Reply:
        candidate = envelope["candidates"][0]
        parts = (candidate.get("content") or {}).get("parts") or []
        text = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and not p.get("thought"))
        usage = envelope.get("usageMetadata") or {}
        output = as_count(usage.get("candidatesTokenCount"))
        thoughts = as_count(usage.get("thoughtsTokenCount"))
        if output is not None and thoughts:
            output += thoughts
        return Reply(
            text=text,
            input_tokens=as_count(usage.get("promptTokenCount")),
            output_tokens=output,
            cached_tokens=as_count(usage.get("cachedContentTokenCount")),
            model=str(envelope.get("modelVersion") or "")[:200],
            request_id=str(envelope.get("responseId") or "")[:200] or header_request_id(headers, "x-goog-request-id"),
            finish_reason="length" if candidate.get("finishReason") == "MAX_TOKENS" else str(candidate.get("finishReason") or ""),
        )
