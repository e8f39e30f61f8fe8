"""OpenAI Chat Completions (``POST {base}/chat/completions``); also vLLM, Ollama, LiteLLM, OpenRouter.

- ``max_completion_tokens`` by default (current OpenAI models, reasoning ones included, refuse
  ``max_tokens``); ``--token-param max_tokens`` for servers that only know the older name.
- ``temperature`` only when it is set or the model allows 0 (not for o-series / GPT-5 reasoning
  models), ``seed`` only when set, ``reasoning_effort`` only when set.
- Structured output: ``response_format = {"type": "json_schema", "json_schema": {..., "strict": true}}``.
- A system message, then one user message: the prompt, then each label and its data URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judges.providers.base import Endpoint, JudgeRequest, Reply, Turn, as_count
from judges.providers.schema import SCHEMA_NAME
from judges.providers.wire import Adapter, header_request_id, text_of


def user_content(request: JudgeRequest) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": request.prompt}]
    for image in request.images:
        content.append({"type": "text", "text": image.label})
        content.append(
            {"type": "image_url", "image_url": {"url": f"data:{image.mime};base64,{image.base64()}", "detail": "high"}}
        )
    return content


def token_param(endpoint: Endpoint) -> str:
    return "max_tokens" if endpoint.token_param == "max_tokens" else "max_completion_tokens"


class OpenAIChat(Adapter):
    name = "openai"
    default_base_url = "https://api.openai.com/v1"

    def url(self, endpoint: Endpoint) -> str:
        return f"{endpoint.base_url}/chat/completions"

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def body(self, endpoint: Endpoint, request: JudgeRequest, *, schema: dict[str, Any] | None,
             system: str, turns: Sequence[tuple[Turn, str]]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": user_content(request)})
        for turn, repair in turns:
            messages.append({"role": "assistant", "content": turn.reply})
            messages.append({"role": "user", "content": repair})
        body: dict[str, Any] = {"model": endpoint.model, "messages": messages, token_param(endpoint): endpoint.max_tokens}
        temperature = endpoint.effective_temperature()
        if temperature is not None:
            body["temperature"] = temperature
        if endpoint.seed is not None:
            body["seed"] = endpoint.seed
        if endpoint.reasoning_effort:
            body["reasoning_effort"] = endpoint.reasoning_effort
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": True}
            }
        return body

    def reply(self, envelope: Any, headers: Any) -> Reply:
        choice = envelope["choices"][0]
        content = choice["message"].get("content")
        if isinstance(content, list):  # some gateways return content parts
            text = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        else:
            text = text_of(content)
        usage = envelope.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return Reply(
            text=text,
            input_tokens=as_count(usage.get("prompt_tokens")),
            output_tokens=as_count(usage.get("completion_tokens")),
            cached_tokens=as_count(details.get("cached_tokens")) if isinstance(details, dict) else None,
            model=str(envelope.get("model") or "")[:200],
            request_id=header_request_id(headers) or str(envelope.get("id") or "")[:200],
            fingerprint=str(envelope.get("system_fingerprint") or "")[:200],
            finish_reason=str(choice.get("finish_reason") or ""),
        )
