"""A crawled site's pages as the last sync kept them (db/migrations/016_site_pages.sql): each URL's `Known`
(validators, content hash, links) and the document that holds its text; and its robots.txt and sitemaps
(018_site_files.sql), with their validators and bodies."""

from __future__ import annotations

from typing import Any

import msgspec

from provenance.sources.crawl import Known, SiteFile
from provenance.store.pool import Pooled


class SitePage(msgspec.Struct, frozen=True):
    url: str
    document_id: str | None
    known: Known
    anchors: dict[str, str]


class SitePageStore(Pooled):
    async def pages(self, source_id: str) -> list[SitePage]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT url, document_id, known::text AS known, anchors::text AS anchors FROM site_pages"
                " WHERE source_id = $1 ORDER BY url",
                source_id,
            )
        return [_page(r) for r in rows]

    async def cited(self, corpus: str) -> dict[str, tuple[str, dict[str, str]]]:
        """The corpus's crawled pages by their document's path: (URL, heading ids)."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT d.path, p.url, p.anchors::text AS anchors FROM site_pages p"
                " JOIN documents d ON d.id = p.document_id AND d.source_id = p.source_id WHERE d.corpus = $1",
                corpus,
            )
        return {r["path"]: (r["url"], msgspec.json.decode(r["anchors"])) for r in rows}

    async def keep(self, source_id: str, kept: list[SitePage], gone: list[str]) -> None:
        """The sync's pages, in one transaction: `kept` written over what was, `gone` URLs forgotten."""
        async with self._conn(transaction=True) as conn:
            await conn.execute("DELETE FROM site_pages WHERE source_id = $1 AND url = ANY($2::text[])", source_id, gone)
            await conn.executemany(
                "INSERT INTO site_pages (source_id, url, document_id, known, anchors) VALUES ($1, $2, $3, $4::jsonb,"
                " $5::jsonb) ON CONFLICT (source_id, url) DO UPDATE SET document_id = EXCLUDED.document_id,"
                " known = EXCLUDED.known, anchors = EXCLUDED.anchors, synced_at = now()",
                [
                    (
                        source_id,
                        p.url,
                        p.document_id,
                        msgspec.json.encode(p.known).decode(),
                        msgspec.json.encode(p.anchors).decode(),
                    )
                    for p in kept
                ],
            )

    async def files(self, source_id: str) -> dict[str, SiteFile]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT url, etag, last_modified, body FROM site_files WHERE source_id = $1", source_id
            )
        return {r["url"]: SiteFile(**{**dict(r), "body": bytes(r["body"])}) for r in rows}

    async def keep_files(self, source_id: str, files: list[SiteFile]) -> None:
        """The files this sync read, in place of the last sync's (one it no longer read is forgotten)."""
        async with self._conn(transaction=True) as conn:
            await conn.execute("DELETE FROM site_files WHERE source_id = $1", source_id)
            await conn.executemany(
                "INSERT INTO site_files (source_id, url, etag, last_modified, body) VALUES ($1, $2, $3, $4, $5)",
                [(source_id, f.url, f.etag, f.last_modified, f.body) for f in files],
            )


def _page(row: Any) -> SitePage:
    return SitePage(
        url=row["url"],
        document_id=row["document_id"],
        known=msgspec.json.decode(row["known"], type=Known),
        anchors=msgspec.json.decode(row["anchors"]),
    )
