"""The one data-access module: every SQL statement the service runs lives here, with bind parameters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec
import numpy as np


class PassageRow(msgspec.Struct, frozen=True):
    id: str
    source: str
    heading: str
    position: int
    text: str
    token_count: int
    content_hash: str


class StoredPassage(msgspec.Struct, frozen=True):
    id: str
    source: str
    heading: str
    text: str
    token_count: int
    embedding_model: str


class ScoredPassage(msgspec.Struct, frozen=True):
    id: str
    source: str
    heading: str
    text: str
    score: float


class CorpusState(msgspec.Struct, frozen=True):
    version: str
    embedding_model: str
    fingerprint: str
    passage_count: int
    files: list[dict[str, Any]]
    ingested_at: dt.datetime


class Store:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    # --- health & corpus ---------------------------------------------------------------------

    async def ping(self) -> int:
        async with self.pool.acquire() as conn:
            count: int = await conn.fetchval("SELECT count(*) FROM passages")
            return count

    async def corpus_state(self) -> CorpusState | None:
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT version, embedding_model, fingerprint, passage_count, files::text AS files,"
                " ingested_at FROM corpus_state WHERE singleton"
            )
        if row is None:
            return None
        return CorpusState(
            version=row["version"],
            embedding_model=row["embedding_model"],
            fingerprint=row["fingerprint"],
            passage_count=row["passage_count"],
            files=msgspec.json.decode(row["files"]),
            ingested_at=row["ingested_at"],
        )

    async def passage(self, passage_id: str) -> StoredPassage | None:
        async with self.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT id, source, heading, text, token_count, embedding_model FROM passages WHERE id = $1",
                passage_id,
            )
        return None if row is None else StoredPassage(**dict(row))

    async def passages_by_ids(self, ids: Sequence[str]) -> list[StoredPassage]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, source, heading, text, token_count, embedding_model FROM passages"
                " WHERE id = ANY($1::text[])",
                list(ids),
            )
        return [StoredPassage(**dict(r)) for r in rows]

    async def stored_hashes(self) -> dict[str, tuple[str, str]]:
        """passage id -> (content hash, embedding model), to skip re-embedding unchanged passages."""
        async with self.pool.acquire() as conn:
            rows = await conn.fetch("SELECT id, content_hash, embedding_model FROM passages")
        return {r["id"]: (r["content_hash"], r["embedding_model"]) for r in rows}

    async def replace_corpus(
        self,
        rows: Sequence[PassageRow],
        embeddings: dict[str, np.ndarray],
        model: str,
        version: str,
        fingerprint: str,
        files: list[dict[str, Any]],
    ) -> tuple[int, int]:
        """Make the passages table equal `rows` in one transaction; returns (upserted, deleted).

        Rows without a new embedding keep their stored one (their content hash is unchanged).
        An interrupted call leaves the previous corpus version intact: nothing commits until the end.
        """
        keep = [r.id for r in rows]
        async with self.pool.acquire() as conn, conn.transaction():
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM passages WHERE NOT (id = ANY($1::text[])) RETURNING 1)"
                " SELECT count(*) FROM d",
                keep,
            )
            new_rows = [r for r in rows if r.id in embeddings]
            await conn.executemany(
                """
                INSERT INTO passages
                    (id, source, heading, position, text, token_count, embedding, embedding_model, content_hash)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                ON CONFLICT (id) DO UPDATE SET
                    source = EXCLUDED.source, heading = EXCLUDED.heading, position = EXCLUDED.position,
                    text = EXCLUDED.text, token_count = EXCLUDED.token_count, embedding = EXCLUDED.embedding,
                    embedding_model = EXCLUDED.embedding_model, content_hash = EXCLUDED.content_hash,
                    updated_at = now()
                """,
                [
                    (
                        r.id,
                        r.source,
                        r.heading,
                        r.position,
                        r.text,
                        r.token_count,
                        embeddings[r.id],
                        model,
                        r.content_hash,
                    )
                    for r in new_rows
                ],
            )
            # Unchanged passages may still have moved within their file.
            await conn.executemany(
                "UPDATE passages SET position = $2, heading = $3 WHERE id = $1 AND (position <> $2 OR heading <> $3)",
                [(r.id, r.position, r.heading) for r in rows if r.id not in embeddings],
            )
            await conn.execute(
                """
                INSERT INTO corpus_state (singleton, version, embedding_model, fingerprint, passage_count, files)
                VALUES (true, $1, $2, $3, $4, $5::jsonb)
                ON CONFLICT (singleton) DO UPDATE SET
                    version = EXCLUDED.version, embedding_model = EXCLUDED.embedding_model,
                    fingerprint = EXCLUDED.fingerprint, passage_count = EXCLUDED.passage_count,
                    files = EXCLUDED.files, ingested_at = now()
                """,
                version,
                model,
                fingerprint,
                len(rows),
                msgspec.json.encode(files).decode(),
            )
        return len(new_rows), int(deleted)

    async def ensure_hnsw_index(self) -> bool:
        """Create the HNSW index (idempotent); returns True when it had to be built."""
        async with self.pool.acquire() as conn:
            exists = await conn.fetchval("SELECT to_regclass('passages_embedding_hnsw') IS NOT NULL")
            if exists:
                return False
            await conn.execute(
                "CREATE INDEX IF NOT EXISTS passages_embedding_hnsw ON passages"
                " USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
            return True

    # --- retrieval -----------------------------------------------------------------------------

    async def vector_search(self, query: np.ndarray, k: int) -> list[ScoredPassage]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, source, heading, text, 1 - (embedding <=> $1) AS score"
                " FROM passages ORDER BY embedding <=> $1 LIMIT $2",
                query,
                k,
            )
        return [ScoredPassage(**dict(r)) for r in rows]

    async def text_search(self, question: str, k: int) -> list[ScoredPassage]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                """
                WITH q AS (
                    -- OR of the question's own lexemes: websearch_to_tsquery would AND them.
                    SELECT to_tsquery('english', coalesce((
                        SELECT string_agg(quote_literal(lexeme), ' | ')
                        FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS lexeme
                    ), '')) AS query
                )
                SELECT id, source, heading, text, ts_rank_cd(tsv, q.query) AS score
                FROM passages, q
                WHERE tsv @@ q.query
                ORDER BY score DESC, id
                LIMIT $2
                """,
                question,
                k,
            )
        return [ScoredPassage(**dict(r)) for r in rows]

    async def embeddings_for(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, embedding FROM passages WHERE id = ANY($1::text[])", list(ids)
            )
        return {r["id"]: np.asarray(r["embedding"], dtype=np.float32) for r in rows}
