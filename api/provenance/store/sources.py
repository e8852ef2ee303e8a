"""Sources and their documents (db/migrations/014_documents.sql, 015_sources.sql): where a corpus's documents
come from (an upload, a folder, a crawled site), and each document kept whole so that a corpus can be rebuilt
when the reader or the embedder changes. A source is synced as a whole: its documents are the ones it holds
now, and another source's are never touched."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any, Literal

import msgspec

from provenance.store.pool import MAINTENANCE_TIMEOUT_S, Pooled

SourceKind = Literal["upload", "folder", "site"]


class Source(msgspec.Struct, frozen=True):
    id: str
    corpus: str
    kind: SourceKind
    location: str  # a folder's absolute path, a site's start URL; '' for a corpus's uploads
    options: dict[str, Any]
    created_at: dt.datetime
    synced_at: dt.datetime | None


class Document(msgspec.Struct, frozen=True):
    corpus: str
    id: str
    source_id: str
    # The document's name in its corpus, unique there: its passages are `{path}#{slug}`.
    path: str
    file_name: str
    format: str
    bytes: int
    sha256: str
    added_at: dt.datetime | None = None  # None until it is stored


def source_id(corpus: str, kind: SourceKind, location: str) -> str:
    """A source's id, the same wherever it is computed (015_sources.sql made the uploads' ones this way)."""
    if kind == "upload":
        return hashlib.md5(f"upload:{corpus}".encode()).hexdigest()
    return hashlib.md5(f"{kind}:{corpus}:{location}".encode()).hexdigest()


_SOURCE = "id, corpus, kind, location, options::text AS options, created_at, synced_at"
_DOCUMENT = "corpus, id, source_id, path, file_name, format, bytes, sha256, added_at"


def _source(row: Any) -> Source:
    return Source(**{**dict(row), "options": msgspec.json.decode(row["options"])})


class SourceStore(Pooled):
    # --- sources ---------------------------------------------------------------------------------------

    async def add_source(
        self, corpus: str, kind: SourceKind, location: str = "", options: dict[str, Any] | None = None
    ) -> Source:
        """The corpus's source of this kind and location, made if it is new; a known one gets `options` when
        they are given and keeps its own otherwise."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "INSERT INTO sources (id, corpus, kind, location, options) VALUES ($1, $2, $3, $4, $5::jsonb)"
                " ON CONFLICT (corpus, kind, location) DO UPDATE SET options ="
                " CASE WHEN $6 THEN EXCLUDED.options ELSE sources.options END"
                f" RETURNING {_SOURCE}",
                source_id(corpus, kind, location),
                corpus,
                kind,
                location,
                msgspec.json.encode(options or {}).decode(),
                options is not None,
            )
        return _source(row)

    async def sources(self, corpus: str) -> list[Source]:
        async with self._conn() as conn:
            rows = await conn.fetch(f"SELECT {_SOURCE} FROM sources WHERE corpus = $1 ORDER BY created_at, id", corpus)
        return [_source(r) for r in rows]

    async def source(self, source_id: str) -> Source | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(f"SELECT {_SOURCE} FROM sources WHERE id = $1", source_id)
        return None if row is None else _source(row)

    async def synced(self, source_id: str) -> None:
        async with self._conn() as conn:
            await conn.execute("UPDATE sources SET synced_at = now() WHERE id = $1", source_id)

    async def remove_source(self, source_id: str) -> int:
        """The source and its documents, in one transaction: how many documents. Their passages go at the corpus's
        next switch: a removal that must take them out at once runs as a job (`JobRun.remove_source`)."""
        async with self._conn(transaction=True) as conn:
            removed = await conn.fetchval(
                "WITH d AS (DELETE FROM documents WHERE source_id = $1 RETURNING 1) SELECT count(*) FROM d",
                source_id,
            )
            await conn.execute("DELETE FROM sources WHERE id = $1", source_id)
        return int(removed)

    # --- documents -------------------------------------------------------------------------------------

    async def documents(self, corpus: str, source_id: str | None = None) -> list[Document]:
        """The corpus's documents, or one source's."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {_DOCUMENT} FROM documents WHERE corpus = $1 AND ($2::text IS NULL OR source_id = $2)"
                " ORDER BY added_at, id",
                corpus,
                source_id,
            )
        return [Document(**dict(r)) for r in rows]

    async def passage_counts(self, corpus: str) -> dict[str, tuple[int, int | None]]:
        """document path -> (its served passages, its last page or None): a document's passages are those whose
        source is its path."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT source, count(*) AS passages, max(last_page) AS pages FROM passages WHERE corpus = $1"
                " GROUP BY source",
                corpus,
            )
        return {r["source"]: (int(r["passages"]), r["pages"]) for r in rows}

    async def document(self, corpus: str, document_id: str) -> Document | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT {_DOCUMENT} FROM documents WHERE corpus = $1 AND id = $2", corpus, document_id
            )
        return None if row is None else Document(**dict(row))

    async def originals(self, corpus: str) -> list[tuple[Document, bytes]]:
        """Every document of the corpus with its bytes: what its passages are built from."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {_DOCUMENT}, original FROM documents WHERE corpus = $1 ORDER BY path",
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [(Document(**{k: v for k, v in dict(r).items() if k != "original"}), bytes(r["original"])) for r in rows]

    async def with_sha(self, corpus: str, sha256: str, source_id: str | None = None) -> Document | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT {_DOCUMENT} FROM documents WHERE corpus = $1 AND sha256 = $2"
                " AND ($3::text IS NULL OR source_id = $3) ORDER BY added_at, id LIMIT 1",
                corpus,
                sha256,
                source_id,
            )
        return None if row is None else Document(**dict(row))

    async def add(self, doc: Document, original: bytes) -> None:
        """Keep a document; one already at its path in the corpus is replaced (a folder's file that changed)."""
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO documents (corpus, id, source_id, path, file_name, format, bytes, sha256, original)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                " ON CONFLICT (corpus, path) DO UPDATE SET id = EXCLUDED.id, source_id = EXCLUDED.source_id,"
                " file_name = EXCLUDED.file_name, format = EXCLUDED.format, bytes = EXCLUDED.bytes,"
                " sha256 = EXCLUDED.sha256, original = EXCLUDED.original, added_at = now()",
                doc.corpus,
                doc.id,
                doc.source_id,
                doc.path,
                doc.file_name,
                doc.format,
                doc.bytes,
                doc.sha256,
                original,
            )

    async def remove(self, corpus: str, ids: list[str]) -> int:
        async with self._conn() as conn:
            removed = await conn.fetchval(
                "WITH d AS (DELETE FROM documents WHERE corpus = $1 AND id = ANY($2::text[]) RETURNING 1)"
                " SELECT count(*) FROM d",
                corpus,
                ids,
            )
        return int(removed)
