"""The one data-access module: every SQL statement the service runs lives here, with bind parameters.

One store per aggregate, over the same pool: `CorpusStore` holds the corpora (passages, their state, ingest's
writes and retrieval) and `GuardStore` the guards' tables (API keys, rate-limit windows, the answer cache and
the spend ledger). `Store` is both, for what needs both: the running service and the CLI.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import msgspec
import numpy as np

from provenance.chunking import Chunk
from provenance.corpora import DEFAULT_CORPUS
from provenance.db import MAINTENANCE_TIMEOUT_S
from provenance.errors import Overloaded
from provenance.models import PassageOut
from provenance.passages import ScoredPassage


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
HYBRID_SEARCH_SQL = """
WITH nearest AS (
    -- LIMIT before the window, so the HNSW index serves the ORDER BY and only the pool is numbered; the rows
    -- arrive in distance order, so rank follows the order the index gave.
    SELECT id, row_number() OVER (ORDER BY distance) AS rank
    FROM (
        SELECT id, embedding <=> $1 AS distance
        FROM passages
        WHERE corpus = $3
        ORDER BY embedding <=> $1
        LIMIT $4
    ) pool
),
q AS (
    -- OR of the question's own lexemes: websearch_to_tsquery would AND them.
    SELECT to_tsquery('english', coalesce((
        SELECT string_agg(quote_literal(lexeme), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', $2))) AS lexeme
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

    async def passage_texts(self, limit: int) -> list[str]:
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT text FROM passages ORDER BY source, position LIMIT $1", limit)
        return [r["text"] for r in rows]

    async def stored_hashes(self, corpus: str = DEFAULT_CORPUS) -> dict[str, tuple[str, str]]:
        """passage id -> (content hash, embedding model), to skip re-embedding unchanged passages."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT id, content_hash, embedding_model FROM passages WHERE corpus = $1 ORDER BY id",
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,  # every passage of a corpus, for ingest
            )
        return {r["id"]: (r["content_hash"], r["embedding_model"]) for r in rows}

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
        """Make the corpus's passages equal `chunks` in one transaction; other corpora are left alone.
        Returns (upserted, {source: passages removed}).

        Chunks without a new embedding keep their stored one (their content hash is unchanged).
        An interrupted call leaves the previous corpus version intact: nothing commits until the end.
        A large corpus takes well over DB_TIMEOUT_S to write, so every statement here has the long timeout.
        """
        about = about or CorpusDescription(DEFAULT_CORPUS, None, "", "", [])
        corpus = about.name
        keep = [c.id for c in chunks]
        timeout = MAINTENANCE_TIMEOUT_S
        async with self._conn(transaction=True, commit_timeout_s=timeout) as conn:
            removed = await conn.fetch(
                "WITH d AS (DELETE FROM passages WHERE corpus = $1 AND NOT (id = ANY($2::text[])) RETURNING source)"
                " SELECT source, count(*) AS n FROM d GROUP BY source ORDER BY source",
                corpus,
                keep,
                timeout=timeout,
            )
            new_chunks = [c for c in chunks if c.id in embeddings]
            await conn.executemany(
                """
                INSERT INTO passages
                    (corpus, id, source, heading, position, text, token_count, embedding, embedding_model,
                     content_hash, first_page, last_page)
                VALUES ($10, $1, $2, $3, $4, $5, $6, $7, $8, $9, $11, $12)
                ON CONFLICT (corpus, id) DO UPDATE SET
                    source = EXCLUDED.source, heading = EXCLUDED.heading, position = EXCLUDED.position,
                    text = EXCLUDED.text, token_count = EXCLUDED.token_count, embedding = EXCLUDED.embedding,
                    embedding_model = EXCLUDED.embedding_model, content_hash = EXCLUDED.content_hash,
                    first_page = EXCLUDED.first_page, last_page = EXCLUDED.last_page, updated_at = now()
                """,
                [
                    (
                        c.id,
                        c.source,
                        c.heading,
                        c.position,
                        c.text,
                        c.token_count,
                        embeddings[c.id],
                        model,
                        c.content_hash,
                        corpus,
                        *(c.pages or (None, None)),
                    )
                    for c in new_chunks
                ],
                timeout=timeout,
            )
            # Unchanged passages may still have moved within their file, or to other pages of it.
            await conn.executemany(
                "UPDATE passages SET position = $3, heading = $4, first_page = $5, last_page = $6"
                " WHERE corpus = $1 AND id = $2 AND (position <> $3 OR heading <> $4"
                " OR first_page IS DISTINCT FROM $5 OR last_page IS DISTINCT FROM $6)",
                [
                    (corpus, c.id, c.position, c.heading, *(c.pages or (None, None)))
                    for c in chunks
                    if c.id not in embeddings
                ],
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
                len(chunks),
                msgspec.json.encode(files).decode(),
                about.source_dir,
                about.title,
                about.description,
                msgspec.json.encode(about.examples).decode(),
                timeout=timeout,  # waits for the row while another ingest of this corpus commits
            )
        return len(new_chunks), {r["source"]: int(r["n"]) for r in removed}

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

    async def write_sentence_spans(
        self,
        corpus: str,
        segmenter: str,
        spans: Mapping[str, Sequence[tuple[int, int]]],
        changed: Collection[str],
    ) -> None:
        """Store each passage's sentence spans under `segmenter`, after `replace_corpus` wrote the passages.
        The spans of `changed` passages (new text) are replaced; the rest are only added where missing, so
        what else a row holds (a sentence's vector) stays with an unchanged passage. Rows of another
        segmenter are dropped: they describe offsets this one doesn't use."""
        rows = [(pid, n, a, b) for pid, spans_ in spans.items() for n, (a, b) in enumerate(spans_)]
        timeout = MAINTENANCE_TIMEOUT_S
        async with self._conn(transaction=True, commit_timeout_s=timeout) as conn:
            await conn.execute(
                "DELETE FROM passage_sentences WHERE corpus = $1 AND (segmenter <> $2 OR passage_id = ANY($3::text[]))",
                corpus,
                segmenter,
                list(changed),
                timeout=timeout,
            )
            await conn.execute(
                "INSERT INTO passage_sentences (corpus, passage_id, segmenter, ordinal, start_char, end_char)"
                " SELECT $1, r.passage_id, $2, r.ordinal, r.start_char, r.end_char"
                " FROM unnest($3::text[], $4::int[], $5::int[], $6::int[])"
                " AS r(passage_id, ordinal, start_char, end_char)"
                " ON CONFLICT (corpus, passage_id, segmenter, ordinal) DO NOTHING",
                corpus,
                segmenter,
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                [r[3] for r in rows],
                timeout=timeout,
            )

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

    async def vector_search(self, query: np.ndarray, k: int, corpus: str = DEFAULT_CORPUS) -> list[ScoredPassage]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT id, source, heading, text, 1 - (embedding <=> $1) AS score,"
                " CASE WHEN first_page IS NULL THEN NULL ELSE ARRAY(SELECT generate_series(first_page, last_page))"
                " END AS pages"
                " FROM passages WHERE corpus = $3 ORDER BY embedding <=> $1 LIMIT $2",
                query,
                k,
                corpus,
            )
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
    ) -> list[ScoredPassage]:
        """The top `k` of the reciprocal rank fusion of two rankings of `pool_size` passages each: by cosine
        to `query`, and by full-text rank for `question`. One statement, so one round trip.

        A passage scores sum(1 / (rrf_k + rank)) over the rankings it is in (rank from 1); ties go to the
        smaller id by code point. Every passage returned carries its cosine to `query` as its score, a
        full-text hit outside the vector pool included, never its text rank or its fused score.
        """
        async with self._conn() as conn:
            rows = await conn.fetch(HYBRID_SEARCH_SQL, query, question, corpus, pool_size, rrf_k, k)
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

    async def cache_put(self, cache_key: str, question: str, response_json: str, ttl_s: int) -> None:
        async with self._conn() as conn:
            await conn.execute(
                """
                INSERT INTO answer_cache (cache_key, question, response, expires_at)
                VALUES ($1, $2, $3::jsonb, now() + make_interval(secs => $4))
                ON CONFLICT (cache_key) DO UPDATE SET
                    question = EXCLUDED.question, response = EXCLUDED.response,
                    created_at = now(), expires_at = EXCLUDED.expires_at
                """,
                cache_key,
                question,
                response_json,
                float(ttl_s),
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


class Store(CorpusStore, GuardStore):
    """Both stores over one pool, for what uses both: the service (its pipeline reads the corpora, its guards
    their tables) and the CLI. Everything else takes the one it needs."""
