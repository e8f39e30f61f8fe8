"""A real HTTP server on loopback speaking the OpenAI-compatible (and Anthropic) protocol.

Tests queue behaviours (``server.script.append("429")``); each request takes the next one, then
``server.default``. Every request is inspected: the three labelled images must come in the order
REFERENCE, CANDIDATE A, CANDIDATE B, and the prompt must carry an ``ACTIVE_AXES`` JSON array; any
deviation is appended to ``server.problems`` (tests assert it stays empty). Images are decoded and
classified by colour (see ``factories``), so a test can check which candidate was sent where.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from PIL import Image

# The factories paint images in these colours (kept here: this module imports no Django).
SYSTEM_COLOURS = {"alpha": (220, 30, 30), "beta": (30, 30, 220), "gamma": (30, 170, 30)}
REFERENCE_COLOUR = (235, 235, 235)
COLOURS = {"reference": REFERENCE_COLOUR, **SYSTEM_COLOURS}
LABELS = ["REFERENCE", "CANDIDATE A", "CANDIDATE B"]
# What a checklist call (one rendering) and a pairwise call without a reference label their images.
CHECKLIST_LABELS = ["IMAGE"]
PAIRWISE_LABELS = ["CANDIDATE A", "CANDIDATE B"]
ALL_LABELS = {*LABELS, *CHECKLIST_LABELS}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    prompt: str = ""
    labels: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # reference | alpha | beta | gamma
    neutralized: list[bool] = field(default_factory=list)
    mimes: list[str] = field(default_factory=list)
    sizes: list[tuple[int, int]] = field(default_factory=list)
    active_axes: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)  # a checklist call's QUESTIONS
    behaviour: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0  # time.monotonic() when the request arrived


def wire_format(path: str) -> str:
    """Which provider format a request path speaks."""
    if path.endswith("/messages"):
        return "anthropic"
    if ":generateContent" in path:
        return "gemini"
    if path.endswith("/responses"):
        return "openai-responses"
    return "openai"


def _user_parts(path: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """The content parts of the first user turn, whatever the wire format."""
    kind = wire_format(path)
    if kind == "gemini":
        return list(data["contents"][0]["parts"])
    if kind == "openai-responses":
        return list(data["input"][0]["content"])
    user = next(m for m in data["messages"] if m["role"] == "user")
    return list(user["content"])


def envelope_for(path: str, text: str, *, usage: tuple[int, int, int] = (1200, 40, 0), model: str = "served-model-1") -> dict[str, Any]:
    """A success envelope of the request's wire format carrying ``text`` and usage figures."""
    kind = wire_format(path)
    prompt, completion, cached = usage
    if kind == "anthropic":
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                "usage": {"input_tokens": prompt, "output_tokens": completion, "cache_read_input_tokens": cached}}
    if kind == "gemini":
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                                  "cachedContentTokenCount": cached},
                "modelVersion": model, "responseId": "resp-fake"}
    if kind == "openai-responses":
        return {"id": "resp_fake", "object": "response", "status": "completed", "model": model,
                "output": [{"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": text}]}],
                "usage": {"input_tokens": prompt, "output_tokens": completion,
                          "input_tokens_details": {"cached_tokens": cached}}}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "model": model, "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def _classify(data: bytes) -> tuple[str, bool, tuple[int, int]]:
    with Image.open(io.BytesIO(data)) as image:
        rgb = image.convert("RGB")
    w, h = rgb.size
    sample = rgb.getpixel((int(w * 0.3), int(h * 0.5)))
    name = min(COLOURS, key=lambda k: sum((a - b) ** 2 for a, b in zip(COLOURS[k], sample, strict=True)))
    media = rgb.getpixel((int(w * 0.72), int(h * 0.80)))
    neutral = all(abs(c - 200) <= 12 for c in media)
    return name, neutral, (w, h)


def _questions(prompt: str) -> list[dict[str, Any]] | None:
    return _active_axes(prompt, "QUESTIONS:")


def _active_axes(prompt: str, name: str = "ACTIVE_AXES:") -> list[dict[str, Any]] | None:
    """The JSON array after ``name`` in the prompt (the ACTIVE_AXES block, or a checklist's QUESTIONS)."""
    marker = prompt.find(name)
    if marker < 0:
        return None
    start = prompt.find("[", marker)
    try:
        value, _ = json.JSONDecoder().raw_decode(prompt[start:])
    except (ValueError, IndexError):
        return None
    return value if isinstance(value, list) else None


class FakeProvider:
    def __init__(self, *, delay: float = 0.0, inspect: bool = True, retry_after: str = "1", timeout_sleep: float = 3.0) -> None:
        self.script: deque[str] = deque()
        self.default = "valid"
        self.winner = "A"
        self.delay = delay
        self.inspect = inspect
        self.retry_after = retry_after
        self.timeout_sleep = timeout_sleep
        self.reset = "1s"
        self.usage = (1200, 40, 0)
        self.huge_bytes = 50 * 1024 * 1024
        self.drip_interval = 0.05
        # Batch endpoints: files, batches (each answers "in progress" on its first status read).
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_cancel_keeps = 1  # results a cancelled batch still returns
        self.batch_calls: list[str] = []  # "METHOD path?query", as received
        self.batch_lines: list[dict[str, Any]] = []  # the JSONL lines of OpenAI-style batch input files
        # Checked on every batch call when set (Azure): the api-key header, the api-version query.
        self.batch_api_key: str | None = None
        self.batch_api_version: str | None = None
        # A model that refuses parameters whenever they are sent: top-level body key → the 400's
        # message ("image" refuses the image input itself). Checked before the script.
        self.refuse: dict[str, str] = {}
        self.requests: list[Received] = []
        self.problems: list[str] = []
        # The labels a verdict request's images must carry, in order (a pairwise study without a
        # reference sends two); a checklist request (a QUESTIONS block) must carry CHECKLIST_LABELS.
        self.expect_labels: list[str] = list(LABELS)
        # A checklist judge: question id -> (answer, evidence) for the valid reply; default yes.
        self.checklist_answer: Any = lambda qid, question: ("yes", f"seen: {question[:30]}")
        self.in_flight = 0  # model requests being answered now, and the most there ever were at once
        self.peak_in_flight = 0
        self.holding = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                if provider._is_batch(self.path):
                    provider._batch(self, "POST")
                else:
                    provider._handle(self)

            def do_GET(self) -> None:
                provider._batch(self, "GET")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def root_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- handling -----------------------------------------------------------------------------
    def _next(self) -> str:
        with self._lock:
            return self.script.popleft() if self.script else self.default

    def _parse(self, path: str, headers: dict[str, str], body: bytes) -> Received:
        got = Received(path=path, headers=headers, body=body, at=time.monotonic())
        data = json.loads(body)
        got.data = data
        content = _user_parts(path, data)
        texts: list[str] = []
        pending_label: str | None = None
        for part in content:
            kind = part.get("type") or ("text" if "text" in part else "inline_data" if "inline_data" in part else None)
            if kind in ("text", "input_text"):
                if part["text"] in ALL_LABELS:
                    pending_label = part["text"]
                else:
                    texts.append(part["text"])
                continue
            if kind == "image_url":
                url = part["image_url"]["url"]
                mime, b64 = url.split(";base64,", 1)
                mime = mime.removeprefix("data:")
            elif kind == "image":
                mime, b64 = part["source"]["media_type"], part["source"]["data"]
            elif kind == "input_image":
                mime, b64 = part["image_url"].split(";base64,", 1)
                mime = mime.removeprefix("data:")
            elif kind == "inline_data":
                mime, b64 = part["inline_data"]["mime_type"], part["inline_data"]["data"]
            else:
                self.problems.append(f"unexpected content part {kind!r}")
                continue
            if pending_label is None:
                self.problems.append("an image without a label before it")
            got.labels.append(pending_label or "?")
            pending_label = None
            got.mimes.append(mime)
            if self.inspect:
                name, neutral, size = _classify(base64.b64decode(b64))
                got.images.append(name)
                got.neutralized.append(neutral)
                got.sizes.append(size)
        got.prompt = "\n".join(texts)
        questions = _questions(got.prompt)
        if questions is not None:  # a checklist call: one rendering, its questions, no axes
            got.questions = questions
            if got.labels != CHECKLIST_LABELS:
                self.problems.append(f"images labelled {got.labels}, expected {CHECKLIST_LABELS}")
            if self.inspect and got.images and got.images[0] == "reference":
                self.problems.append("a checklist call was sent the reference image")
            return got
        if got.labels != self.expect_labels:
            self.problems.append(f"images labelled {got.labels}, expected {self.expect_labels}")
        if self.inspect and got.images and self.expect_labels[0] == "REFERENCE" and got.images[0] != "reference":
            self.problems.append(f"first image is {got.images[0]}, not the reference")
        if self.inspect and "REFERENCE" not in self.expect_labels and "reference" in got.images:
            self.problems.append("a call without a reference was sent the reference image")
        axes = _active_axes(got.prompt)
        if axes is None:
            self.problems.append("no ACTIVE_AXES JSON array in the prompt")
        else:
            got.active_axes = axes
            for axis in axes:
                if set(axis) != {"id", "scope", "description", "targets"}:
                    self.problems.append(f"ACTIVE_AXES entry with keys {sorted(axis)}")
        return got

    def _refused(self, body: bytes) -> str:
        """The first parameter of ``refuse`` this request sends, or ""."""
        if not self.refuse:
            return ""
        try:
            data = json.loads(body)
        except ValueError:
            return ""
        for name in self.refuse:
            if (name == "image" and b"image_url" in body) or (isinstance(data, dict) and name in data):
                return name
        return ""

    def checklist_text(self, behaviour: str, questions: list[dict[str, Any]]) -> str:
        """A checklist reply to ``questions``; the ``cl_*`` behaviours break it in one way each."""
        answers = []
        for q in questions:
            answer, evidence = self.checklist_answer(q["id"], q["question"])
            answers.append({"id": q["id"], "answer": answer, "evidence": evidence})
        if behaviour == "cl_malformed":
            return '{"answers": [{"id": "Q1", "answer": "yes", "evidence": "x"}'
        if behaviour == "cl_no_evidence":
            del answers[-1]["evidence"]
        elif behaviour == "cl_unknown_answer":
            answers[0]["answer"] = "maybe"
        elif behaviour == "cl_extra_key":
            answers[0]["confidence"] = 3
        elif behaviour == "cl_missing_question":
            answers = answers[:-1]
        elif behaviour == "fenced":
            return "```json\n" + json.dumps({"answers": answers}) + "\n```"
        return json.dumps({"answers": answers})

    def reply_text(self, behaviour: str, axes: list[str]) -> str:
        scores = [{"id": a, "score": 1} for a in axes]
        answer = {"winner": self.winner, "confidence": 4, "reason": "keeps the table", "axes": scores}
        if behaviour == "fenced":
            return "```json\n" + json.dumps(answer) + "\n```"
        if behaviour == "wrong_order":
            answer["axes"] = list(reversed(scores))
        elif behaviour == "bad_confidence":
            answer["confidence"] = 7
        elif behaviour == "prose":
            return "Candidate B looks better to me."
        elif behaviour == "nul_reason":  # a JSON \u0000 escape: NUL once parsed
            answer["reason"] = "keeps\u0000the table"
        elif behaviour == "nul_raw":  # a NUL character in the reply text itself
            return "Candidate\u0000B " + json.dumps(answer)
        return json.dumps(answer)

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            self._reply(h)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length)
        headers = {k.lower(): v for k, v in h.headers.items()}
        if len(body) < length:
            # The connection ended inside the body: its sender died mid-send (the fault tests
            # SIGKILL workers). A request was begun, so it is counted, but it is not a malformed
            # one, and there is nobody to answer.
            with self._lock:
                self.requests.append(Received(path=h.path, headers=headers, body=body, at=time.monotonic(),
                                              behaviour="cut off by its sender"))
            h.close_connection = True
            return
        refused = self._refused(body)
        behaviour = f"refuse:{refused}" if refused else self._next()
        try:
            got = self._parse(h.path, headers, body)
        except Exception as exc:  # a malformed request is a test failure, reported through problems
            self.problems.append(f"unparseable request: {exc!r}")
            got = Received(path=h.path, headers=headers, body=body, at=time.monotonic())
        got.behaviour = behaviour
        with self._lock:
            self.requests.append(got)
        if self.delay:
            time.sleep(self.delay)
        if behaviour == "hold":
            self.holding.set()
            self.release.wait(120)
            behaviour = "valid"
        if behaviour == "timeout":
            time.sleep(self.timeout_sleep)
            behaviour = "valid"
        if behaviour in ("429", "500", "503", "413", "401"):
            extra = {"Retry-After": self.retry_after} if behaviour == "429" else {}
            self._send(h, int(behaviour), json.dumps({"error": {"message": behaviour}}).encode(), extra)
            return
        if behaviour == "broken":
            self._send(h, 200, b"<html>gateway</html>", {})
            return
        if behaviour == "429h":  # OpenAI and Anthropic rate-limit headers, no Retry-After
            self._send(h, 429, json.dumps({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}).encode(),
                       {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": self.reset,
                        "anthropic-ratelimit-requests-remaining": "0"})
            return
        if behaviour == "quota":
            self._send(h, 429, json.dumps({"error": {"message": "You exceeded your current quota, please check your plan.",
                                                     "type": "insufficient_quota", "code": "insufficient_quota"}}).encode(), {})
            return
        if behaviour.startswith("refuse:"):  # a 400 in the provider's words, without a structured param
            message = self.refuse[behaviour.split(":", 1)[1]]
            self._send(h, 400, json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                                     "param": None, "code": None}}).encode(), {})
            return
        if behaviour.startswith("reject:"):  # a 400 naming an unsupported parameter, OpenAI style
            param = behaviour.split(":", 1)[1]
            message = f"Unsupported parameter: '{param}' is not supported with this model."
            self._send(h, 400, json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                                     "param": param, "code": "unsupported_parameter"}}).encode(), {})
            return
        if behaviour == "image_too_large":
            self._send(h, 400, json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                       "message": "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum"}}).encode(), {})
            return
        if behaviour == "nested_envelope":
            self._send(h, 200, b"[" * 100_000 + b"]" * 100_000, {})
            return
        if behaviour == "huge":
            self._send(h, 200, b'{"choices": [{"message": {"content": "' + b"x" * (self.huge_bytes) + b'"}}]}', {})
            return
        if behaviour == "drip":
            self._drip(h, got.path)
            return
        if behaviour == "header_drip":
            self._header_drip(h, got.path)
            return
        if behaviour == "length":  # a reasoning model that spent every token thinking
            envelope = envelope_for(got.path, "")
            envelope["choices"][0]["finish_reason"] = "length"
            self._send(h, 200, json.dumps(envelope).encode(), {})
            return
        if behaviour == "nested":
            text = "[" * 100_000 + "]" * 100_000
        elif got.questions:
            text = self.checklist_text(behaviour, got.questions)
        else:
            text = self.reply_text(behaviour, [a.get("id") for a in got.active_axes])
        envelope = envelope_for(got.path, text, usage=self.usage)
        self._send(h, 200, json.dumps(envelope).encode(), {"x-request-id": f"req-{len(self.requests)}"})

    # -- batch APIs ---------------------------------------------------------------------------
    @staticmethod
    def _is_batch(path: str) -> bool:
        path = urlsplit(path).path
        return (path.endswith(("/files", "/batches", "/cancel", ":cancel", ":batchGenerateContent", "/messages/batches"))
                or "/batches/" in path)

    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A live-call answer to one batch line (checked like a live request)."""
        raw = json.dumps(body).encode()
        try:
            got = self._parse(path, {}, raw)
        except Exception as exc:
            self.problems.append(f"unparseable batch line: {exc!r}")
            got = Received(path=path, headers={}, body=raw)
        got.behaviour = "batch"
        with self._lock:
            self.requests.append(got)
        behaviour = self._next()
        if got.questions:
            text = self.checklist_text(behaviour, got.questions)
        else:
            text = self.reply_text(behaviour, [a.get("id") for a in got.active_axes])
        return envelope_for(path, text, usage=self.usage)

    def _batch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        path = parts.path
        body = h.rfile.read(int(h.headers.get("content-length") or 0)) if method == "POST" else b""
        with self._lock:
            self.batch_calls.append(f"{method} {h.path}")
        if self.batch_api_key is not None and (h.headers.get("api-key") != self.batch_api_key
                                               or h.headers.get("authorization")):
            self.problems.append(f"{method} {h.path}: not authenticated with the api-key header alone")
            return self._send(h, 401, json.dumps({"error": {"code": "401", "message": "Access denied"}}).encode(), {})
        versions = parse_qs(parts.query).get("api-version", [])
        if self.batch_api_version is not None and versions != [self.batch_api_version]:
            self.problems.append(f"{method} {h.path}: api-version {versions}, expected {self.batch_api_version}")
            return self._send(h, 404, json.dumps({"error": {"code": "404", "message": "Resource not found"}}).encode(), {})
        root = f"http://127.0.0.1:{self._server.server_address[1]}" if self._server else ""

        def send(status: int, payload: Any, raw: bytes | None = None) -> None:
            self._send(h, status, raw if raw is not None else json.dumps(payload).encode(), {})

        if method == "POST" and path.endswith("/files"):
            boundary = h.headers.get("content-type", "").split("boundary=", 1)[-1].encode()
            part = next(p for p in body.split(b"--" + boundary) if b'name="file"' in p)
            content = part.split(b"\r\n\r\n", 1)[1].removesuffix(b"\r\n")
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = content
            return send(200, {"id": file_id, "object": "file", "purpose": "batch"})
        if method == "POST" and path.endswith("/batches") and "/messages/" not in path:
            data = json.loads(body)
            lines = [json.loads(line) for line in self.files[data["input_file_id"]].splitlines() if line.strip()]
            with self._lock:
                self.batch_lines.extend(lines)
            out = [{"custom_id": line["custom_id"], "error": None, "response": {"status_code": 200,
                    "body": self._answer(line["url"], line["body"])}} for line in lines]
            batch_id = f"batch_{len(self.batches) + 1}"
            self.batches[batch_id] = {"kind": "openai", "results": out, "reads": 0, "cancelled": False}
            return send(200, {"id": batch_id, "object": "batch", "status": "validating"})
        if method == "POST" and path.endswith("/messages/batches"):
            data = json.loads(body)
            out = [{"custom_id": r["custom_id"], "result": {"type": "succeeded",
                    "message": self._answer("/v1/messages", r["params"])}} for r in data["requests"]]
            batch_id = f"msgbatch_{len(self.batches) + 1}"
            self.batches[batch_id] = {"kind": "anthropic", "results": out, "reads": 0, "cancelled": False}
            return send(200, {"id": batch_id, "type": "message_batch", "processing_status": "in_progress"})
        if method == "POST" and path.endswith(":batchGenerateContent"):
            data = json.loads(body)
            requests = data["batch"]["input_config"]["requests"]["requests"]
            out = [{"metadata": r["metadata"], "response": self._answer(":generateContent", r["request"])}
                   for r in requests]
            name = f"batches/g{len(self.batches) + 1}"
            self.batches[name] = {"kind": "gemini", "results": out, "reads": 0, "cancelled": False}
            return send(200, {"name": name, "metadata": {"state": "BATCH_STATE_PENDING"}})
        if method == "POST" and (path.endswith("/cancel") or path.endswith(":cancel")):
            key = path.rsplit("/", 2)[-2] if path.endswith("/cancel") else "batches/" + path.rsplit("/", 1)[-1].removesuffix(":cancel")
            if key not in self.batches:
                return send(404, {"error": {"message": "not found"}})
            batch = self.batches[key]
            batch["cancelled"] = True
            kept = batch["results"][: self.batch_cancel_keeps]
            if batch["kind"] == "anthropic":
                kept += [{"custom_id": r["custom_id"], "result": {"type": "canceled"}}
                         for r in batch["results"][self.batch_cancel_keeps:]]
            batch["results"] = kept
            return send(200, {"id": key})
        if method == "GET":
            if "/files/" in path and path.endswith("/content"):
                file_id = path.split("/files/", 1)[1].split("/", 1)[0]
                return send(200, None, self.files[file_id]) if file_id in self.files else send(404, {"error": {}})
            if path.endswith("/results"):
                key = path.rsplit("/", 2)[-2]
                lines = b"".join(json.dumps(r).encode() + b"\n" for r in self.batches[key]["results"])
                return send(200, None, lines)
            if path.startswith("/v1beta/"):
                key = path.removeprefix("/v1beta/")
            elif "/messages/batches/" in path:
                key = path.split("/messages/batches/", 1)[1]
            else:  # OpenAI (/v1/batches/ID), Azure (/openai/v1/batches/ID, /openai/batches/ID)
                key = path.rsplit("/batches/", 1)[-1]
            if key not in self.batches:
                return send(404, {"error": {"message": f"no batch {key}"}})
            batch = self.batches[key]
            batch["reads"] += 1
            done = batch["reads"] > 1 or batch["cancelled"]
            if batch["kind"] == "openai":
                if not done:
                    return send(200, {"id": key, "status": "in_progress"})
                file_id = f"file-out-{key}"
                self.files[file_id] = b"".join(json.dumps(r).encode() + b"\n" for r in batch["results"])
                return send(200, {"id": key, "status": "cancelled" if batch["cancelled"] else "completed",
                                  "output_file_id": file_id})
            if batch["kind"] == "anthropic":
                if not done:
                    return send(200, {"id": key, "processing_status": "in_progress"})
                return send(200, {"id": key, "processing_status": "ended",
                                  "results_url": f"{root}/v1/messages/batches/{key}/results"})
            state = "BATCH_STATE_CANCELLED" if batch["cancelled"] else "BATCH_STATE_SUCCEEDED"
            if not done:
                return send(200, {"name": key, "metadata": {"state": "BATCH_STATE_RUNNING"}})
            return send(200, {"name": key, "done": True, "metadata": {"state": state},
                              "response": {"inlinedResponses": {"inlinedResponses": batch["results"]}}})
        return send(404, {"error": {"message": f"unknown path {path}"}})

    def _drip(self, h: BaseHTTPRequestHandler, path: str) -> None:
        """A valid reply sent one byte every ``drip_interval`` seconds (each read is quick; the whole is not)."""
        payload = json.dumps(envelope_for(path, self.reply_text("valid", []))).encode()
        try:
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(payload)))
            h.end_headers()
            for i in range(len(payload)):
                h.wfile.write(payload[i : i + 1])
                h.wfile.flush()
                time.sleep(self.drip_interval)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _header_drip(self, h: BaseHTTPRequestHandler, path: str) -> None:
        """A valid reply whose status line and headers come one byte every ``drip_interval`` seconds."""
        payload = json.dumps(envelope_for(path, self.reply_text("valid", []))).encode()
        head = (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                "x-padding: " + "p" * 64 + "\r\n\r\n").encode()
        try:
            for i in range(len(head)):
                h.wfile.write(head[i : i + 1])
                h.wfile.flush()
                time.sleep(self.drip_interval)
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        h.close_connection = True

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, headers: dict[str, str]) -> None:
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(payload)))
            for k, v in headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
