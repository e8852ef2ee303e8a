"""A corpus's site sources synced (issue 46): each crawled with what the last sync kept of each page, the new
and changed pages' text kept as documents of their source, the removed ones dropped, and the corpus rebuilt once
for all its sites, through the same staging area and switch as every job, only when something changed. The
folder ingest under `rebuild` embeds only passages it has no vector for, so an unchanged page costs nothing but
its 304.

A page's document is Markdown made from the extracted blocks, at `{source id}/{URL path}.md`: its passages
are `{source id}/{path}#{slug}`, never the raw URL (`://` and `#` don't belong in `/passages/{id}`). A page
that failed keeps its document and its last `Known` (the corpus keeps its last good version of it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import msgspec

from provenance.ingest.documents.blocks import Block
from provenance.jobs.queue import JobProgress
from provenance.settings import Settings
from provenance.sources import crawl as crawler
from provenance.sources.extract import CHOSEN, Extractor
from provenance.store.sites import SitePage, SitePageStore
from provenance.store.sources import Document, Source, SourceStore

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
SOURCE_ID_CHARS = 12


class Rebuilds(Protocol):
    """What a sync needs of the job that runs it (`jobs.worker.JobRun`)."""

    corpus: str
    documents: SourceStore
    progress: JobProgress
    cited: dict[str, tuple[str, dict[str, str]]]  # pages not stored yet, by document path: (URL, heading ids)

    async def rebuild(self, docs: list[tuple[Document, bytes]]) -> dict[str, str]: ...


class SiteSync(msgspec.Struct, kw_only=True, rename="camel"):
    source: str  # the start URL
    pages: int
    embedded: int  # pages whose text was (re-)embedded
    unchanged: int
    removed: int
    failed: int

    def line(self) -> str:
        return (
            f"{self.pages} pages: {self.embedded} embedded, {self.unchanged} unchanged, {self.removed} removed, "
            f"{self.failed} failed"
        )


def page_path(source_id: str, url: str) -> str:
    """The page's document path: the source's id, then the URL's path (and query) as safe path components."""
    parts = urlsplit(url)
    path = "/".join(_UNSAFE.sub("_", p) for p in parts.path.split("/") if p) or "index"
    if parts.query:
        path += "_" + _UNSAFE.sub("_", parts.query)[:80]
    return f"{source_id[:SOURCE_ID_CHARS]}/{path}.md"


def page_markdown(title: str | None, blocks: list[Block]) -> bytes:
    lines = [f"{'#' * b.level} {b.text}" if b.level else b.text for b in blocks]
    if title and not any(b.level == 1 for b in blocks):
        lines.insert(0, f"# {title.split(' | ')[0]}")
    return "\n\n".join(lines).encode()


def citation_source(url: str, anchors: dict[str, str], heading: str) -> str:
    """What a crawled passage's citation shows: the page's URL, with its section's heading id as the fragment
    where the page gives one (the heading path's last part is the section's own heading)."""
    anchor = anchors.get(heading.rsplit(" > ", 1)[-1])
    return f"{url}#{anchor}" if anchor else url


async def citations(run: Rebuilds) -> Callable[[str, str], str]:
    """The ingest's `cite` for a rebuild of the job's corpus: crawled pages cite their URL, the rest their path."""
    pages = {**await SitePageStore(run.documents.pool, run.documents.acquire_timeout_s).cited(run.corpus), **run.cited}

    def cite(path: str, heading: str) -> str:
        page = pages.get(path)
        return path if page is None else citation_source(page[0], page[1], heading)

    return cite


def crawl_source(source: Source) -> crawler.Source:
    options = source.options
    return crawler.Source(
        url=source.location,
        sitemap=options.get("sitemap"),
        prefix=options.get("prefix"),
        max_pages=options.get("maxPages"),
        insecure=bool(options.get("insecure", False)),
    )


@dataclass
class SitePlan:
    """One source crawled, nothing written yet: what its sync will store, drop and keep."""

    source: Source
    report: SiteSync
    outcomes: list[dict[str, Any]]
    new: list[tuple[Document, bytes]] = field(default_factory=list)  # new and changed pages' documents
    kept: list[SitePage] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # URLs the site no longer has
    removed_ids: set[str] = field(default_factory=set)  # their documents
    files: list[crawler.SiteFile] = field(default_factory=list)  # robots.txt and sitemaps, for the next sync


async def crawl_site(run: Rebuilds, source: Source, settings: Settings, *, extractor: Extractor = CHOSEN) -> SitePlan:
    """The source crawled with what its last sync kept of each page; nothing stored."""
    pages_store = SitePageStore(run.documents.pool, run.documents.acquire_timeout_s)
    before = {p.url: p for p in await pages_store.pages(source.id)}
    last = {u: p.known for u, p in before.items()}
    files = await pages_store.files(source.id)
    result = await crawler.crawl(crawl_source(source), last, settings.sources, extractor, files=files)
    report = SiteSync(
        source=source.location,
        pages=result.count("new", "changed", "unchanged", "removed", "failed"),
        embedded=result.count("new", "changed"),
        unchanged=result.count("unchanged"),
        removed=result.count("removed"),
        failed=result.count("failed"),
    )
    outcomes = [
        {"fileName": p.url, "status": p.outcome, **({"reason": p.reason} if p.reason else {}),
         **({"detail": p.detail} if p.detail else {})}
        for p in result.pages
    ]  # fmt: skip
    plan = SitePlan(source, report, outcomes, files=result.files)
    for page in result.pages:
        previous = before.get(page.url)
        if page.outcome == "removed":
            plan.gone.append(page.url)
            if previous is not None and previous.document_id:
                plan.removed_ids.add(previous.document_id)
            continue
        known = page.known()
        if known is None:
            continue
        document_id = previous.document_id if previous else None
        if page.outcome in ("new", "changed"):
            data = page_markdown(page.title, page.blocks)
            path = page_path(source.id, page.url)
            document_id = hashlib.sha256(f"{source.id}:{page.url}".encode()).hexdigest()[:12]
            doc = Document(
                run.corpus, document_id, source.id, path, page.url, "markdown", len(data),
                hashlib.sha256(data).hexdigest(),
            )  # fmt: skip
            plan.new.append((doc, data))
            run.cited[path] = (page.url, page.anchors)
        anchors = page.anchors or (previous.anchors if previous else {})
        plan.kept.append(SitePage(page.url, document_id, known, anchors))
    return plan


async def sync_corpus(run: Rebuilds, settings: Settings) -> tuple[list[SiteSync], list[dict[str, Any]]]:
    """Every site source of the job's corpus crawled, one after another, then the corpus rebuilt once with what
    all of them changed (not once per site: each rebuild re-reads every document of the corpus), and each
    source's pages kept."""
    plans = [await crawl_site(run, s, settings) for s in await run.documents.sources(run.corpus) if s.kind == "site"]
    new = [n for plan in plans for n in plan.new]
    removed_ids = {i for plan in plans for i in plan.removed_ids}
    if new or removed_ids:
        replaced = {d.id for d, _ in new} | removed_ids
        others = [(d, b) for d, b in await run.documents.originals(run.corpus) if d.id not in replaced]
        unread = await run.rebuild([*others, *new])
        await run.documents.remove(run.corpus, sorted(removed_ids))
        for doc, data in new:
            if doc.id not in unread:
                await run.documents.add(doc, data)
    pages_store = SitePageStore(run.documents.pool, run.documents.acquire_timeout_s)
    for plan in plans:
        await pages_store.keep(plan.source.id, plan.kept, plan.gone)
        await pages_store.keep_files(plan.source.id, plan.files)
        await run.documents.synced(plan.source.id)
    return [p.report for p in plans], [o for p in plans for o in p.outcomes]
