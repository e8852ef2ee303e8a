"""The documents table's statements (db/migrations/014_documents.sql): uploads kept whole."""

from __future__ import annotations

import datetime as dt

import msgspec

from provenance.store.pool import Pooled


class Document(msgspec.Struct, frozen=True):
    corpus: str
    id: str
    file_name: str
    format: str
    bytes: int
    sha256: str
    added_at: dt.datetime | None = None  # None until it is stored


class DocumentStore(Pooled):
    async def documents(self, corpus: str) -> list[Document]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT corpus, id, file_name, format, bytes, sha256, added_at FROM documents WHERE corpus = $1"
                " ORDER BY added_at, id",
                corpus,
            )
        return [Document(**dict(r)) for r in rows]

    async def originals(self, corpus: str) -> list[tuple[Document, bytes]]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT corpus, id, file_name, format, bytes, sha256, added_at, original FROM documents"
                " WHERE corpus = $1 ORDER BY added_at, id",
                corpus,
            )
        return [(Document(**{k: v for k, v in dict(r).items() if k != "original"}), bytes(r["original"])) for r in rows]

    async def with_sha(self, corpus: str, sha256: str) -> Document | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT corpus, id, file_name, format, bytes, sha256, added_at FROM documents"
                " WHERE corpus = $1 AND sha256 = $2 LIMIT 1",
                corpus,
                sha256,
            )
        return None if row is None else Document(**dict(row))

    async def add(self, doc: Document, original: bytes) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO documents (corpus, id, file_name, format, bytes, sha256, original)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                doc.corpus,
                doc.id,
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
