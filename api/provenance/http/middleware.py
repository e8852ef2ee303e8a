"""What wraps every request: the request id, the body deadline, the check of the URL's strings
(provenance.http.inputs), the request log line and the security headers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from typing import Any

import structlog
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send

from provenance.http.exceptions import error_response
from provenance.http.inputs import url_problem
from provenance.logs import get_logger

log = get_logger("provenance.http")

# The page's policy: its own scripts and styles only, plus Turnstile's script and frame.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' https://challenges.cloudflare.com; "
    "frame-src https://challenges.cloudflare.com; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"strict-origin-when-cross-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=(), usb=(), interest-cohort=()"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def _request_id(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The request's X-Request-ID when it sent a sane one (8 to 64 letters, digits and hyphens), else a new one."""
    for name, value in headers:
        if name == b"x-request-id":
            incoming = value.decode("latin-1")
            if 8 <= len(incoming) <= 64 and incoming.replace("-", "").isalnum():
                return incoming
            break
    return uuid.uuid4().hex


def request_middleware(read_timeout_s: float) -> Any:
    """One middleware, as one layer costs about 20 µs a request on the cached path, for three jobs:

    - the request id: every request gets one (or keeps a sane incoming X-Request-ID), bound to its log
      lines and echoed back, with a Server-Timing header saying how long the server held the request;
    - the body deadline: a request body must arrive within `read_timeout_s` of the headers, so a client
      trickling its body (slowloris) is cut off with a 408 and its connection closed, instead of holding
      a connection and a task forever. Once the body is complete, `receive` is left alone. (Headers are
      bounded before the app is called: api/provenance/http/uvicorn_protocols.py.)
    - the URL's strings: a query string or path parameter that holds a control character or a percent-escape
      that is not UTF-8 is answered with a 400 naming it (provenance.http.inputs.url_problem). Litestar runs
      an app's middleware once the route is found, so the parameters have their route's names.
    """

    def middleware(app: ASGIApp) -> ASGIApp:
        async def handle(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            exchange = _Exchange(scope, receive, send, read_timeout_s)
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(request_id=exchange.request_id)
            try:
                # After routing, so the path's parameters are parsed and named; before any handler reads them.
                problem = url_problem(scope)
                if problem is None:
                    await app(scope, exchange.receive, exchange.send)
                else:
                    await error_response(problem)(scope, exchange.receive, exchange.send)
            finally:
                log.info(
                    "request",
                    method=scope.get("method"),
                    path=scope.get("path"),
                    status=exchange.status,
                    ms=round((time.perf_counter() - exchange.started) * 1000, 2),
                )
                structlog.contextvars.clear_contextvars()

        return handle

    return middleware


class _Exchange:
    """One HTTP request's side of the middleware: its id, its clock, the body deadline on `receive` and the
    headers added on `send`."""

    __slots__ = (
        "_receive",
        "_send",
        "body_done",
        "deadline",
        "read_timeout_s",
        "request_id",
        "scope",
        "started",
        "status",
    )

    def __init__(self, scope: Scope, receive: Receive, send: Send, read_timeout_s: float) -> None:
        self.scope, self._receive, self._send = scope, receive, send
        self.request_id = _request_id(scope["headers"])
        scope.setdefault("state", {})["request_id"] = self.request_id
        self.started = time.perf_counter()
        self.status = 0
        self.read_timeout_s = read_timeout_s
        # asyncio.timeout_at, not wait_for: no task per receive, one timer handle.
        self.deadline = asyncio.get_running_loop().time() + read_timeout_s
        self.body_done = False

    async def receive(self) -> ReceiveMessage:
        if self.body_done:
            return await self._receive()
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self._receive()
        except TimeoutError:
            log.warning("request body too slow", path=self.scope.get("path"), timeout_s=self.read_timeout_s)
            # Connection: close makes the server drop the socket once the 408 is sent.
            raise HTTPException(
                status_code=408,
                detail=f"the request body did not arrive within {self.read_timeout_s:g}s",
                headers={"Connection": "close"},
            ) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_done = True
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            # Server-Timing (W3C): the time this server held the request before it answered, which a
            # browser's network panel shows and a client can tell apart from its own queueing.
            held_ms = (time.perf_counter() - self.started) * 1000
            message["headers"] = [
                *message.get("headers", []),
                (b"x-request-id", self.request_id.encode()),
                (b"server-timing", f"app;dur={held_ms:.1f}".encode()),
            ]
        await self._send(message)


async def security_headers(message: Message, scope: Scope) -> None:
    """A `before_send` hook, so every response gets these, the router's own 404s and 405s included.

    The schema viewers under /schema load their scripts from a CDN, so they go without the CSP; the
    page, the API and the OpenAPI document itself carry it.
    """
    if message["type"] != "http.response.start":
        return
    headers = list(message.get("headers", []))
    present = {name.lower() for name, _ in headers}
    extra = list(SECURITY_HEADERS)
    path = str(scope.get("path", ""))
    if not path.startswith("/schema") or path.endswith((".json", ".yaml", ".yml")):
        extra.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
    headers.extend((name, value) for name, value in extra if name not in present)
    message["headers"] = headers
