"""uvicorn's HTTP/1.1 protocols with a deadline for a request's headers.

uvicorn bounds neither how long a connection may sit open without sending a request nor how long a
request's headers may take to arrive, so a client that opens sockets and sends nothing, or trickles its
headers a byte at a time (slowloris), holds them open for as long as it likes. The body is bounded by the
app (`request_middleware`); the headers come before the app is called, so they are bounded here: a
connection is closed when REQUEST_HEADER_TIMEOUT_S passes between its opening, or the first byte of a
request on a kept-alive connection, and the end of that request's headers.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, ClassVar, Literal

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from provenance.logs import get_logger
from provenance.settings import load_settings

log = get_logger("provenance.http")

HttpImpl = Literal["auto", "h11", "httptools"]


@functools.cache
def _configured_timeout_s() -> float:
    return load_settings().server.request_header_timeout_s


class _HeaderDeadline(asyncio.Protocol):
    """The deadline, mixed in before one of uvicorn's protocol classes.

    Both of them start a request's cycle (`self.cycle`) once its headers are parsed, and mark it
    `response_complete` when the response is sent; between the two the headers are done, and outside
    them the connection is waiting for a request's headers.
    """

    # None: REQUEST_HEADER_TIMEOUT_S from the environment, as each `provenance serve` worker reads it.
    header_timeout_s: ClassVar[float | None] = None

    # uvicorn's, declared for the type checker.
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    _header_timer: asyncio.TimerHandle | None = None
    _header_bytes = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # A connection that never sends a byte is bounded too, from the moment it opens.
        self._start_header_clock()

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_headers():
            if self._header_timer is None:
                # The first bytes of the next request on a kept-alive connection (while idle it is
                # uvicorn's keep-alive timeout that bounds it).
                self._start_header_clock()
            self._header_bytes += len(data)
        super().data_received(data)
        upgraded = self.transport.get_protocol() is not self
        if upgraded or not self._waiting_for_headers():
            self._stop_header_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_clock()
        super().connection_lost(exc)

    def _waiting_for_headers(self) -> bool:
        return self.cycle is None or bool(self.cycle.response_complete)

    def _start_header_clock(self) -> None:
        self._stop_header_clock()
        self._header_bytes = 0
        timeout_s = self.header_timeout_s if self.header_timeout_s is not None else _configured_timeout_s()
        self._header_timer = self.loop.call_later(timeout_s, self._headers_too_slow, timeout_s)

    def _stop_header_clock(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self, timeout_s: float) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._waiting_for_headers():
            return
        if self._header_bytes:
            log.warning("request headers too slow; connection closed", timeout_s=timeout_s, bytes=self._header_bytes)
        else:
            # Browsers open spare connections they may never use: closing one is routine.
            log.debug("connection idle without a request; closed", timeout_s=timeout_s)
        # Closed without a response, as nginx does on client_header_timeout: there is no request to answer.
        self.transport.close()


class H11HeaderDeadline(_HeaderDeadline, H11Protocol):
    """uvicorn's h11 protocol with the header deadline."""


class HttpToolsHeaderDeadline(_HeaderDeadline, HttpToolsProtocol):
    """uvicorn's httptools protocol with the header deadline."""


def http_protocol(http: HttpImpl = "auto", header_timeout_s: float | None = None) -> type[asyncio.Protocol]:
    """The protocol class to give uvicorn as `http=`: "auto" is httptools, as uvicorn's own auto choice
    is when it is installed (it is one of our dependencies).

    Without `header_timeout_s` the class reads REQUEST_HEADER_TIMEOUT_S from the environment and can be
    sent to worker processes (a module-level class pickles by name); with it, a subclass carries the value,
    for a server in this process (tests).
    """
    base: type[_HeaderDeadline] = H11HeaderDeadline if http == "h11" else HttpToolsHeaderDeadline
    if header_timeout_s is None:
        return base
    return type(base.__name__, (base,), {"header_timeout_s": header_timeout_s, "__module__": __name__})
