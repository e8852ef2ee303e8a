"""A fake Anthropic Messages API on loopback, for driving the real `anthropic` SDK in tests.

It answers `POST /v1/messages` with real-shaped JSON (a `tool_use` content block, `stop_reason`,
`usage`), so the SDK's parsing, retries and timeouts all run for real. Tests script it:

    def test_x(fake_anthropic: FakeAnthropic) -> None:
        fake_anthropic.reply(ANSWER_TOOL, {"answer": "...", "used_passage_ids": ["a#b"]})
        fake_anthropic.fail(529, times=2)          # the next two requests get 529 first
        fake_anthropic.hang(times=1)               # the next request never answers in time
        fake_anthropic.latency_s = 0.2             # every request waits this long
        client = fake_anthropic.client(max_retries=1, timeout=2.0)
        ...
        assert fake_anthropic.requests[0].api_key == fake_anthropic.api_key

Order per request: queued failures/hangs, then a reply queued for the request's forced tool name, then
one queued for any tool, then the `responder` (a function of the request; by default a plausible,
grounded reply for the profile's tools, so whole-pipeline tests work unscripted).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec
import pytest
from anthropic import AsyncAnthropic

from provenance.profiles.outputs import ANSWER_TOOL, CHECKED_CLAIMS_TOOL, SCREEN_TOOL
from provenance.settings import Settings

FAKE_API_KEY = "sk-ant-test-0000"


class RecordedRequest(msgspec.Struct):
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]
    # When it arrived and when its reply began (time.monotonic()); None while unanswered.
    received_s: float = 0.0
    answered_s: float | None = None

    @property
    def api_key(self) -> str | None:
        """The key the client sent: `x-api-key`, or the `Authorization: Bearer` form SDK 2.x uses."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None

    @property
    def tool_name(self) -> str | None:
        """The forced tool (`tool_choice` {"type": "tool", "name": ...}), if any."""
        choice = self.body.get("tool_choice") or {}
        name = choice.get("name") if isinstance(choice, dict) else None
        return name if isinstance(name, str) else None

    @property
    def system(self) -> str:
        system = self.body.get("system", "")
        if isinstance(system, list):
            return "\n".join(block.get("text", "") for block in system if isinstance(block, dict))
        return str(system)

    @property
    def user_text(self) -> str:
        """All text of all user messages, joined."""
        parts: list[str] = []
        for message in self.body.get("messages", []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(b.get("text", "") for b in content if isinstance(b, dict))
        return "\n".join(parts)


class Reply(msgspec.Struct, kw_only=True):
    """One scripted answer. `status` != 200 sends an Anthropic-style error body instead."""

    tool_input: dict[str, Any] | None = None
    tool_name: str | None = None  # defaults to the request's forced tool
    text: str | None = None  # an extra text block before the tool_use block
    input_tokens: int = 100
    output_tokens: int = 20
    stop_reason: str = "tool_use"
    status: int = 200
    error_type: str = "api_error"
    delay_s: float = 0.0
    hang: bool = False  # never answer (until the server closes): for client timeouts
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    raw_body: bytes | None = None  # send exactly this, for malformed-response tests
    # A streamed reply (the SDK's `messages.stream`, which the profile uses) is sent as server-sent events,
    # its tool input in deltas of `delta_chars` characters, `delta_delay_s` apart; after `stall_after`
    # deltas it stops sending (until the server closes) without ending the stream.
    delta_chars: int = 12
    delta_delay_s: float = 0.0
    stall_after: int | None = None
    # After the content, whitespace deltas `delta_delay_s` apart for ever: a model that never stops.
    endless: bool = False


Responder = Callable[[RecordedRequest], Reply]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeAnthropic:
    def __init__(self, api_key: str = FAKE_API_KEY, *, require_key: bool = True) -> None:
        self.api_key = api_key
        # Like the real API, a request without the right key gets 401 (and is still recorded).
        self.require_key = require_key
        self.requests: list[RecordedRequest] = []
        self.latency_s = 0.0
        # Every streamed reply's deltas at least this far apart: a model that writes slowly.
        self.stream_delay_s = 0.0
        self.responder: Responder = default_responder
        self._failures: deque[Reply] = deque()
        self._by_tool: dict[str | None, deque[Reply]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # Hung handlers must not hold up close(): they wait on _closing and then give up.
        self._server.block_on_close = False
        self._thread = threading.Thread(
            # A short poll keeps close() quick; the default 0.5 s adds up over many tests.
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-anthropic",
            daemon=True,
        )

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- scripting ----------------------------------------------------------------------------

    def reply(self, tool: str | None, tool_input: dict[str, Any], **kwargs: Any) -> None:
        """Queue one reply for requests forcing `tool` (None: for whatever the next request asks)."""
        self.enqueue(Reply(tool_input=tool_input, **kwargs), tool=tool)

    def enqueue(self, reply: Reply, *, tool: str | None = None) -> None:
        with self._lock:
            self._by_tool.setdefault(tool, deque()).append(reply)

    def fail(self, status: int, times: int = 1, *, retry_after_ms: float = 1, **kwargs: Any) -> None:
        """The next `times` requests get HTTP `status`. A tiny retry-after keeps SDK retries fast."""
        headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
        error_type = _ERROR_TYPES.get(status, "api_error")
        with self._lock:
            for _ in range(times):
                self._failures.append(Reply(status=status, error_type=error_type, headers=headers, **kwargs))

    def hang(self, times: int = 1) -> None:
        """The next `times` requests never get an answer: the client's timeout must fire."""
        with self._lock:
            for _ in range(times):
                self._failures.append(Reply(hang=True))

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self._by_tool.clear()
        self.latency_s = 0.0
        self.stream_delay_s = 0.0
        self.responder = default_responder

    def requests_for(self, tool: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.tool_name == tool]

    # --- clients ------------------------------------------------------------------------------

    def client(self, *, timeout: float = 5.0, max_retries: int = 0) -> AsyncAnthropic:
        return AsyncAnthropic(api_key=self.api_key, base_url=self.base_url, timeout=timeout, max_retries=max_retries)

    def settings(self, base: Settings | None = None, **overrides: Any) -> Settings:
        """Settings for the anthropic profile pointed at this server."""
        values: dict[str, Any] = {
            "profile": "anthropic",
            "anthropic_api_key": self.api_key,
            "anthropic_base_url": self.base_url,
            "anthropic_max_retries": 0,
            "anthropic_timeout_s": 5.0,
            **overrides,
        }
        return (base or Settings()).with_overrides(**values)

    # --- serving ------------------------------------------------------------------------------

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._failures:
                return self._failures.popleft()
            for key in (request.tool_name, None):
                queue = self._by_tool.get(key)
                if queue:
                    return queue.popleft()
        return self.responder(request)

    def _wait(self, seconds: float) -> bool:
        """Sleep, but wake when the server closes; True when closing."""
        return self._closing.wait(seconds) if seconds > 0 else self._closing.is_set()


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            request = RecordedRequest(
                method="POST",
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body if isinstance(body, dict) else {},
                received_s=time.monotonic(),
            )
            if self.path.split("?")[0] != "/v1/messages":
                self._send(404, _error_body("not_found_error", f"no route {self.path}"))
                return
            if fake.require_key and request.api_key != fake.api_key:
                with fake._lock:
                    fake.requests.append(request)
                self._send(401, _error_body("authentication_error", "invalid x-api-key"))
                return
            reply = fake._next(request)
            if fake._wait(fake.latency_s + reply.delay_s) or reply.hang:
                fake._wait(3600)
                # No answer was sent, so this connection can't carry another request.
                self.close_connection = True
                return
            request.answered_s = time.monotonic()
            if reply.raw_body is not None:
                self._send(reply.status, reply.raw_body, reply.headers)
            elif reply.status != 200:
                self._send(reply.status, _error_body(reply.error_type, "injected failure"), reply.headers)
            elif request.body.get("stream"):
                self._stream(_message(request, reply), reply)
            else:
                self._send(200, json.dumps(_message(request, reply)).encode(), reply.headers)

        def _stream(self, message: dict[str, Any], reply: Reply) -> None:
            """The message as the Messages API streams it: its start, each block in deltas, its end."""
            self.close_connection = True
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                deltas = 0
                for event in _stream_events(message, reply.delta_chars):
                    if reply.endless and event["type"] == "content_block_stop":
                        filler = {"type": "input_json_delta", "partial_json": " "}
                        while not fake._wait(max(reply.delta_delay_s, fake.stream_delay_s)):
                            more = {"type": "content_block_delta", "index": event["index"], "delta": filler}
                            self.wfile.write(f"event: content_block_delta\ndata: {json.dumps(more)}\n\n".encode())
                            self.wfile.flush()
                        return
                    if event["type"] == "content_block_delta":
                        if reply.stall_after is not None and deltas >= reply.stall_after:
                            fake._wait(3600)
                            return
                        if fake._wait(max(reply.delta_delay_s, fake.stream_delay_s)):
                            return
                        deltas += 1
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a bound, or a cancel)

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", f"req_fake_{len(fake.requests)}")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout): nothing to tell it

    return Handler


def _error_body(error_type: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": error_type, "message": message}}).encode()


_counter = iter(range(1, 1 << 62))


def _message(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    n = next(_counter)
    content: list[dict[str, Any]] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    if reply.tool_input is not None:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_fake_{n:08d}",
                "name": reply.tool_name or request.tool_name or "tool",
                "input": reply.tool_input,
            }
        )
    message = {
        "id": f"msg_fake_{n:08d}",
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model", "claude-haiku-4-5"),
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }
    return message


def _stream_events(message: dict[str, Any], chars: int) -> Iterator[dict[str, Any]]:
    """The events the Messages API streams `message` as."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            text = block["text"]
            for at in range(0, len(text), chars):
                delta = {"type": "text_delta", "text": text[at : at + chars]}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        else:
            yield {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            raw = json.dumps(block["input"])
            for at in range(0, len(raw), chars):
                delta = {"type": "input_json_delta", "partial_json": raw[at : at + chars]}
                yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    end = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield {"type": "message_delta", "delta": end, "usage": {"output_tokens": usage["output_tokens"]}}
    yield {"type": "message_stop"}


# --- the default responder: grounded, plausible answers for the profile's tools ------------------

# Attribute values may contain ">" (headings are "Chapter > Section"), so the tag ends at its line's end.
PASSAGE_TAG = re.compile(r'<passage n="\d+" id="([^"]*)"[^\n]*>\n(.*?)\n</passage>', re.DOTALL)
_ANSWER = re.compile(r"<answer>\n(.*?)\n</answer>", re.DOTALL)


def _first_sentence(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("-* ").strip()
        if line and not line.startswith("#"):
            return re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    return ""


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def default_responder(request: RecordedRequest) -> Reply:
    """Answers as a well-behaved model would on easy inputs: quotes the first passage, supports it."""
    user = request.user_text
    passages = PASSAGE_TAG.findall(user)
    tool = request.tool_name
    if tool == SCREEN_TOOL:
        injected = re.search(r"ignore (all |any )?(previous|prior) instructions|system prompt", user, re.I)
        return Reply(tool_input={"label": "injection" if injected else "ok", "confidence": 0.9})
    if tool == ANSWER_TOOL:
        if not passages:
            return Reply(tool_input={"answer": "", "used_passage_ids": []})
        pid, text = passages[0]
        return Reply(tool_input={"answer": _first_sentence(text), "used_passage_ids": [pid]})
    if tool == CHECKED_CLAIMS_TOOL:
        match = _ANSWER.search(user)
        claims = []
        for claim in _sentences(match.group(1)) if match else []:
            support = [pid for pid, text in passages if claim.rstrip(".") in text]
            claims.append(
                {
                    "claim": claim,
                    "supported_probability": 0.95 if support else 0.05,
                    "supporting_passage_ids": support,
                    "relevance_probability": 0.95 if support else 0.05,
                }
            )
        return Reply(tool_input={"claims": claims})
    return Reply(status=400, error_type="invalid_request_error")


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started fake Messages API; requests made to it are in `.requests`. Closed after the test."""
    fake = FakeAnthropic().start()
    try:
        yield fake
    finally:
        fake.close()


def wait_for_requests(fake: FakeAnthropic, count: int, timeout_s: float = 5.0) -> None:
    """Block until the server has seen `count` requests (for tests that race a hung call)."""
    deadline = time.monotonic() + timeout_s
    while len(fake.requests) < count and time.monotonic() < deadline:
        time.sleep(0.01)
