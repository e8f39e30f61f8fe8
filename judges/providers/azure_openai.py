"""Azure OpenAI: Chat Completions behind either URL scheme, with the ``api-key`` header.

- v1 (``https://RES.openai.azure.com/openai/v1``): ``{base}/chat/completions``; the judge's model
  is the deployment name.
- deployment (``https://RES.openai.azure.com/openai/deployments/DEP`` or the resource root with
  the model as deployment): ``.../openai/deployments/DEP/chat/completions?api-version=V``; the
  query is kept apart from the path (a query already in the base URL is preserved), and the
  version is the judge's ``api_version`` (default :data:`DEFAULT_API_VERSION`).
The body is the Chat Completions body (``judges.providers.openai_chat``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from judges.providers.base import Endpoint, Reply
from judges.providers.openai_chat import OpenAIChat
from judges.providers.wire import header_request_id

DEFAULT_API_VERSION = "2024-10-21"


class AzureOpenAI(OpenAIChat):
    name = "azure-openai"
    default_base_url = ""

    def url(self, endpoint: Endpoint) -> str:
        parts = urlsplit(endpoint.base_url)
        path = parts.path.rstrip("/")
        query = dict(parse_qsl(parts.query))
        if path.endswith("/openai/v1") or path.endswith("/v1"):
            path = f"{path}/chat/completions"
            if endpoint.api_version:
                query["api-version"] = endpoint.api_version
        else:
            if "/deployments/" not in path:
                path = f"{path.removesuffix('/openai')}/openai/deployments/{quote(endpoint.model, safe='.-_')}"
            path = f"{path}/chat/completions"
            query.setdefault("api-version", endpoint.api_version or DEFAULT_API_VERSION)
            if endpoint.api_version:
                query["api-version"] = endpoint.api_version
        return urlunsplit((parts.scheme, parts.netloc, path, urlencode(query), ""))

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        return {"api-key": key} if key else {}

    def reply(self, envelope: Any, headers: Any) -> Reply:
        reply = super().reply(envelope, headers)
        request_id = header_request_id(headers, "apim-request-id", "x-ms-request-id")
        if request_id:
            from dataclasses import replace

            reply = replace(reply, request_id=request_id)
        return reply
