"""The one data-access module: every SQL statement the service runs lives here, with bind parameters.

One store per aggregate, over the same pool: `CorpusStore` holds the corpora (passages, their state, ingest's
writes and retrieval), `GuardStore` the guards' tables (API keys, rate-limit windows, the answer cache and
the spend ledger) and `FeedbackStore` readers' verdicts and the recent responses they rate. `Store` is all
three, for what needs more than one: the running service and the CLI.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import numpy as np

from provenance.chunking import Chunk
from provenance.corpora import DEFAULT_CORPUS
from provenance.db import MAINTENANCE_TIMEOUT_S
from provenance.errors import Overloaded
from provenance.passages import ScoredPassage
from provenance.wire import PassageOut


class _Pooled:
    """A store's connections: pooled, acquired within a timeout, and dropped rather than waited on when a
    statement times out. Both stores are one of these over the same pool."""

    def __init__(self, pool: asyncpg.Pool, acquire_timeout_s: float | None = None) -> None:
        self.pool = pool
        # Bounds the wait for a connection, reconnecting included: with the database down, a request
        # fails within this time (and the app answers 503) instead of queueing behind a dead pool.
        self.acquire_timeout_s = acquire_timeout_s

    @asynccontextmanager
    async def _conn(self, *, transaction: bool = False, commit_timeout_s: float | None = None) -> AsyncIterator[Any]:
        """`async with self._conn() as conn`: a pooled connection, acquired within the timeout. With
        `transaction`, what runs in the block commits at its end, or none of it does."""
        try:
            # asyncio.timeout rather than acquire(timeout=): asyncpg's own wraps the wait in a task of its
            # own on every acquire, which showed in the cached path's profile.
            async with asyncio.timeout(self.acquire_timeout_s):
                conn = await self.pool.acquire()
        except TimeoutError:
            # Every connection open and lent out means Postgres is answering and we are asking too much
            # at once: an overload, not an outage. (A database that stops answering queries shows up here
            # too, for at most the pool's command timeout, DB_TIMEOUT_S; then those queries fail as an outage.)
            if self.pool.get_idle_size() == 0 and self.pool.get_size() >= self.pool.get_max_size():
                raise Overloaded("every database connection is busy; try again shortly", retry_after_s=2) from None
            raise
        try:
            # BEGIN and COMMIT by hand rather than conn.transaction(): its ROLLBACK would run before the
            # handler below could drop a timed-out connection, and wait out a second timeout.
            if transaction:
                await conn.execute("BEGIN")
            yield conn
            if transaction:
                await conn.execute("COMMIT", timeout=commit_timeout_s)
        except TimeoutError:
            # A statement that timed out leaves the connection waiting on a cancel request sent to the same
            # server, and anything after it (ROLLBACK, the pool's reset) queues behind that. When the
            # server has stopped answering, each would wait out another timeout: drop the connection
            # instead, so the caller fails within one. Postgres rolls back what was open when it goes, and
            # the pool opens a fresh connection when one is next needed.
            conn.terminate()
            raise
        except BaseException:
            if transaction and not conn.is_closed():
                await conn.execute("ROLLBACK")
            raise
        finally:
            await self.pool.release(conn)


# --- the corpora: passages, corpus state, ingest, retrieval ---------------------------------------


class CorpusState(msgspec.Struct, frozen=True):
    version: str
    embedding_model: str
    fingerprint: str
    passage_count: int
    files: list[dict[str, Any]]
    ingested_at: dt.datetime
    name: str = DEFAULT_CORPUS
    source_dir: str | None = None
    title: str = ""
    description: str = ""
    examples: list[dict[str, Any]] = msgspec.field(default_factory=list)


class CorpusDescription(msgspec.Struct, frozen=True):
    """What ingest stores about a corpus beside its passages."""

    name: str
    source_dir: str | None
    title: str
    description: str
    examples: list[dict[str, Any]]


class StagedState(msgspec.Struct, frozen=True):
    """What an interrupted ingest left staged for one passage."""

    content_hash: str
    embedding_model: str
    embedded: bool
    sentences_segmenter: str | None


@dataclass(frozen=True)
class Staged:
    """One passage as ingest stages it: its vector, or None where the stored one stands (same content and
    model), and its sentences' (start, end, vector), or None where the stored ones stand."""

    chunk: Chunk
    embedding: np.ndarray | None
    sentences: Sequence[tuple[int, int, np.ndarray]] | None


class RemovedCorpus(msgspec.Struct, frozen=True):
    name: str
    passages: int
    sentences: int
    cached_answers: int
    staged: int


_CORPUS_COLUMNS = (
    "name, version, embedding_model, fingerprint, passage_count, files::text AS files, ingested_at, source_dir,"
    " title, description, examples::text AS examples"
)


def _corpus_state(row: Any) -> CorpusState:
    return CorpusState(
        version=row["version"],
        embedding_model=row["embedding_model"],
        fingerprint=row["fingerprint"],
        passage_count=row["passage_count"],
        files=msgspec.json.decode(row["files"]),
        ingested_at=row["ingested_at"],
        name=row["name"],
        source_dir=row["source_dir"],
        title=row["title"],
        description=row["description"],
        examples=msgspec.json.decode(row["examples"]),
    )


# Hybrid retrieval in one statement (CorpusStore.hybrid_search): $1 query vector, $2 question, $3 corpus,
# $4 pool size per ranking, $5 the RRF constant, $6 top-k.
# A lexeme in more of a corpus's passages than this is left out of hybrid search's text query
# (db/migrations/009_common_lexemes.sql, which counts the corpora it finds with the same number).
COMMON_LEXEME_PASSAGES = 2000

# The vector ranking's ORDER BY: through the HNSW index, or exactly. The index is one over every corpus and
# yields its nearest rows before the corpus filter, so a small corpus beside a large one reads the large
# one's rows to fill its pool, and gets rows that are not its nearest: bench/exact_scan.py, 2,000 passages
# beside 100,000, hybrid search p50 82 ms through the index against 15 ms exactly, and a different top 4 for
# every question. "+ 0" is an expression the index can't serve: the corpus's own rows are read and sorted.
BY_INDEX = "embedding <=> $1"
EXACT = "(embedding <=> $1) + 0"

_HYBRID_SEARCH_SQL = """
WITH nearest AS (
    -- LIMIT before the window, so the HNSW index (or the exact sort) serves the ORDER BY and only the pool is
    -- numbered; the rows arrive in distance order, so rank follows the order the index gave.
    SELECT id, row_number() OVER (ORDER BY distance) AS rank
    FROM (
        SELECT id, embedding <=> $1 AS distance
        FROM passages
        WHERE corpus = $3
        ORDER BY {order}
        LIMIT $4
    ) pool
),
q AS MATERIALIZED (
    -- OR of the question's own lexemes: websearch_to_tsquery would AND them. A lexeme in more passages than
    -- COMMON_LEXEME_PASSAGES (db/migrations/009) is left out: ranking every passage that holds it is what
    -- made retrieval grow with the corpus. MATERIALIZED: inlined, the query was parsed again for every row
    -- it filtered (40 ms against 25 ms at 2,000 matching passages).
    SELECT to_tsquery('english', coalesce((
        SELECT string_agg(quote_literal(l.lexeme), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', $2))) AS l(lexeme)
        WHERE NOT EXISTS (SELECT 1 FROM common_lexemes c WHERE c.corpus = $3 AND c.lexeme = l.lexeme)
    ), '')) AS query
),
matched AS (
    -- Equal text ranks are common (short questions, few lexemes): id orders them, so the ranking is total.
    SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank
    FROM (
        SELECT id, ts_rank_cd(tsv, q.query) AS score
        FROM passages, q
        WHERE corpus = $3 AND tsv @@ q.query
        ORDER BY score DESC, id
        LIMIT $4
    ) pool
),
fused AS (
    -- float8 (not numeric, which 1.0 / int would be): each term is the correctly rounded double, as in the
    -- Python fusion this replaced, so the sums agree bit for bit and exact ties stay ties.
    SELECT coalesce(n.id, m.id) AS id,
        coalesce(1::float8 / ($5::int + n.rank), 0::float8) + coalesce(1::float8 / ($5::int + m.rank), 0::float8)
            AS rrf
    FROM nearest n
    FULL JOIN matched m ON m.id = n.id
),
top AS (
    -- COLLATE "C": ties go to the smaller id by code point, whatever the database's collation.
    SELECT id, rrf FROM fused ORDER BY rrf DESC, id COLLATE "C" LIMIT $6
)
SELECT p.id, p.source, p.heading, p.text, 1 - (p.embedding <=> $1) AS score,
    CASE WHEN p.first_page IS NULL THEN NULL ELSE ARRAY(SELECT generate_series(p.first_page, p.last_page)) END
        AS pages
FROM top t
JOIN passages p ON p.corpus = $3 AND p.id = t.id
ORDER BY t.rrf DESC, t.id COLLATE "C"
"""


def _both_scans(template: str) -> dict[bool, str]:
    """A search statement keyed by `exact`: its vector ranking through the index (False) or exactly (True)."""
    return {exact: template.format(order=EXACT if exact else BY_INDEX) for exact in (False, True)}


HYBRID_SEARCH_SQL = _both_scans(_HYBRID_SEARCH_SQL)
_VECTOR_SEARCH_SQL = (
    "SELECT id, source, heading, text, 1 - (embedding <=> $1) AS score,"
    " CASE WHEN first_page IS NULL THEN NULL ELSE ARRAY(SELECT generate_series(first_page, last_page))"
    " END AS pages"
    " FROM passages WHERE corpus = $3 ORDER BY {order} LIMIT $2"
)
VECTOR_SEARCH_SQL = _both_scans(_VECTOR_SEARCH_SQL)


class CorpusStore(_Pooled):
    """Passages and corpus state: what ingest writes and retrieval and the API read."""

    async def ping(self) -> int:
        async with self._conn() as conn:
            count: int = await conn.fetchval("SELECT count(*) FROM passages")
            return count

    async def corpus_state(self, corpus: str = DEFAULT_CORPUS) -> CorpusState | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(f"SELECT {_CORPUS_COLUMNS} FROM corpus_state WHERE name = $1", corpus)
        return None if row is None else _corpus_state(row)

    async def corpora(self) -> list[CorpusState]:
        async with self._conn() as conn:
            rows = await conn.fetch(f"SELECT {_CORPUS_COLUMNS} FROM corpus_state ORDER BY name")
        return [_corpus_state(r) for r in rows]

    async def corpus_versions(self) -> dict[str, str]:
        """corpus name -> version: one small read that tells a running server whether anything was ingested."""
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT name, version FROM corpus_state")
        return {r["name"]: r["version"] for r in rows}

    async def passage(self, passage_id: str, corpus: str = DEFAULT_CORPUS) -> PassageOut | None:
        """The passage as GET /passages/{id} answers it: the wire type, built straight from the row."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT id, source, heading, text, token_count, embedding_model,"
                " CASE WHEN first_page IS NULL THEN NULL ELSE ARRAY(SELECT generate_series(first_page, last_page))"
                " END AS pages"
                " FROM passages WHERE corpus = $1 AND id = $2",
                corpus,
                passage_id,
            )
        return None if row is None else PassageOut(**dict(row))

    async def passage_texts(self, limit: int, segmenter: str) -> list[tuple[str, list[tuple[int, int]]]]:
        """Up to `limit` passages' texts, each with its stored sentence spans under `segmenter` in order (empty
        where none are stored)."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT p.text, s.starts, s.ends FROM"
                " (SELECT corpus, id, text, source, position FROM passages ORDER BY source, position LIMIT $1) p"
                " LEFT JOIN LATERAL ("
                "   SELECT array_agg(u.start_char ORDER BY u.start_char) AS starts,"
                "          array_agg(u.end_char ORDER BY u.start_char) AS ends"
                "   FROM (SELECT DISTINCT start_char, end_char FROM passage_sentences"
                "         WHERE corpus = p.corpus AND passage_id = p.id AND segmenter = $2) u"
                " ) s ON true"
                " ORDER BY p.source, p.position",
                limit,
                segmenter,
            )
        return [(r["text"], list(zip(r["starts"] or (), r["ends"] or (), strict=True))) for r in rows]

    async def stored_hashes(self, corpus: str = DEFAULT_CORPUS) -> dict[str, tuple[str, str]]:
        """passage id -> (content hash, embedding model), to skip re-embedding unchanged passages."""
        return {pid: (h, m) for pid, (h, m, _) in (await self.stored_passages(corpus, "", "")).items()}

    async def stored_passages(self, corpus: str, segmenter: str, model: str) -> dict[str, tuple[str, str, bool]]:
        """passage id -> (content hash, embedding model, whether its sentences have `model`'s vectors for
        `segmenter`): what an ingest need not compute again."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT p.id, p.content_hash, p.embedding_model, EXISTS ("
                "   SELECT 1 FROM passage_sentences s WHERE s.corpus = p.corpus AND s.passage_id = p.id"
                "   AND s.segmenter = $2 AND s.embedding_model = $3 AND s.embedding IS NOT NULL"
                " ) AS has_sentences"
                " FROM passages p WHERE p.corpus = $1 ORDER BY p.id",
                corpus,
                segmenter,
                model,
                timeout=MAINTENANCE_TIMEOUT_S,  # every passage of a corpus, for ingest
            )
        return {r["id"]: (r["content_hash"], r["embedding_model"], r["has_sentences"]) for r in rows}

    # --- ingest's staging area ---------------------------------------------------------------------
    # An ingest writes its passages and sentence vectors to staged_passages / staged_sentences batch by
    # batch (`stage`), then `switch_corpus` moves them into the served tables in one transaction. Nothing
    # staged is served; an interrupted ingest leaves its rows here for the next run to reuse.

    async def staged_passages(self, corpus: str) -> dict[str, StagedState]:
        """What an interrupted ingest of `corpus` left staged, by passage id."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT id, content_hash, embedding_model, embedding IS NOT NULL AS embedded, sentences_segmenter"
                " FROM staged_passages WHERE corpus = $1",
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return {
            r["id"]: StagedState(r["content_hash"], r["embedding_model"], r["embedded"], r["sentences_segmenter"])
            for r in rows
        }

    async def stage(self, corpus: str, model: str, segmenter: str, rows: Sequence[Staged]) -> None:
        """Write one batch to the staging area (one transaction, so a batch is staged whole or not at all).

        A row without a vector keeps the one staged before for the same content and model, if any (a resumed
        ingest); a row with new sentences replaces the passage's staged sentences."""
        timeout = MAINTENANCE_TIMEOUT_S
        async with self._conn(transaction=True, commit_timeout_s=timeout) as conn:
            await conn.executemany(
                """
                INSERT INTO staged_passages AS s
                    (corpus, id, source, heading, position, text, token_count, content_hash, first_page,
                     last_page, embedding, embedding_model, sentences_segmenter)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                ON CONFLICT (corpus, id) DO UPDATE SET
                    source = EXCLUDED.source, heading = EXCLUDED.heading, position = EXCLUDED.position,
                    text = EXCLUDED.text, token_count = EXCLUDED.token_count, first_page = EXCLUDED.first_page,
                    last_page = EXCLUDED.last_page,
                    embedding = CASE WHEN EXCLUDED.embedding IS NOT NULL THEN EXCLUDED.embedding
                        WHEN s.content_hash = EXCLUDED.content_hash AND s.embedding_model = EXCLUDED.embedding_model
                        THEN s.embedding END,
                    sentences_segmenter = CASE WHEN EXCLUDED.sentences_segmenter IS NOT NULL
                        THEN EXCLUDED.sentences_segmenter
                        WHEN s.content_hash = EXCLUDED.content_hash AND s.embedding_model = EXCLUDED.embedding_model
                        THEN s.sentences_segmenter END,
                    content_hash = EXCLUDED.content_hash, embedding_model = EXCLUDED.embedding_model,
                    staged_at = now()
                """,
                [
                    (
                        corpus,
                        r.chunk.id,
                        r.chunk.source,
                        r.chunk.heading,
                        r.chunk.position,
                        r.chunk.text,
                        r.chunk.token_count,
                        r.chunk.content_hash,
                        *(r.chunk.pages or (None, None)),
                        r.embedding,
                        model,
                        segmenter if r.sentences is not None else None,
                    )
                    for r in rows
                ],
                timeout=timeout,
            )
            renewed = [r for r in rows if r.sentences is not None]
            await conn.execute(
                "DELETE FROM staged_sentences WHERE corpus = $1 AND passage_id = ANY($2::text[])",
                corpus,
                [r.chunk.id for r in renewed],
                timeout=timeout,
            )
            await conn.executemany(
                "INSERT INTO staged_sentences"
                " (corpus, passage_id, segmenter, ordinal, start_char, end_char, embedding_model, embedding)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [
                    (corpus, r.chunk.id, segmenter, i, start, end, model, vector)
                    for r in renewed
                    for i, (start, end, vector) in enumerate(r.sentences or ())
                ],
                timeout=timeout,
            )

    async def switch_corpus(
        self,
        keep: Sequence[str],
        model: str,
        segmenter: str,
        version: str,
        fingerprint: str,
        files: list[dict[str, Any]],
        about: CorpusDescription,
    ) -> tuple[int, dict[str, int]]:
        """Make the corpus's passages those staged under `keep`, in one transaction, and empty its staging
        area; other corpora are left alone. Returns (passages written, {source: passages removed}).

        Until this commits, readers see the previous version whole (passages, sentences, corpus_state and so
        the version that keys the answer cache); after, the new one whole. A large corpus takes well over
        DB_TIMEOUT_S to switch, so every statement here has the long timeout.
        """
        corpus = about.name
        timeout = MAINTENANCE_TIMEOUT_S
        keep = list(keep)
        async with self._conn(transaction=True, commit_timeout_s=timeout) as conn:
            # Rows an earlier, interrupted ingest staged for passages that no longer exist.
            await conn.execute(
                "DELETE FROM staged_passages WHERE corpus = $1 AND NOT (id = ANY($2::text[]))",
                corpus,
                keep,
                timeout=timeout,
            )
            missing = await conn.fetchval(
                "SELECT count(*) FROM unnest($2::text[]) AS k(id)"
                " WHERE NOT EXISTS (SELECT 1 FROM staged_passages s WHERE s.corpus = $1 AND s.id = k.id)",
                corpus,
                keep,
                timeout=timeout,
            )
            # A row staged without a vector stands for a stored passage of the same content and model.
            missing += await conn.fetchval(
                "SELECT count(*) FROM staged_passages s WHERE s.corpus = $1 AND s.embedding IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.corpus = s.corpus AND p.id = s.id"
                " AND p.content_hash = s.content_hash AND p.embedding_model = s.embedding_model)",
                corpus,
                timeout=timeout,
            )
            if missing:
                raise RuntimeError(f"{missing} passages of corpus {corpus} have no vector staged; nothing switched")
            removed = await conn.fetch(
                "WITH d AS (DELETE FROM passages WHERE corpus = $1 AND NOT (id = ANY($2::text[])) RETURNING source)"
                " SELECT source, count(*) AS n FROM d GROUP BY source ORDER BY source",
                corpus,
                keep,
                timeout=timeout,
            )
            # Sentences of passages whose text or vectors change, and any of another segmenter or model.
            await conn.execute(
                "DELETE FROM passage_sentences p USING staged_passages s"
                " WHERE s.corpus = $1 AND (s.embedding IS NOT NULL OR s.sentences_segmenter IS NOT NULL)"
                " AND p.corpus = s.corpus AND p.passage_id = s.id",
                corpus,
                timeout=timeout,
            )
            await conn.execute(
                "DELETE FROM passage_sentences WHERE corpus = $1"
                " AND (segmenter <> $2 OR embedding_model IS DISTINCT FROM $3)",
                corpus,
                segmenter,
                model,
                timeout=timeout,
            )
            written = await conn.fetchval(
                """
                WITH w AS (
                    INSERT INTO passages
                        (corpus, id, source, heading, position, text, token_count, embedding, embedding_model,
                         content_hash, first_page, last_page)
                    SELECT corpus, id, source, heading, position, text, token_count, embedding, embedding_model,
                        content_hash, first_page, last_page
                    FROM staged_passages WHERE corpus = $1 AND embedding IS NOT NULL
                    ON CONFLICT (corpus, id) DO UPDATE SET
                        source = EXCLUDED.source, heading = EXCLUDED.heading, position = EXCLUDED.position,
                        text = EXCLUDED.text, token_count = EXCLUDED.token_count, embedding = EXCLUDED.embedding,
                        embedding_model = EXCLUDED.embedding_model, content_hash = EXCLUDED.content_hash,
                        first_page = EXCLUDED.first_page, last_page = EXCLUDED.last_page, updated_at = now()
                    RETURNING 1
                ) SELECT count(*) FROM w
                """,
                corpus,
                timeout=timeout,
            )
            # Unchanged passages may still have moved within their file, or to other pages of it.
            await conn.execute(
                "UPDATE passages p SET position = s.position, heading = s.heading, first_page = s.first_page,"
                " last_page = s.last_page"
                " FROM staged_passages s"
                " WHERE s.corpus = $1 AND s.embedding IS NULL AND p.corpus = s.corpus AND p.id = s.id"
                " AND (p.position <> s.position OR p.heading <> s.heading"
                " OR p.first_page IS DISTINCT FROM s.first_page OR p.last_page IS DISTINCT FROM s.last_page)",
                corpus,
                timeout=timeout,
            )
            await conn.execute(
                "INSERT INTO passage_sentences"
                " (corpus, passage_id, segmenter, ordinal, start_char, end_char, embedding_model, embedding)"
                " SELECT corpus, passage_id, segmenter, ordinal, start_char, end_char, embedding_model, embedding"
                " FROM staged_sentences WHERE corpus = $1 AND segmenter = $2 AND embedding_model = $3",
                corpus,
                segmenter,
                model,
                timeout=timeout,
            )
            await conn.execute("DELETE FROM common_lexemes WHERE corpus = $1", corpus, timeout=timeout)
            if len(keep) > COMMON_LEXEME_PASSAGES:
                # A scan of the corpus's text vectors: seconds at 100k passages, once per ingest.
                await conn.execute(
                    "INSERT INTO common_lexemes (corpus, lexeme, passages) SELECT $1, word, ndoc"
                    " FROM ts_stat(format('SELECT tsv FROM passages WHERE corpus = %L', $1::text)) WHERE ndoc > $2",
                    corpus,
                    COMMON_LEXEME_PASSAGES,
                    timeout=timeout,
                )
            await conn.execute(
                """
                INSERT INTO corpus_state
                    (name, version, embedding_model, fingerprint, passage_count, files, source_dir, title,
                     description, examples)
                VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10::jsonb)
                ON CONFLICT (name) DO UPDATE SET
                    version = EXCLUDED.version, embedding_model = EXCLUDED.embedding_model,
                    fingerprint = EXCLUDED.fingerprint, passage_count = EXCLUDED.passage_count,
                    files = EXCLUDED.files, source_dir = EXCLUDED.source_dir, title = EXCLUDED.title,
                    description = EXCLUDED.description, examples = EXCLUDED.examples, ingested_at = now()
                """,
                corpus,
                version,
                model,
                fingerprint,
                len(keep),
                msgspec.json.encode(files).decode(),
                about.source_dir,
                about.title,
                about.description,
                msgspec.json.encode(about.examples).decode(),
                timeout=timeout,  # waits for the row while another ingest of this corpus commits
            )
            await conn.execute("DELETE FROM staged_passages WHERE corpus = $1", corpus, timeout=timeout)
        return int(written), {r["source"]: int(r["n"]) for r in removed}

    async def replace_corpus(
        self,
        chunks: Sequence[Chunk],
        embeddings: dict[str, np.ndarray],
        model: str,
        version: str,
        fingerprint: str,
        files: list[dict[str, Any]],
        about: CorpusDescription | None = None,
    ) -> tuple[int, dict[str, int]]:
        """Make the corpus's passages equal `chunks` (vectors given, no sentence vectors) through the staging
        area: for synthetic corpora (benchmarks, tests) whose vectors are made up rather than embedded.
        Chunks without a new embedding keep their stored one."""
        about = about or CorpusDescription(DEFAULT_CORPUS, None, "", "", [])
        await self.stage(about.name, model, "", [Staged(c, embeddings.get(c.id), None) for c in chunks])
        return await self.switch_corpus([c.id for c in chunks], model, "", version, fingerprint, files, about)

    # --- sentence vectors --------------------------------------------------------------------------

    async def sentence_vectors(
        self, corpus: str, passage_ids: Sequence[str], segmenter: str, model: str
    ) -> list[tuple[str, int, int, np.ndarray]]:
        """(passage id, start, end, vector) of each stored sentence of these passages: what the verifier reads
        instead of embedding them again."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT passage_id, start_char, end_char, embedding FROM passage_sentences"
                " WHERE corpus = $1 AND passage_id = ANY($2::text[]) AND segmenter = $3 AND embedding_model = $4"
                " AND embedding IS NOT NULL",
                corpus,
                list(passage_ids),
                segmenter,
                model,
            )
        return [(r["passage_id"], r["start_char"], r["end_char"], r["embedding"].to_numpy()) for r in rows]

    async def missing_sentences(
        self, segmenter: str, model: str, after: tuple[str, str] = ("", ""), limit: int = 256
    ) -> list[tuple[str, str, str, str]]:
        """(corpus, passage id, text, heading) of up to `limit` passages, in (corpus, id) order after `after`, whose
        sentences have no `model` vectors for `segmenter`: what a database ingested before sentence vectors
        were stored needs computed once."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT p.corpus, p.id, p.text, p.heading FROM passages p"
                " WHERE (p.corpus, p.id) > ($1, $2) AND p.embedding_model = $4 AND NOT EXISTS ("
                "   SELECT 1 FROM passage_sentences s WHERE s.corpus = p.corpus AND s.passage_id = p.id"
                "   AND s.segmenter = $3 AND s.embedding_model = $4 AND s.embedding IS NOT NULL)"
                " ORDER BY p.corpus, p.id LIMIT $5",
                *after,
                segmenter,
                model,
                limit,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [(r["corpus"], r["id"], r["text"], r["heading"]) for r in rows]

    async def count_missing_sentences(self, segmenter: str, model: str) -> int:
        async with self._conn() as conn:
            count: int = await conn.fetchval(
                "SELECT count(*) FROM passages p WHERE p.embedding_model = $2 AND NOT EXISTS ("
                "   SELECT 1 FROM passage_sentences s WHERE s.corpus = p.corpus AND s.passage_id = p.id"
                "   AND s.segmenter = $1 AND s.embedding_model = $2 AND s.embedding IS NOT NULL)",
                segmenter,
                model,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return count

    async def write_sentences(
        self, segmenter: str, model: str, rows: Sequence[tuple[str, str, Sequence[tuple[int, int, np.ndarray]]]]
    ) -> None:
        """Store the sentence vectors of served passages (corpus, passage id, [(start, end, vector)]), in one
        transaction. Adds what was missing; the passages and the corpus version are unchanged, since the
        verifier would compute the same vectors itself."""
        timeout = MAINTENANCE_TIMEOUT_S
        async with self._conn(transaction=True, commit_timeout_s=timeout) as conn:
            for corpus, passage_id, _ in rows:
                await conn.execute(
                    "DELETE FROM passage_sentences WHERE corpus = $1 AND passage_id = $2 AND segmenter = $3",
                    corpus,
                    passage_id,
                    segmenter,
                    timeout=timeout,
                )
            await conn.executemany(
                "INSERT INTO passage_sentences"
                " (corpus, passage_id, segmenter, ordinal, start_char, end_char, embedding_model, embedding)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                [
                    (corpus, pid, segmenter, i, start, end, model, vector)
                    for corpus, pid, sentences in rows
                    for i, (start, end, vector) in enumerate(sentences)
                ],
                timeout=timeout,
            )

    # --- word vectors ------------------------------------------------------------------------------------

    async def missing_words(self, model: str, words: Sequence[str]) -> list[str]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT w FROM unnest($2::text[]) AS w WHERE NOT EXISTS"
                " (SELECT 1 FROM word_vectors v WHERE v.embedding_model = $1 AND v.word = w)",
                model,
                list(words),
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [r["w"] for r in rows]

    async def write_words(self, model: str, vectors: Sequence[tuple[str, np.ndarray]]) -> None:
        async with self._conn() as conn:
            await conn.executemany(
                "INSERT INTO word_vectors (embedding_model, word, embedding) VALUES ($1, $2, $3)"
                " ON CONFLICT DO NOTHING",
                [(model, w, v) for w, v in vectors],
                timeout=MAINTENANCE_TIMEOUT_S,
            )

    async def word_vectors(self, model: str, limit: int) -> list[tuple[str, np.ndarray]]:
        """Up to `limit` stored word vectors of `model`: what start-up reads instead of embedding them."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT word, embedding FROM word_vectors WHERE embedding_model = $1 LIMIT $2",
                model,
                limit,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [(r["word"], r["embedding"].to_numpy()) for r in rows]

    # --- managing corpora ----------------------------------------------------------------------------

    async def remove_corpus(self, corpus: str) -> RemovedCorpus | None:
        """Drop a corpus whole, in one transaction: its passages, their sentences, its cached answers, its
        staging area, its common lexemes and its state. Nothing of another corpus is touched. None when there is
        no such corpus.

        An HNSW index needs no rebuild: the rows leave it as they leave the table (vacuum reclaims them)."""
        timeout = MAINTENANCE_TIMEOUT_S
        async with self._conn(transaction=True, commit_timeout_s=timeout) as conn:
            state = await conn.fetchval(
                "DELETE FROM corpus_state WHERE name = $1 RETURNING name", corpus, timeout=timeout
            )
            sentences = await conn.fetchval(
                "SELECT count(*) FROM passage_sentences WHERE corpus = $1", corpus, timeout=timeout
            )
            passages = await conn.fetchval(
                "WITH d AS (DELETE FROM passages WHERE corpus = $1 RETURNING 1) SELECT count(*) FROM d",
                corpus,
                timeout=timeout,
            )
            answers = await conn.fetchval(
                "WITH d AS (DELETE FROM answer_cache WHERE corpus = $1 RETURNING 1) SELECT count(*) FROM d",
                corpus,
                timeout=timeout,
            )
            staged = await conn.fetchval(
                "WITH d AS (DELETE FROM staged_passages WHERE corpus = $1 RETURNING 1) SELECT count(*) FROM d",
                corpus,
                timeout=timeout,
            )
            await conn.execute("DELETE FROM common_lexemes WHERE corpus = $1", corpus, timeout=timeout)
        if state is None and not passages and not staged:
            return None
        return RemovedCorpus(corpus, int(passages), int(sentences), int(answers), int(staged))

    async def ensure_hnsw_index(self) -> bool:
        """Create the HNSW index (idempotent); returns True when it had to be built."""
        async with self._conn(transaction=True, commit_timeout_s=MAINTENANCE_TIMEOUT_S) as conn:
            if await conn.fetchval("SELECT to_regclass('passages_embedding_hnsw') IS NOT NULL"):
                return False
            # An index build at 100k passages takes tens of seconds: the long timeout, and enough build
            # memory that pgvector doesn't spill the graph to disk (several times slower).
            await conn.execute("SET LOCAL maintenance_work_mem = '512MB'")
            await conn.execute(
                "CREATE INDEX IF NOT EXISTS passages_embedding_hnsw ON passages"
                " USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return True

    # --- sentence units (passage_sentences) ------------------------------------------------------

    async def sentence_spans(
        self, corpus: str, segmenter: str, passage_ids: Sequence[str]
    ) -> dict[str, tuple[tuple[int, int], ...]]:
        """passage id -> its stored sentence spans under `segmenter`, in order; a passage without any is absent."""
        if not passage_ids:
            return {}
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT passage_id, start_char, end_char FROM passage_sentences"
                " WHERE corpus = $1 AND segmenter = $2 AND passage_id = ANY($3::text[])"
                " ORDER BY passage_id, ordinal",
                corpus,
                segmenter,
                list(passage_ids),
            )
        out: dict[str, list[tuple[int, int]]] = {}
        for r in rows:
            out.setdefault(r["passage_id"], []).append((r["start_char"], r["end_char"]))
        return {pid: tuple(spans) for pid, spans in out.items()}

    # --- retrieval -----------------------------------------------------------------------------
    # Each search is one statement. The HNSW index (one over every corpus) yields its nearest rows before the
    # corpus filter; the pool's connections run iterative scans (provenance.db.create_pool), which keep
    # reading until the LIMIT is met from this corpus, so no search needs a transaction to SET LOCAL it.

    async def vector_search(
        self, query: np.ndarray, k: int, corpus: str = DEFAULT_CORPUS, *, exact: bool = False
    ) -> list[ScoredPassage]:
        """The `k` nearest passages by cosine; `exact` reads the corpus's own rows instead of the HNSW index
        (the pipeline asks it for a corpus under HNSW_MIN_PASSAGES: `Answering._screen_and_retrieve`)."""
        async with self._conn() as conn:
            rows = await conn.fetch(VECTOR_SEARCH_SQL[exact], query, k, corpus)
        return [ScoredPassage(**dict(r)) for r in rows]

    async def hybrid_search(
        self,
        query: np.ndarray,
        question: str,
        k: int,
        *,
        pool_size: int,
        rrf_k: int,
        corpus: str = DEFAULT_CORPUS,
        exact: bool = False,
    ) -> list[ScoredPassage]:
        """The top `k` of the reciprocal rank fusion of two rankings of `pool_size` passages each: by cosine
        to `query`, and by full-text rank for `question`. One statement, so one round trip.

        A passage scores sum(1 / (rrf_k + rank)) over the rankings it is in (rank from 1); ties go to the
        smaller id by code point. Every passage returned carries its cosine to `query` as its score, a
        full-text hit outside the vector pool included, never its text rank or its fused score. `exact` as in
        `vector_search`.
        """
        async with self._conn() as conn:
            rows = await conn.fetch(HYBRID_SEARCH_SQL[exact], query, question, corpus, pool_size, rrf_k, k)
        return [ScoredPassage(**dict(r)) for r in rows]


# --- the guards' tables: API keys, rate limits, answer cache, spend ledger ---------------------------


class ApiKeyRow(msgspec.Struct, frozen=True):
    name: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


class RateWindow(msgspec.Struct, frozen=True):
    admitted: bool
    count: int
    seconds_left: float
    window_start: dt.datetime


class CachedAnswer(msgspec.Struct, frozen=True):
    response: str  # the AskResponse as JSON, decoded by the cache guard
    created_at: dt.datetime


class SpendRow(msgspec.Struct, frozen=True):
    spent_usd: float
    reserved_usd: float
    calls: int


# A cached answer's one read; bench/floor_app.py runs the same statement to measure the floor under us.
CACHE_GET_SQL = (
    "SELECT response::text AS response, created_at FROM answer_cache WHERE cache_key = $1 AND expires_at > now()"
)


class GuardStore(_Pooled):
    """The guards' tables. Each guard's check-and-update is one statement, so concurrent requests (and
    workers) can't race between reading a counter and writing it back."""

    async def api_key_by_hash(self, key_hash: str) -> ApiKeyRow | None:
        async with self._conn() as conn:
            row = await conn.fetchrow("SELECT name, created_at, revoked_at FROM api_keys WHERE key_hash = $1", key_hash)
        return None if row is None else ApiKeyRow(**dict(row))

    async def create_api_key(self, name: str, key_hash: str) -> bool:
        """False when the name is already taken (revoked names stay taken, so logs stay unambiguous)."""
        async with self._conn() as conn:
            created = await conn.fetchval(
                "INSERT INTO api_keys (name, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING true",
                name,
                key_hash,
            )
        return bool(created)

    async def revoke_api_key(self, name: str) -> bool:
        """False when there is no active key of that name."""
        async with self._conn() as conn:
            revoked = await conn.fetchval(
                "UPDATE api_keys SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING true",
                name,
            )
        return bool(revoked)

    async def list_api_keys(self) -> list[ApiKeyRow]:
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT name, created_at, revoked_at FROM api_keys ORDER BY name")
        return [ApiKeyRow(**dict(r)) for r in rows]

    async def rate_limit_hit(self, client_key: str, limit: int) -> RateWindow:
        """Count one request in the client's current UTC hour unless it already holds `limit`.

        Only admitted requests are counted, so a refund (`rate_limit_refund`) gives a slot back exactly.
        The check and the count are one statement: ON CONFLICT locks the window's row and re-evaluates
        the WHERE on its latest version, so concurrent requests can't both take the last slot.
        """
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                WITH now_hour AS (SELECT date_trunc('hour', now(), 'UTC') AS window_start),
                hit AS (
                    INSERT INTO rate_limits AS r (client_key, window_start, count)
                    SELECT $1, window_start, 1 FROM now_hour
                    ON CONFLICT (client_key, window_start) DO UPDATE SET count = r.count + 1
                    WHERE r.count < $2::int
                    RETURNING r.count
                )
                SELECT (SELECT count FROM hit) AS count, window_start,
                    extract(epoch FROM window_start + interval '1 hour' - now())::float8 AS seconds_left
                FROM now_hour
                """,
                client_key,
                limit,
            )
        assert row is not None
        return RateWindow(
            admitted=row["count"] is not None,
            count=row["count"] if row["count"] is not None else limit,
            seconds_left=row["seconds_left"],
            window_start=row["window_start"],
        )

    async def rate_limit_peek(self, client_key: str, limit: int) -> RateWindow:
        """The client's current window without counting anything: `admitted` says whether a slot is left."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                WITH now_hour AS (SELECT date_trunc('hour', now(), 'UTC') AS window_start)
                SELECT coalesce(r.count, 0) AS count, n.window_start,
                    extract(epoch FROM n.window_start + interval '1 hour' - now())::float8 AS seconds_left
                FROM now_hour n
                LEFT JOIN rate_limits r ON r.client_key = $1 AND r.window_start = n.window_start
                """,
                client_key,
            )
        assert row is not None
        return RateWindow(
            admitted=row["count"] < limit,
            count=row["count"],
            seconds_left=row["seconds_left"],
            window_start=row["window_start"],
        )

    async def rate_limit_refund(self, client_key: str, window_start: dt.datetime) -> None:
        """Give back one counted request (its answer failed on our side) to the window it was counted in."""
        async with self._conn() as conn:
            await conn.execute(
                "UPDATE rate_limits SET count = count - 1 WHERE client_key = $1 AND window_start = $2 AND count > 0",
                client_key,
                window_start,
            )

    async def rate_limit_count(self, client_key: str) -> int:
        """The requests counted against `client_key` in the current hour (for tests and operators)."""
        async with self._conn() as conn:
            count: int | None = await conn.fetchval(
                "SELECT count FROM rate_limits"
                " WHERE client_key = $1 AND window_start = date_trunc('hour', now(), 'UTC')",
                client_key,
            )
        return count or 0

    async def rate_limit_cleanup(self, older_than_s: int) -> int:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM rate_limits WHERE window_start < now() - make_interval(secs => $1)"
                " RETURNING 1) SELECT count(*) FROM d",
                float(older_than_s),
            )
        return int(deleted)

    async def cache_get(self, cache_key: str) -> CachedAnswer | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(CACHE_GET_SQL, cache_key)
        return None if row is None else CachedAnswer(response=row["response"], created_at=row["created_at"])

    async def cache_put(
        self, cache_key: str, question: str, response_json: str, ttl_s: int, corpus: str | None = None
    ) -> None:
        async with self._conn() as conn:
            await conn.execute(
                """
                INSERT INTO answer_cache (cache_key, question, response, expires_at, corpus)
                VALUES ($1, $2, $3::jsonb, now() + make_interval(secs => $4), $5)
                ON CONFLICT (cache_key) DO UPDATE SET
                    question = EXCLUDED.question, response = EXCLUDED.response,
                    created_at = now(), expires_at = EXCLUDED.expires_at, corpus = EXCLUDED.corpus
                """,
                cache_key,
                question,
                response_json,
                float(ttl_s),
                corpus,
            )

    async def cache_cleanup(self) -> int:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM answer_cache WHERE expires_at <= now() RETURNING 1) SELECT count(*) FROM d"
            )
        return int(deleted)

    async def spend_reserve(self, day: dt.date, estimate_usd: float, budget_usd: float) -> SpendRow | None:
        """Hold `estimate_usd` against `day` unless settled + held spend has already reached the budget.

        None when refused. The check and the hold are one statement: ON CONFLICT locks the day's row and
        re-evaluates the WHERE on its latest version, so concurrent reservations queue rather than race,
        and the day can only overshoot the budget by the last admitted request's estimate.
        """
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                INSERT INTO spend_ledger AS s (day, reserved_usd)
                SELECT $1, $2::float8 WHERE 0 < $3::float8
                ON CONFLICT (day) DO UPDATE SET
                    reserved_usd = s.reserved_usd + EXCLUDED.reserved_usd, updated_at = now()
                WHERE s.spent_usd + s.reserved_usd < $3::float8
                RETURNING s.spent_usd::float8 AS spent_usd, s.reserved_usd::float8 AS reserved_usd, s.calls
                """,
                day,
                estimate_usd,
                budget_usd,
            )
        return None if row is None else SpendRow(**dict(row))

    async def spend_settle(self, day: dt.date, released_usd: float, cost_usd: float, calls: int) -> SpendRow:
        """Release a reservation and book what the calls really cost, in one statement."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                INSERT INTO spend_ledger AS s (day, spent_usd, calls) VALUES ($1, $3::float8, $4)
                ON CONFLICT (day) DO UPDATE SET
                    spent_usd = s.spent_usd + EXCLUDED.spent_usd,
                    reserved_usd = greatest(0, s.reserved_usd - $2::float8),
                    calls = s.calls + EXCLUDED.calls,
                    updated_at = now()
                RETURNING s.spent_usd::float8 AS spent_usd, s.reserved_usd::float8 AS reserved_usd, s.calls
                """,
                day,
                released_usd,
                cost_usd,
                calls,
            )
        assert row is not None
        return SpendRow(**dict(row))

    async def spend_day(self, day: dt.date) -> SpendRow | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT spent_usd::float8 AS spent_usd, reserved_usd::float8 AS reserved_usd, calls"
                " FROM spend_ledger WHERE day = $1",
                day,
            )
        return None if row is None else SpendRow(**dict(row))


# --- readers' feedback: recent responses and their verdicts (007_feedback.sql) ----------------------------


class KeptResponse(msgspec.Struct, frozen=True):
    """One served response, as the response log writes it."""

    request_id: str
    question: str
    corpus: str | None
    corpus_version: str | None
    status: str
    reason: str | None
    cached: bool
    settings_json: str
    response_json: str
    served_at: dt.datetime


class Rated(msgspec.Struct, frozen=True):
    """What a verdict was given on, and whether it replaced the client's earlier one."""

    replaced: bool
    status: str
    rated_at: dt.datetime


class FeedbackRow(msgspec.Struct, frozen=True):
    request_id: str
    verdict: str
    kind: str | None
    note: str
    question: str
    corpus: str | None
    corpus_version: str | None
    status: str
    reason: str | None
    cached: bool
    settings: dict[str, Any]
    response: dict[str, Any]
    served_at: dt.datetime
    updated_at: dt.datetime


class FeedbackCount(msgspec.Struct, frozen=True):
    corpus: str | None
    week: dt.date
    status: str
    verdict: str
    kind: str | None
    n: int


_FEEDBACK_FILTER = " WHERE ($1::timestamptz IS NULL OR updated_at >= $1) AND ($2::text IS NULL OR corpus = $2)"


class FeedbackStore(_Pooled):
    """Recent responses (so that they can be rated) and readers' verdicts on them."""

    async def keep_responses(self, rows: Sequence[KeptResponse]) -> int:
        """One statement for the whole batch. A request id already kept (a client that reused its X-Request-ID)
        keeps the response first served under it."""
        if not rows:
            return 0
        async with self._conn() as conn:
            kept = await conn.fetchval(
                """
                WITH i AS (
                    INSERT INTO recent_responses
                        (request_id, question, corpus, corpus_version, status, reason, cached, settings, response,
                         served_at)
                    SELECT r, q, c, v, s, why, hit, cfg::jsonb, body::jsonb, t
                    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                                $7::boolean[], $8::text[], $9::text[], $10::timestamptz[])
                        AS u(r, q, c, v, s, why, hit, cfg, body, t)
                    ON CONFLICT (request_id) DO NOTHING
                    RETURNING 1
                )
                SELECT count(*) FROM i
                """,
                [r.request_id for r in rows],
                [r.question for r in rows],
                [r.corpus for r in rows],
                [r.corpus_version for r in rows],
                [r.status for r in rows],
                [r.reason for r in rows],
                [r.cached for r in rows],
                [r.settings_json for r in rows],
                [r.response_json for r in rows],
                [r.served_at for r in rows],
            )
        return int(kept)

    async def recent_responses_cleanup(self, window_s: int) -> int:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM recent_responses WHERE served_at < now() - make_interval(secs => $1)"
                " RETURNING 1) SELECT count(*) FROM d",
                float(window_s),
            )
        return int(deleted)

    async def rate(
        self, request_id: str, client_hash: str, verdict: str, kind: str | None, note: str, window_s: int
    ) -> Rated | None:
        """Record a client's verdict on a response served within the window, replacing the client's earlier
        verdict on it (and no other client's); None when no such response is kept. One statement, so two
        verdicts sent at once by one client leave one row."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                INSERT INTO feedback AS f
                    (request_id, client_hash, verdict, kind, note, question, corpus, corpus_version, status,
                     reason, cached, settings, response, served_at)
                SELECT request_id, $2, $3, $4, $5, question, corpus, corpus_version, status, reason, cached,
                    settings, response, served_at
                FROM recent_responses
                WHERE request_id = $1 AND served_at > now() - make_interval(secs => $6)
                ON CONFLICT (request_id, client_hash) DO UPDATE SET
                    verdict = EXCLUDED.verdict, kind = EXCLUDED.kind, note = EXCLUDED.note, updated_at = now()
                RETURNING (f.created_at <> f.updated_at) AS replaced, f.status, f.updated_at
                """,
                request_id,
                client_hash,
                verdict,
                kind,
                note,
                float(window_s),
            )
        if row is None:
            return None
        return Rated(replaced=row["replaced"], status=row["status"], rated_at=row["updated_at"])

    async def feedback_secret(self, candidate: bytes) -> bytes:
        """The HMAC key every worker shares: `candidate` when this is the first to ask, else the kept one."""
        async with self._conn() as conn:
            await conn.execute("INSERT INTO feedback_secret (key) VALUES ($1) ON CONFLICT DO NOTHING", candidate)
            key: bytes = await conn.fetchval("SELECT key FROM feedback_secret")
        return key

    async def feedback(self, since: dt.datetime | None = None, corpus: str | None = None) -> list[FeedbackRow]:
        """Every verdict given (or changed) since `since`, on `corpus` when given, oldest first."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT request_id, verdict, kind, note, question, corpus, corpus_version, status, reason, cached,"
                " settings::text AS settings, response::text AS response, served_at, updated_at FROM feedback"
                + _FEEDBACK_FILTER
                + " ORDER BY updated_at, request_id, client_hash",
                since,
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [
            FeedbackRow(
                **{
                    **dict(r),
                    "settings": msgspec.json.decode(r["settings"]),
                    "response": msgspec.json.decode(r["response"]),
                }
            )
            for r in rows
        ]

    async def feedback_counts(self, since: dt.datetime | None = None, corpus: str | None = None) -> list[FeedbackCount]:
        """Verdicts by corpus, ISO week (Monday, UTC) of the verdict, status rated, verdict and kind."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT corpus, date_trunc('week', updated_at AT TIME ZONE 'UTC')::date AS week, status, verdict,"
                " kind, count(*) AS n FROM feedback"
                + _FEEDBACK_FILTER
                + " GROUP BY 1, 2, 3, 4, 5 ORDER BY 1 NULLS FIRST, 2, 3, 4, 5 NULLS FIRST",
                since,
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [FeedbackCount(**dict(r)) for r in rows]


class Store(CorpusStore, GuardStore, FeedbackStore):
    """Both stores over one pool, for what uses both: the service (its pipeline reads the corpora, its guards
    their tables) and the CLI. Everything else takes the one it needs."""
