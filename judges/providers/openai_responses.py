"""OpenAI Responses API (``POST {base}/responses``).

``instructions`` carries the system prompt; the user turn is ``input_text`` / ``input_image``
parts; ``max_output_tokens``; structured output through ``text.format`` (``json_schema``,
strict); ``reasoning.effort`` when set; ``temperature`` as for Chat Completions. The Responses API
has no ``seed``: a judge's seed is not sent here. Repair turns are earlier ``assistant`` outputs
followed by the repair prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judges.providers.base import Endpoint, JudgeRequest, Reply, Turn, as_count
from judges.providers.schema import SCHEMA_NAME
from judges.providers.wire import Adapter, header_request_id


class OpenAIResponses(Adapter):
    name = "openai-responses"
    default_base_url = "https://api.openai.com/v1"

    def url(self, endpoint: Endpoint) -> str:
        return f"{endpoint.base_url}/responses"

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def body(self, endpoint: Endpoint, request: JudgeRequest, *, schema: dict[str, Any] | None,
             system: str, turns: Sequence[tuple[Turn, str]]) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "input_text", "text": request.prompt}]
        for image in request.images:
            content.append({"type": "input_text", "text": image.label})
            content.append({"type": "input_image", "image_url": f"data:{image.mime};base64,{image.base64()}",
                            "detail": "high"})
        items: list[dict[str, Any]] = [{"role": "user", "content": content}]
        for turn, repair in turns:
            items.append({"role": "assistant", "content": [{"type": "output_text", "text": turn.reply}]})
            items.append({"role": "user", "content": [{"type": "input_text", "text": repair}]})
        body: dict[str, Any] = {"model": endpoint.model, "input": items, "max_output_tokens": endpoint.max_tokens,
                                "store": False}
        if system:
            body["instructions"] = system
        temperature = endpoint.effective_temperature()
        if temperature is not None:
            body["temperature"] = temperature
        if endpoint.reasoning_effort:
            body["reasoning"] = {"effort": endpoint.reasoning_effort}
        if schema is not None:
            body["text"] = {"format": {"type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": True}}
        return body

    def reply(self, envelope: Any, headers: Any) -> Reply:
        texts: list[str] = []
        for item in envelope["output"]:
            if item.get("type") != "message":
                continue  # reasoning summaries, tool calls
            for part in item["content"]:
                if part.get("type") == "output_text":
                    texts.append(str(part["text"]))
        usage = envelope.get("usage") or {}
        details = usage.get("input_tokens_details") or {}
        incomplete = (envelope.get("incomplete_details") or {}).get("reason") or ""
        return Reply(
            text="".join(texts),
            input_tokens=as_count(usage.get("input_tokens")),
            output_tokens=as_count(usage.get("output_tokens")),
            cached_tokens=as_count(details.get("cached_tokens")) if isinstance(details, dict) else None,
            model=str(envelope.get("model") or "")[:200],
            request_id=header_request_id(headers) or str(envelope.get("id") or "")[:200],
            finish_reason="length" if incomplete == "max_output_tokens" else str(envelope.get("status") or ""),
        )
