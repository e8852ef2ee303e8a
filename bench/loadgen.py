"""A lean HTTP/1.1 load generator for loopback: raw keep-alive sockets, one prepared request per question.

httpx spends about a millisecond of the client's CPU on each request, so on two cores a load generator
built on it measures itself once the server answers in a few milliseconds (the cached path). This one
writes pre-encoded requests and reads responses by Content-Length, which costs tens of microseconds,
and leaves the cores to the server. It speaks only what our servers answer with: HTTP/1.1 with a
Content-Length (Litestar always sends one for a JSON body).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from bench.common import percentile


@dataclass
class Hits:
    """What one load run saw: round trips of the 200s, status codes, and a marker count in the bodies."""

    concurrency: int
    wall_s: float = 0.0
    round_trip_ms: list[float] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)
    marked: int = 0  # bodies holding `marker` (e.g. '"cached":true')
    body_bytes: int = 0

    @property
    def ok(self) -> int:
        return self.codes.get(200, 0)

    @property
    def throughput(self) -> float:
        return self.ok / self.wall_s if self.wall_s else 0.0

    def rt(self, q: float) -> float:
        return percentile(self.round_trip_ms, q)


def ask_request(host: str, port: int, question: str, path: str = "/ask") -> bytes:
    body = msgspec.json.encode({"question": question})
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode("ascii") + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    code = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
            break
    else:
        raise RuntimeError(f"response without Content-Length: {head[:200]!r}")
    return code, await reader.readexactly(length)


async def _run_load(
    host: str, port: int, prepared: Sequence[bytes], concurrency: int, requests: int, marker: bytes, offset: int
) -> Hits:
    """`requests` POST /ask from `concurrency` connections, the prepared requests in turn."""
    hits = Hits(concurrency)
    counter = iter(range(requests))

    async def client() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for i in counter:
                started = time.perf_counter()
                writer.write(prepared[(offset + i) % len(prepared)])
                code, body = await _read_response(reader)
                elapsed = (time.perf_counter() - started) * 1000
                hits.codes[code] = hits.codes.get(code, 0) + 1
                if code == 200:
                    hits.round_trip_ms.append(elapsed)
                    hits.body_bytes += len(body)
                    if marker and marker in body:
                        hits.marked += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    hits.wall_s = time.perf_counter() - started
    return hits


def load(
    url_host: str,
    port: int,
    questions: Sequence[str],
    concurrency: int,
    requests: int,
    *,
    marker: bytes = b"",
    offset: int = 0,
) -> Hits:
    """`requests` POST /ask with the questions in turn, from `concurrency` keep-alive connections, on an
    event loop of its own (uvloop when installed: the client's share of the cores shrinks)."""
    prepared = [ask_request(url_host, port, q) for q in questions]
    coro = _run_load(url_host, port, prepared, concurrency, requests, marker, offset)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
