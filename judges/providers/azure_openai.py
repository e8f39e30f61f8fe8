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

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from judges.providers.base import Endpoint, Reply
from judges.providers.openai_chat import OpenAIChat
from judges.providers.wire import header_request_id

DEFAULT_API_VERSION = "2024-10-21"


@dataclass(frozen=True)
class Resource:
    """A judge's Azure base URL taken apart: where the API lives, its query, the deployment."""

    scheme: str
    netloc: str
    root: str  # the v1 path (``/openai/v1``) or the resource's ``/openai``
    query: dict[str, str]
    deployment: str
    v1: bool

    def url(self, path: str) -> str:
        return urlunsplit((self.scheme, self.netloc, f"{self.root}{path}", urlencode(self.query), ""))


def resource(endpoint: Endpoint) -> Resource:
    parts = urlsplit(endpoint.base_url)
    path = parts.path.rstrip("/")
    query = dict(parse_qsl(parts.query))
    deployment = endpoint.model
    v1 = path.endswith("/v1")
    if not v1:
        if "/deployments/" in path:
            path, rest = path.split("/deployments/", 1)
            deployment = unquote(rest.split("/", 1)[0]) or endpoint.model
        path = f"{path.removesuffix('/openai')}/openai"
        query.setdefault("api-version", DEFAULT_API_VERSION)
    if endpoint.api_version:
        query["api-version"] = endpoint.api_version
    return Resource(parts.scheme, parts.netloc, path, query, deployment, v1)


class AzureOpenAI(OpenAIChat):
    name = "azure-openai"
    default_base_url = ""

    def url(self, endpoint: Endpoint) -> str:
        where = resource(endpoint)
        if where.v1:
            return where.url("/chat/completions")
        return where.url(f"/deployments/{quote(where.deployment, safe='.-_')}/chat/completions")

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        return {"api-key": key} if key else {}

    def reply(self, envelope: Any, headers: Any) -> Reply:
        reply = super().reply(envelope, headers)
        request_id = header_request_id(headers, "apim-request-id", "x-ms-request-id")
        if request_id:
            reply = replace(reply, request_id=request_id)
        return reply
