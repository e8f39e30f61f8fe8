"""Provider batch APIs (issue 14 item 5): OpenAI (and Azure OpenAI) Batch, Anthropic Message Batches, Gemini batch.

Each :class:`BatchApi` turns prepared requests (``custom_id`` = the output id, and the JSON body
the live adapter builds) into one provider batch job, reads its state, downloads its results as
``(custom_id, Reply | error)`` pairs — read with the live adapter's ``reply`` — and cancels it.
Sending goes through :func:`judges.providers.transport.exchange` like live calls (allow-list
check, deadline, size cap, proxy). Results are capped at ``ARBITER_JUDGE_MAX_BATCH_RESULT_BYTES``.

- ``openai`` / ``openai-responses``: ``POST /files`` (``purpose=batch``, a JSONL of
  ``{custom_id, method, url, body}``), ``POST /batches``, ``GET /batches/{id}``,
  ``GET /files/{output_file_id}/content``, ``POST /batches/{id}/cancel``.
- ``azure-openai``: the same files + batches API on the resource, with the live adapter's
  ``api-key`` header: under the v1 base URL (``https://RES.openai.azure.com/openai/v1``), or for
  the deployment form under ``RES/openai/`` with ``?api-version=`` after the path; each line's
  ``url`` is ``/chat/completions`` and its body's ``model`` is the deployment name.
- ``anthropic``: ``POST /v1/messages/batches`` (``requests: [{custom_id, params}]``), ``GET
  /v1/messages/batches/{id}``, its ``results_url`` (JSONL), ``POST .../{id}/cancel``.
- ``gemini``: ``POST /v1beta/models/{model}:batchGenerateContent`` with inlined requests (each
  with ``metadata.key`` = custom_id), ``GET /v1beta/{batches/ID}``, the inlined responses in its
  ``response``, ``POST /v1beta/{batches/ID}:cancel``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.conf import settings

from annotation.errors import ValidationFailed
from judges.providers.azure_openai import resource
from judges.providers.base import Endpoint, ProviderRefused, Reply, TransportFailure, api_key, check_base_url
from judges.providers.gemini import models_url
from judges.providers.transport import exchange
from judges.providers.wire import Adapter

BATCH_CALLS = ("openai", "openai-responses", "azure-openai", "anthropic", "gemini")


@dataclass(frozen=True)
class BatchState:
    provider_status: str
    done: bool  # the provider will not change the results any more
    result_ref: str = ""  # output file id / results URL / batch name
    error: str = ""


@dataclass(frozen=True)
class BatchResult:
    custom_id: str
    reply: Reply | None
    error: str = ""  # why there is no reply (errored, expired, cancelled)


def _result_cap() -> int:
    return int(getattr(settings, "ARBITER_JUDGE_MAX_BATCH_RESULT_BYTES", 1024 * 1024 * 1024))


class BatchApi:
    def __init__(self, endpoint: Endpoint, adapter: Adapter) -> None:
        try:
            self.base = check_base_url(endpoint.base_url)  # addresses: checked when connecting
        except ValidationFailed as exc:
            raise ProviderRefused(str(exc)) from None
        self.endpoint = Endpoint(**{**endpoint.__dict__, "base_url": self.base})
        self.adapter = adapter
        self.key = api_key(endpoint.api_key_env)

    # -- sending ---------------------------------------------------------------------------------
    def _send(self, method: str, url: str, body: bytes | None = None, *, content_type: str = "application/json",
              cap: int | None = None) -> Any:
        headers = {"accept": "application/json", **self.adapter.headers(self.endpoint, self.key)}
        if body is not None:
            headers["content-type"] = content_type
        got = exchange(url, body=body, headers=headers, timeout=max(self.endpoint.timeout, 60.0),
                       concurrency=1, method=method, cap=cap)
        if got.status == 404:
            raise ProviderRefused(f"the provider has no such batch or file ({method} {url.rsplit('/', 2)[-2:]}: HTTP 404)")
        if got.status in (408, 429) or got.status >= 500:
            raise TransportFailure(f"HTTP {got.status} from the batch API", status=got.status)
        if got.status >= 300:
            text = " ".join(got.body[:300].decode("utf-8", "replace").split())
            raise ProviderRefused(f"the batch API refused {method} (HTTP {got.status}): {text}")
        return got.body

    def _json(self, method: str, url: str, payload: Any = None) -> Any:
        body = None if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        raw = self._send(method, url, body)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise TransportFailure("the batch API answered with a body that is not JSON") from None

    # -- the interface -----------------------------------------------------------------------------
    def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, str]:
        """Create the batch; (provider batch id, input file id or "")."""
        raise NotImplementedError

    def state(self, batch_id: str) -> BatchState:
        raise NotImplementedError

    def results(self, state: BatchState) -> Iterator[BatchResult]:
        raise NotImplementedError

    def cancel(self, batch_id: str) -> None:
        raise NotImplementedError

    def _reply(self, custom_id: str, envelope: Any) -> BatchResult:
        try:
            return BatchResult(custom_id, self.adapter.reply(envelope, {}))
        except (KeyError, IndexError, TypeError, AttributeError):
            return BatchResult(custom_id, None, "the provider's response has no message text")


def _jsonl(raw: bytes) -> Iterator[Any]:
    for line in raw.splitlines():
        if line.strip():
            try:
                yield json.loads(line)
            except (ValueError, RecursionError):
                continue  # an unreadable line: its output is released for a live call


class OpenAIBatch(BatchApi):
    def _path(self) -> str:
        return "/v1/responses" if self.adapter.name == "openai-responses" else "/v1/chat/completions"

    def _url(self, path: str) -> str:
        return f"{self.base}{path}"

    def _line_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body

    def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, str]:
        lines = b"".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": self._path(), "body": self._line_body(body)},
                       ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            for cid, body in requests
        )
        boundary = secrets.token_hex(16)
        multipart = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"judge-calls.jsonl\"\r\n"
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode() + lines + f"\r\n--{boundary}--\r\n".encode()
        raw = self._send("POST", self._url("/files"), multipart, content_type=f"multipart/form-data; boundary={boundary}")
        file_id = str(json.loads(raw)["id"])
        batch = self._json("POST", self._url("/batches"),
                           {"input_file_id": file_id, "endpoint": self._path(), "completion_window": "24h"})
        return str(batch["id"]), file_id

    def state(self, batch_id: str) -> BatchState:
        batch = self._json("GET", self._url(f"/batches/{quote(batch_id, safe='')}"))
        status = str(batch.get("status") or "")
        done = status in ("completed", "failed", "expired", "cancelled")
        errors = (batch.get("errors") or {}).get("data") or []
        error = "; ".join(str(e.get("message", "")) for e in errors if isinstance(e, dict))[:300]
        return BatchState(status, done, str(batch.get("output_file_id") or ""), error)

    def results(self, state: BatchState) -> Iterator[BatchResult]:
        if not state.result_ref:
            return
        raw = self._send("GET", self._url(f"/files/{quote(state.result_ref, safe='')}/content"), cap=_result_cap())
        for item in _jsonl(raw):
            cid = str(item.get("custom_id") or "")
            response = item.get("response") or {}
            if item.get("error") or response.get("status_code") != 200:
                yield BatchResult(cid, None, f"batch item failed: {json.dumps(item.get('error') or response)[:200]}")
            else:
                yield self._reply(cid, response.get("body"))

    def cancel(self, batch_id: str) -> None:
        self._json("POST", self._url(f"/batches/{quote(batch_id, safe='')}/cancel"), {})


class AzureOpenAIBatch(OpenAIBatch):
    """OpenAI's Batch API on an Azure resource: only the URLs (and the live adapter's auth) differ."""

    def __init__(self, endpoint: Endpoint, adapter: Adapter) -> None:
        super().__init__(endpoint, adapter)
        self.resource = resource(self.endpoint)

    def _path(self) -> str:
        return "/chat/completions"

    def _url(self, path: str) -> str:
        return self.resource.url(path)

    def _line_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "model": self.resource.deployment}


class AnthropicBatch(BatchApi):
    def _root(self) -> str:
        return f"{self.base}/messages/batches" if self.base.endswith("/v1") else f"{self.base}/v1/messages/batches"

    def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, str]:
        batch = self._json("POST", self._root(), {"requests": [{"custom_id": c, "params": b} for c, b in requests]})
        return str(batch["id"]), ""

    def state(self, batch_id: str) -> BatchState:
        batch = self._json("GET", f"{self._root()}/{quote(batch_id, safe='')}")
        status = str(batch.get("processing_status") or "")
        return BatchState(status, status == "ended", str(batch.get("results_url") or ""))

    def results(self, state: BatchState) -> Iterator[BatchResult]:
        if not state.result_ref:
            return
        url = check_base_url(state.result_ref)  # the results URL is the provider's; check it too
        for item in _jsonl(self._send("GET", url, cap=_result_cap())):
            cid = str(item.get("custom_id") or "")
            result = item.get("result") or {}
            if result.get("type") == "succeeded":
                yield self._reply(cid, result.get("message"))
            else:
                yield BatchResult(cid, None, f"batch item {result.get('type') or 'missing'}")

    def cancel(self, batch_id: str) -> None:
        self._json("POST", f"{self._root()}/{quote(batch_id, safe='')}/cancel", {})


class GeminiBatch(BatchApi):
    def _api(self) -> str:
        return models_url(self.base).removesuffix("/models")

    def submit(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> tuple[str, str]:
        model = self.endpoint.model.removeprefix("models/")
        payload = {"batch": {"display_name": "arbiter-judge-calls", "input_config": {"requests": {"requests": [
            {"request": body, "metadata": {"key": cid}} for cid, body in requests]}}}}
        operation = self._json("POST", f"{self._api()}/models/{quote(model, safe='.-_')}:batchGenerateContent", payload)
        name = str(operation.get("name") or (operation.get("metadata") or {}).get("name") or "")
        if not name:
            raise TransportFailure("the Gemini batch API returned no batch name")
        return name, ""

    def state(self, batch_id: str) -> BatchState:
        batch = self._json("GET", f"{self._api()}/{quote(batch_id, safe='/')}")
        meta = batch.get("metadata") or batch
        status = str(meta.get("state") or "")
        done = bool(batch.get("done")) or status in ("BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED",
                                                      "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED")
        return BatchState(status, done, batch_id, str((batch.get("error") or {}).get("message") or "")[:300])

    def results(self, state: BatchState) -> Iterator[BatchResult]:
        batch = self._json("GET", f"{self._api()}/{quote(state.result_ref, safe='/')}")
        output = (batch.get("response") or {}).get("inlinedResponses") or (batch.get("metadata") or {}).get("output") or {}
        items = output.get("inlinedResponses") if isinstance(output, dict) else output
        for item in items or []:
            cid = str((item.get("metadata") or {}).get("key") or "")
            if item.get("response") is not None:
                yield self._reply(cid, item["response"])
            else:
                yield BatchResult(cid, None, f"batch item failed: {json.dumps(item.get('error'))[:200]}")

    def cancel(self, batch_id: str) -> None:
        self._json("POST", f"{self._api()}/{quote(batch_id, safe='/')}:cancel", {})


def batch_api(endpoint: Endpoint, adapter: Adapter) -> BatchApi:
    kind = {"openai": OpenAIBatch, "openai-responses": OpenAIBatch, "azure-openai": AzureOpenAIBatch,
            "anthropic": AnthropicBatch, "gemini": GeminiBatch}.get(endpoint.provider)
    if kind is None:
        raise ProviderRefused(f"provider {endpoint.provider} has no batch API here (use live calls)")
    return kind(endpoint, adapter)
