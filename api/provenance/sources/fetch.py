"""One page fetched politely and defensively: every way it can go wrong is a `Fetched` with a reason, never
an exception that stops the crawl.

- Politeness, per host: at most `concurrency` requests at once, and their starts `delay_s` apart (or
  robots.txt's Crawl-delay, when longer), measured from one start to the next, with 10% to spare.
- Redirects are followed by hand, only on the same origin, at most `max_redirects`; a loop or a redirect
  to another origin fails the page (`redirect-loop`, `redirect-cross-origin`).
- Each request has `page_timeout_s` from sending to its last byte, so a slow drip fails (`too-slow`); a body
  past `max_page_bytes` fails as soon as it is (`too-large`), whatever Content-Length claimed.
- Only HTML, PDF and Word bodies are read (`content-type` otherwise).
- Every connection is opened by `guard.GuardedBackend`: to a public address only, the one it checked.
- Invalid TLS fails (`tls`) unless the source is `insecure`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

import httpcore
import httpx

from provenance.settings import SourcesSettings
from provenance.sources.guard import GuardedBackend, PrivateAddress, Resolve, check_public, system_resolve
from provenance.sources.robots import USER_AGENT
from provenance.sources.urls import canonical, origin

Kind = Literal["html", "pdf", "docx"]
KINDS: dict[str, Kind] = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
}


@dataclass(frozen=True)
class Fetched:
    url: str  # where the body came from, after same-origin redirects
    status: int | None  # None: no response (refused before sending, timed out, network failure)
    failure: str | None = None  # a reason code, None when a body or a 304 came back
    detail: str = ""
    kind: Kind | None = None
    body: bytes = b""
    charset: str | None = None  # as the Content-Type named it
    etag: str | None = None
    last_modified: str | None = None
    elapsed_ms: float = 0.0

    @property
    def not_modified(self) -> bool:
        return self.status == 304

    @property
    def gone(self) -> bool:
        return self.status in (404, 410)


@dataclass
class _Gate:
    """One host's turn-taking: a semaphore for concurrency, and the earliest time the next request may
    start."""

    slots: asyncio.Semaphore
    last_start: float = float("-inf")
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose connections `GuardedBackend` opens. httpx takes no
    network backend, so its pool is replaced by one built the same way with ours."""

    def __init__(self, backend: GuardedBackend, *, insecure: bool, max_connections: int) -> None:
        super().__init__(verify=not insecure, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=not insecure, trust_env=False),
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            network_backend=backend,
        )


class Fetcher:
    def __init__(self, settings: SourcesSettings, *, insecure: bool = False, resolve: Resolve = system_resolve) -> None:
        self.settings = settings
        self.crawl_delay = 0.0  # robots.txt's, once read
        self.requests = 0
        self._resolve = resolve
        self._gates: dict[str, _Gate] = {}
        backend = GuardedBackend(allow_private=settings.allow_private, resolve=resolve)
        self._client = httpx.AsyncClient(
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
            timeout=httpx.Timeout(settings.page_timeout_s),
            transport=_GuardedTransport(backend, insecure=insecure, max_connections=2 * settings.concurrency),
            trust_env=False,  # a proxy from the environment would hide which address is really fetched
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    @asynccontextmanager
    async def _turn(self, url: str) -> AsyncIterator[None]:
        host = origin(url)
        gate = self._gates.setdefault(host, _Gate(asyncio.Semaphore(self.settings.concurrency)))
        async with gate.slots:
            async with gate.lock:
                # Read at each turn, not fixed at the last one: robots.txt's Crawl-delay, learnt from the
                # first request, already spaces the second.
                wait = gate.last_start + self.interval() - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                gate.last_start = time.monotonic()
            yield

    def interval(self) -> float:
        """The least time between two requests' starts to one host: 10% over the delay, so that the rate a
        server sees, arrivals jittered by the network and the scheduler, stays under the one configured (a
        0.1 s delay spaced exactly let 11 requests reach the test server within one second)."""
        return max(self.settings.delay_s, self.crawl_delay) * 1.1

    async def fetch(
        self, url: str, *, etag: str | None = None, last_modified: str | None = None, any_type: bool = False
    ) -> Fetched:
        """`any_type`: robots.txt and sitemaps, whose bodies are read whatever their type (`kind` None)."""
        started = time.monotonic()
        result = await self._follow(url, etag, last_modified, any_type)
        return _with_elapsed(result, started)

    async def refused(self, url: str) -> str | None:
        """Why `url` may not be fetched at all (a private address), or None: asked of the start URL before
        robots.txt, so that a refused site is one outcome and no request. Each connection checks again."""
        if self.settings.allow_private:
            return None
        try:
            await check_public(url, self._resolve)
        except PrivateAddress as exc:
            return str(exc)
        return None

    async def _follow(self, url: str, etag: str | None, last_modified: str | None, any_type: bool) -> Fetched:
        chain = [url]
        current = url
        for _hop in range(self.settings.max_redirects + 1):
            headers = {}
            if current == url:  # validators belong to the page they came from, not to a redirect's target
                if etag:
                    headers["If-None-Match"] = etag
                if last_modified:
                    headers["If-Modified-Since"] = last_modified
            async with self._turn(current):
                result = await self._one(current, headers, any_type)
            if not isinstance(result, str):
                return result
            target = canonical(result, current)
            if target is None or origin(target) != origin(url):
                return Fetched(current, 302, "redirect-cross-origin", f"redirected to {result}")
            if target in chain:
                return Fetched(current, 302, "redirect-loop", " -> ".join([*chain, target]))
            chain.append(target)
            current = target
        return Fetched(current, 302, "redirect-limit", f"more than {self.settings.max_redirects} redirects")

    async def _one(self, url: str, headers: dict[str, str], any_type: bool) -> Fetched | str:
        """A response, or the Location it redirects to."""
        self.requests += 1
        limit = self.settings.max_page_bytes
        try:
            async with asyncio.timeout(self.settings.page_timeout_s):
                async with self._client.stream("GET", url, headers=headers) as response:
                    status = response.status_code
                    # By status and Location, not `is_redirect`, which counts 304 Not Modified as one.
                    if status in (301, 302, 303, 307, 308) and "Location" in response.headers:
                        return str(response.headers["Location"])
                    etag, modified = response.headers.get("ETag"), response.headers.get("Last-Modified")
                    if status == 304:
                        return Fetched(url, status, etag=etag, last_modified=modified)
                    if status >= 400:
                        return Fetched(url, status, f"http-{status}", response.reason_phrase)
                    ctype = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                    kind = KINDS.get(ctype)
                    if kind is None and not any_type:
                        return Fetched(url, status, "content-type", ctype or "no Content-Type", etag=etag)
                    declared = response.headers.get("Content-Length", "")
                    if declared.isdigit() and int(declared) > limit:
                        return Fetched(url, status, "too-large", f"{declared} bytes declared, limit {limit}")
                    body = bytearray()
                    async for piece in response.aiter_bytes():
                        body += piece
                        if len(body) > limit:
                            return Fetched(url, status, "too-large", f"over {limit} bytes")
                    return Fetched(
                        url,
                        status,
                        None,
                        kind=kind,
                        body=bytes(body),
                        charset=response.charset_encoding,
                        etag=etag,
                        last_modified=modified,
                    )
        except PrivateAddress as exc:
            return Fetched(url, None, "private-address", str(exc))
        except TimeoutError:
            return Fetched(url, None, "too-slow", f"not complete within {self.settings.page_timeout_s} s")
        except httpx.ConnectError as exc:
            if _tls(exc):
                return Fetched(url, None, "tls", _first_line(exc))
            return Fetched(url, None, "network", _first_line(exc))
        except httpx.HTTPError as exc:
            return Fetched(url, None, "network", f"{type(exc).__name__}: {_first_line(exc)}")


def _tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__


def _with_elapsed(fetched: Fetched, started: float) -> Fetched:
    from dataclasses import replace

    return replace(fetched, elapsed_ms=round((time.monotonic() - started) * 1000, 1))
