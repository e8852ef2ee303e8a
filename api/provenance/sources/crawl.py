"""A site crawled into pages, each with its outcome: what a sync job calls (`crawl`).

The walk starts from the sitemap when there is one (the source's own, else robots.txt's `Sitemap:` lines,
else `/sitemap.xml`): its pages on the origin, under the prefix, are the crawl, and a page the last sync
kept that the sitemap no longer lists is removed without a request. Without a sitemap the walk is breadth
first from the start URL over same-origin links under the prefix, to `max_depth` hops; pages the last sync
kept that no link reached any more are re-checked at the end, so a page is removed only when the site
says it is gone (404, 410).

Every request of a re-sync is conditional (the last ETag and Last-Modified): the pages', and robots.txt's and
the sitemaps' (`files`, whose kept body a 304 reads again). A page's 200 whose content hashes as before is
`unchanged` too: only `new` and `changed` pages need embedding. A page that fails keeps what the last sync
stored (the job must not drop it): `failed` is never `removed`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections import deque
from collections.abc import Mapping
from typing import Literal

import msgspec
from msgspec.structs import replace

from provenance.errors import UnreadableDocument
from provenance.ingest.documents.blocks import Block
from provenance.settings import SourcesSettings
from provenance.sources.extract import CHOSEN, Extractor, extract
from provenance.sources.fetch import Fetched, Fetcher
from provenance.sources.guard import Resolve, system_resolve
from provenance.sources.robots import Robots
from provenance.sources.sitemap import sitemap_locs
from provenance.sources.urls import canonical, default_prefix, origin, path_and_query, within

Outcome = Literal["new", "changed", "unchanged", "removed", "failed", "skipped"]
StartedFrom = Literal["sitemap", "links"]
MAX_SITEMAPS = 20


class Source(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    sitemap: str | None = None
    prefix: str | None = None  # a path; None: the start URL's folder
    max_pages: int | None = None  # None: SOURCES_MAX_PAGES
    insecure: bool = False


# What a page's body reads as, by version: raised when a change to reading pages changes what some page reads
# as, so that a re-sync asks once, unconditionally, for every page an earlier version read (a 304 would keep
# its old reading). 2: HTML read in its right encoding, not UTF-8 taken for Latin-1.
READ_VERSION = 2


class Known(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """What the last sync kept of a page, by its canonical URL."""

    url: str
    content_hash: str
    etag: str | None = None
    last_modified: str | None = None
    read_version: int = 1  # kept before versions were: read again
    links: list[str] = []  # its same-origin links, canonical: the walk goes on through a 304
    # A URL whose page names another as its rel=canonical: kept too, so that a re-sync asks for it
    # conditionally and, on a 304, knows it for a duplicate without reading it again.
    duplicate_of: str | None = None


class SiteFile(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """robots.txt or a sitemap as a sync last read it, so that the next one asks for it conditionally and reads
    this body again on a 304."""

    url: str
    body: bytes
    etag: str | None = None
    last_modified: str | None = None


class Page(msgspec.Struct, kw_only=True, rename="camel"):
    url: str
    outcome: Outcome
    reason: str | None = None  # a code: robots, query-trap, too-large, http-500, duplicate, ...
    detail: str = ""
    depth: int = 0
    status: int | None = None
    title: str | None = None
    content_hash: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    links: list[str] = []
    anchors: dict[str, str] = {}
    extractor: str | None = None
    fetch_ms: float = 0.0
    # New and changed pages only: what the chunker reads. Not on the wire.
    blocks: list[Block] = msgspec.field(default_factory=list)

    def known(self) -> Known | None:
        if self.reason == "duplicate" and self.etag is not None:
            return Known(url=self.url, content_hash="", etag=self.etag, last_modified=self.last_modified,
                         links=self.links, duplicate_of=self.detail, read_version=READ_VERSION)  # fmt: skip
        if self.content_hash is None:
            return None
        return Known(
            url=self.url,
            content_hash=self.content_hash,
            etag=self.etag,
            last_modified=self.last_modified,
            links=self.links,
            read_version=READ_VERSION,
        )


class Crawl(msgspec.Struct, kw_only=True, rename="camel"):
    source: Source
    started_from: StartedFrom
    sitemap: str | None
    pages: list[Page]
    requests: int
    elapsed_ms: float
    files: list[SiteFile] = []  # robots.txt and the sitemaps read, with their validators: the next crawl's `files`

    def count(self, *outcomes: Outcome) -> int:
        return sum(1 for p in self.pages if p.outcome in outcomes)

    def summary(self) -> str:
        """The sync's line before embedding: pages that are the site's, by what becomes of them."""
        stored = self.count("new", "changed", "unchanged", "removed", "failed")
        return (
            f"{stored} pages: {self.count('new', 'changed')} to embed, {self.count('unchanged')} unchanged, "
            f"{self.count('removed')} removed, {self.count('failed')} failed"
        )


def content_hash(blocks: list[Block]) -> str:
    digest = hashlib.sha256()
    for block in blocks:
        digest.update(f"{block.level}\x1f{block.text}\x1e".encode())
    return digest.hexdigest()


class _Walk:
    def __init__(
        self,
        source: Source,
        known: Mapping[str, Known],
        settings: SourcesSettings,
        extractor: Extractor,
        resolve: Resolve = system_resolve,
        files: Mapping[str, SiteFile] | None = None,
    ) -> None:
        self.source = source
        self.known = known
        self.files_before = files or {}
        self.files: dict[str, SiteFile] = {}
        self.settings = settings
        self.extractor = extractor
        start = canonical(source.url)
        if start is None:
            raise ValueError(f"not an http(s) URL: {source.url!r}")
        self.start = start
        self.origin = origin(start)
        self.prefix = source.prefix or default_prefix(start)
        self.max_pages = source.max_pages or settings.max_pages
        self.fetcher = Fetcher(settings, insecure=source.insecure, resolve=resolve)
        self.pages: dict[str, Page] = {}  # by canonical URL: each URL's one outcome
        self.queries: dict[str, set[str]] = {}
        self.admitted: set[str] = set()
        self.fetched = 0

    def record(self, page: Page) -> None:
        self.pages.setdefault(page.url, page)

    async def robots(self) -> Robots | Fetched:
        """The site's robots.txt, or the failure that says the site can't be reached (invalid TLS, no
        answer): then no page can be either, and the start page fails with that reason."""
        got = await self.file(self.origin + "/robots.txt")
        if got.failure is None and got.status == 200:
            return Robots.parse(got.body.decode("utf-8", "replace"))
        if got.status is not None and 400 <= got.status < 500:
            return Robots.missing()
        if got.status is None and got.failure in ("tls", "network", "too-slow", "private-address"):
            return got
        return Robots.unreadable()

    async def sitemap_pages(self, robots: Robots) -> tuple[str | None, list[str]]:
        candidates = (
            [self.source.sitemap] if self.source.sitemap else [*robots.sitemaps(), self.origin + "/sitemap.xml"]
        )
        for candidate in dict.fromkeys(candidates):
            urls = await self._sitemap_urls(candidate)
            if urls:
                return candidate, urls
        return None, []

    async def _sitemap_urls(self, url: str) -> list[str]:
        pending, pages, read = [url], [], 0
        while pending and read < MAX_SITEMAPS:
            target = canonical(pending.pop(0))
            if target is None or origin(target) != self.origin:
                continue
            read += 1
            got = await self.file(target)
            if got.failure is not None or got.status != 200:
                continue
            found, children = sitemap_locs(got.body)
            pages += found
            pending += children
        return list(dict.fromkeys(u for raw in pages if (u := canonical(raw)) and within(u, self.origin, self.prefix)))

    async def file(self, url: str) -> Fetched:
        """robots.txt or a sitemap, asked conditionally when the last sync kept it (as every page is): a 304 reads
        the kept body again, as the 200 it stands for. What came with validators is kept for the next sync."""
        before = self.files_before.get(url)
        got = await self.fetcher.fetch(
            url, etag=before.etag if before else None, last_modified=before.last_modified if before else None,
            any_type=True,
        )  # fmt: skip
        if got.not_modified and before is not None:
            got = dataclasses.replace(
                got, status=200, body=before.body, etag=got.etag or before.etag,
                last_modified=got.last_modified or before.last_modified,
            )  # fmt: skip
        if got.failure is None and got.status == 200 and (got.etag or got.last_modified):
            self.files[url] = SiteFile(url=url, body=got.body, etag=got.etag, last_modified=got.last_modified)
        return got

    def admit(self, url: str, depth: int, robots: Robots) -> bool:
        """Whether the walk fetches `url`; a refusal is recorded as the URL's outcome."""
        if url in self.pages or url in self.admitted:
            return False
        if not robots.allowed(url):
            self.record(Page(url=url, outcome="skipped", reason="robots", depth=depth))
            return False
        path, query = path_and_query(url)
        if query:
            seen = self.queries.setdefault(path, set())
            if query not in seen and len(seen) >= self.settings.max_queries_per_path:
                self.record(Page(url=url, outcome="skipped", reason="query-trap", depth=depth))
                return False
            seen.add(query)
        if self.fetched >= self.max_pages:
            self.record(Page(url=url, outcome="skipped", reason="page-limit", depth=depth))
            return False
        self.fetched += 1
        self.admitted.add(url)
        return True

    async def page(self, url: str, depth: int) -> Page:
        before = self.known.get(url)
        # Conditional unless an earlier version read the page: then its body is read again, whole.
        ask = before if before is not None and before.read_version == READ_VERSION else None
        got = await self.fetcher.fetch(
            url, etag=ask.etag if ask else None, last_modified=ask.last_modified if ask else None
        )
        base = Page(url=url, outcome="failed", depth=depth, status=got.status, fetch_ms=got.elapsed_ms)
        settled = _without_a_new_body(base, got, before)
        if settled is not None:
            return settled
        assert got.kind is not None  # a fetch without a kind was settled above
        if canonical(got.url) != url:  # a same-origin redirect: the page is stored where it ended
            target = canonical(got.url)
            return replace(base, outcome="skipped", reason="redirected", detail=str(target), links=[str(target)])
        try:
            read = extract(got.body, got.kind, self.extractor, got.charset)
        except UnreadableDocument as exc:
            return replace(base, outcome="failed", reason="unreadable", detail=str(exc))
        links = list(dict.fromkeys(u for href in read.links if (u := canonical(href, url))))
        declared = canonical(read.canonical, url) if read.canonical else None
        if declared and declared != url and within(declared, self.origin, self.prefix):
            return replace(
                base, outcome="skipped", reason="duplicate", detail=declared, links=[declared],
                etag=got.etag, last_modified=got.last_modified,
            )  # fmt: skip
        digest = content_hash(read.blocks)
        unchanged = before is not None and before.content_hash == digest
        outcome: Outcome = "unchanged" if unchanged else "changed" if before is not None else "new"
        return replace(
            base,
            outcome=outcome,
            title=read.title,
            content_hash=digest,
            etag=got.etag,
            last_modified=got.last_modified,
            links=[u for u in links if origin(u) == self.origin],
            anchors=read.anchors,
            extractor=read.extractor,
            blocks=[] if unchanged else read.blocks,
        )

    async def run(self) -> Crawl:
        started = time.monotonic()
        sitemap: str | None = None
        listed: list[str] = []
        try:
            refused = await self.fetcher.refused(self.start)
            if refused is not None:  # not even robots.txt is asked of a private address
                self.record(Page(url=self.start, outcome="failed", reason="private-address", detail=refused))
                return self.result(started, None, [])
            robots = await self.robots()
            if isinstance(robots, Fetched):
                self.record(Page(url=self.start, outcome="failed", reason=robots.failure, detail=robots.detail))
                return self.result(started, None, [])
            self.fetcher.crawl_delay = robots.crawl_delay()
            sitemap, listed = await self.sitemap_pages(robots)
            if listed:
                stored = {url for url, k in self.known.items() if k.duplicate_of is None}
                for url in stored - set(listed):
                    self.record(Page(url=url, outcome="removed", reason="not-in-sitemap"))
                await self.level([(u, 0) for u in listed], robots, follow=False)
            else:
                await self.level([(self.start, 0)], robots, follow=True)
                unreached = [(u, 0) for u in self.known if u not in self.pages]
                await self.level(unreached, robots, follow=False)
        finally:
            await self.fetcher.aclose()
        return self.result(started, sitemap, listed)

    def result(self, started: float, sitemap: str | None, listed: list[str]) -> Crawl:
        return Crawl(
            source=self.source,
            started_from="sitemap" if listed else "links",
            sitemap=sitemap,
            pages=list(self.pages.values()),
            requests=self.fetcher.requests,
            elapsed_ms=round((time.monotonic() - started) * 1000, 1),
            files=list(self.files.values()),
        )

    async def level(self, seeds: list[tuple[str, int]], robots: Robots, *, follow: bool) -> None:
        """Breadth first: a queue in discovery order, worked by as many workers as one host may be sent
        requests at once."""
        queue: deque[tuple[str, int]] = deque()
        for url, depth in seeds:
            if self.admit(url, depth, robots):
                queue.append((url, depth))

        async def worker() -> None:
            while queue:
                url, depth = queue.popleft()
                page = await self.page(url, depth)
                self.record(page)
                if not follow and page.reason not in ("duplicate", "redirected"):
                    continue
                for link in page.links:
                    if not within(link, self.origin, self.prefix) or link in self.pages or link in self.admitted:
                        continue
                    if depth + 1 > self.settings.max_depth:
                        self.record(Page(url=link, outcome="skipped", reason="depth-limit", depth=depth + 1))
                    elif self.admit(link, depth + 1, robots):
                        queue.append((link, depth + 1))

        # A worker whose queue ran dry ends while another may still add to it: keep going until both are done
        # and nothing is left.
        while queue:
            await asyncio.gather(*(worker() for _ in range(self.settings.concurrency)))


async def crawl(
    source: Source,
    known: Mapping[str, Known],
    settings: SourcesSettings,
    extractor: Extractor = CHOSEN,
    resolve: Resolve = system_resolve,
    *,
    files: Mapping[str, SiteFile] | None = None,
) -> Crawl:
    """`resolve`: how host names are resolved (getaddrinfo); a test plays a rebinding name server with it.
    `files`: robots.txt and the sitemaps as the last crawl read them (its `files`), by URL."""
    return await _Walk(source, known, settings, extractor, resolve, files).run()


def _without_a_new_body(base: Page, got: Fetched, before: Known | None) -> Page | None:
    """The page's outcome when its fetch brought no new body to read (not modified, gone, or failed), the
    last good version kept where there is one; None when there is a body to read."""
    if got.not_modified and before is not None and before.duplicate_of is not None:
        return replace(
            base, outcome="skipped", reason="duplicate", detail=before.duplicate_of, links=before.links,
            etag=got.etag or before.etag, last_modified=got.last_modified or before.last_modified,
        )  # fmt: skip
    if got.not_modified and before is not None:
        return replace(
            base,
            outcome="unchanged",
            content_hash=before.content_hash,
            etag=got.etag or before.etag,
            last_modified=got.last_modified or before.last_modified,
            links=before.links,
        )
    if got.gone and before is not None:
        if before.duplicate_of is not None:  # nothing was stored under it, so nothing is removed
            return replace(base, outcome="skipped", reason=f"http-{got.status}")
        return replace(base, outcome="removed", reason=f"http-{got.status}")
    if got.failure is not None or got.kind is None:
        failed = replace(base, outcome="failed", reason=got.failure or "no-body", detail=got.detail)
        if before is not None and before.duplicate_of is None:
            # The last good version stays: its Known goes on to the next sync as it was.
            return replace(
                failed, content_hash=before.content_hash, etag=before.etag,
                last_modified=before.last_modified, links=before.links,
            )  # fmt: skip
        return failed
    return None
