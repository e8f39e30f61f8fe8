"""The interface every wire-format adapter implements (one module per format in this package)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judges.providers.base import Endpoint, JudgeRequest, Reply, Turn


class Adapter:
    """One provider wire format: where to POST, which headers, the body, and how to read the reply.

    Adapters are pure translation: they never send anything (``judges.providers.call`` does, through
    ``judges.providers.transport``), so the same code builds live requests and batch lines.
    """

    name = ""
    default_base_url = ""
    local = False  # True: answers on this machine (:meth:`answer`), nothing is sent (the demo judge)

    def url(self, endpoint: Endpoint) -> str:
        raise NotImplementedError

    def headers(self, endpoint: Endpoint, key: str) -> dict[str, str]:
        raise NotImplementedError

    def body(self, endpoint: Endpoint, request: JudgeRequest, *, schema: dict[str, Any] | None,
             system: str, turns: Sequence[tuple[Turn, str]]) -> dict[str, Any]:
        """The JSON body. ``turns``: earlier replies and the repair prompt answering each."""
        raise NotImplementedError

    def reply(self, envelope: Any, headers: Any) -> Reply:
        """The reply text and usage; KeyError / IndexError / TypeError when the envelope is malformed."""
        raise NotImplementedError

    def answer(self, body: bytes) -> Reply:
        """The reply of a ``local`` adapter to a request body (no URL, key or network)."""
        raise NotImplementedError


def header_request_id(headers: Any, *names: str) -> str:
    for name in (*names, "x-request-id", "request-id"):
        value = headers.get(name)
        if value:
            return str(value)[:200]
    return ""


def text_of(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError("content")
    return value
