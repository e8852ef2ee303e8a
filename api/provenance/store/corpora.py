"""The corpora's data access: passages, their state, ingest's staging and switch, sentence and word
vectors, and removal; retrieval's searches are store.search. Every statement with bind parameters."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from provenance.ingest.chunking import Chunk
from provenance.store.pool import MAINTENANCE_TIMEOUT_S
from provenance.store.search import SearchStore
from provenance.wire import DEFAULT_CORPUS, PassageOut

# --- the corpora: passages, corpus state, ingest ---------------------------------------


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


# A lexeme in more of a corpus's passages than this is left out of hybrid search's text query
# (db/migrations/009_common_lexemes.sql, which counts the corpora it finds with the same number).
COMMON_LEXEME_PASSAGES = 2000


class CorpusStore(SearchStore):
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
        async with self._conn(transaction=True, commit_timeout_s=MAINTENANCE_TIMEOUT_S) as conn:
            await _stage_passages(conn, corpus, model, segmenter, rows)
            await _stage_sentences(conn, corpus, model, segmenter, [r for r in rows if r.sentences is not None])

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
        keep = list(keep)
        async with self._conn(transaction=True, commit_timeout_s=MAINTENANCE_TIMEOUT_S) as conn:
            await _drop_stale_staging(conn, corpus, keep)
            missing = await _count_unstaged(conn, corpus, keep)
            if missing:
                raise RuntimeError(f"{missing} passages of corpus {corpus} have no vector staged; nothing switched")
            removed = await _remove_dropped_passages(conn, corpus, keep)
            await _drop_outdated_sentences(conn, corpus, segmenter, model)
            written = await _write_staged_passages(conn, corpus)
            await _move_unchanged_passages(conn, corpus)
            await _write_staged_sentences(conn, corpus, segmenter, model)
            await _count_common_lexemes(conn, corpus, len(keep))
            await _write_corpus_state(conn, about, version, model, fingerprint, len(keep), files)
            await conn.execute("DELETE FROM staged_passages WHERE corpus = $1", corpus, timeout=MAINTENANCE_TIMEOUT_S)
        return written, removed

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
        self,
        segmenter: str,
        model: str,
        after: tuple[str, str] = ("", ""),
        limit: int = 256,
        corpus: str | None = None,
    ) -> list[tuple[str, str, str, str]]:
        """(corpus, passage id, text, heading) of up to `limit` passages (of `corpus`, or of every corpus), in
        (corpus, id) order after `after`, whose sentences have no `model` vectors for `segmenter`: what a
        database ingested before sentence vectors were stored needs computed once, and what an upload's job
        computes after its switch."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT p.corpus, p.id, p.text, p.heading FROM passages p"
                " WHERE (p.corpus, p.id) > ($1, $2) AND p.embedding_model = $4"
                " AND ($6::text IS NULL OR p.corpus = $6) AND NOT EXISTS ("
                "   SELECT 1 FROM passage_sentences s WHERE s.corpus = p.corpus AND s.passage_id = p.id"
                "   AND s.segmenter = $3 AND s.embedding_model = $4 AND s.embedding IS NOT NULL)"
                " ORDER BY p.corpus, p.id LIMIT $5",
                *after,
                segmenter,
                model,
                limit,
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [(r["corpus"], r["id"], r["text"], r["heading"]) for r in rows]

    async def count_missing_sentences(self, segmenter: str, model: str, corpus: str | None = None) -> int:
        """How many passages (of `corpus`, or of every corpus) `missing_sentences` would give."""
        async with self._conn() as conn:
            count: int = await conn.fetchval(
                "SELECT count(*) FROM passages p WHERE p.embedding_model = $2"
                " AND ($3::text IS NULL OR p.corpus = $3) AND NOT EXISTS ("
                "   SELECT 1 FROM passage_sentences s WHERE s.corpus = p.corpus AND s.passage_id = p.id"
                "   AND s.segmenter = $1 AND s.embedding_model = $2 AND s.embedding IS NOT NULL)",
                segmenter,
                model,
                corpus,
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
        staging area, its common lexemes, its documents and sources, and its state. Nothing of another corpus is
        touched. None when there is no such corpus.

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
            # Its documents and their sources (store.sources): a corpus made later under the name starts afresh.
            await conn.execute("DELETE FROM documents WHERE corpus = $1", corpus, timeout=timeout)
            await conn.execute("DELETE FROM sources WHERE corpus = $1", corpus, timeout=timeout)
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


# --- ingest's steps: staging a batch, and switching a corpus to what is staged ---------------------------
# Each takes the connection of the one transaction `CorpusStore.stage` or `CorpusStore.switch_corpus` holds;
# every statement has the long timeout (a large corpus takes well over DB_TIMEOUT_S).


async def _stage_passages(conn: Any, corpus: str, model: str, segmenter: str, rows: Sequence[Staged]) -> None:
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
        timeout=MAINTENANCE_TIMEOUT_S,
    )


async def _stage_sentences(conn: Any, corpus: str, model: str, segmenter: str, renewed: Sequence[Staged]) -> None:
    """The passages with new sentences: their staged sentences replaced."""
    await conn.execute(
        "DELETE FROM staged_sentences WHERE corpus = $1 AND passage_id = ANY($2::text[])",
        corpus,
        [r.chunk.id for r in renewed],
        timeout=MAINTENANCE_TIMEOUT_S,
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
        timeout=MAINTENANCE_TIMEOUT_S,
    )


async def _drop_stale_staging(conn: Any, corpus: str, keep: list[str]) -> None:
    """Rows an earlier, interrupted ingest staged for passages that no longer exist."""
    await conn.execute(
        "DELETE FROM staged_passages WHERE corpus = $1 AND NOT (id = ANY($2::text[]))",
        corpus,
        keep,
        timeout=MAINTENANCE_TIMEOUT_S,
    )


async def _count_unstaged(conn: Any, corpus: str, keep: list[str]) -> int:
    """Passages to keep that have no vector to switch to: not staged, or staged without a vector and not
    stored with the same content and model either."""
    missing = await conn.fetchval(
        "SELECT count(*) FROM unnest($2::text[]) AS k(id)"
        " WHERE NOT EXISTS (SELECT 1 FROM staged_passages s WHERE s.corpus = $1 AND s.id = k.id)",
        corpus,
        keep,
        timeout=MAINTENANCE_TIMEOUT_S,
    )
    # A row staged without a vector stands for a stored passage of the same content and model.
    missing += await conn.fetchval(
        "SELECT count(*) FROM staged_passages s WHERE s.corpus = $1 AND s.embedding IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM passages p WHERE p.corpus = s.corpus AND p.id = s.id"
        " AND p.content_hash = s.content_hash AND p.embedding_model = s.embedding_model)",
        corpus,
        timeout=MAINTENANCE_TIMEOUT_S,
    )
    return int(missing)


async def _remove_dropped_passages(conn: Any, corpus: str, keep: list[str]) -> dict[str, int]:
    """The served passages not kept, deleted: {source: how many}."""
    removed = await conn.fetch(
        "WITH d AS (DELETE FROM passages WHERE corpus = $1 AND NOT (id = ANY($2::text[])) RETURNING source)"
        " SELECT source, count(*) AS n FROM d GROUP BY source ORDER BY source",
        corpus,
        keep,
        timeout=MAINTENANCE_TIMEOUT_S,
    )
    return {r["source"]: int(r["n"]) for r in removed}


async def _drop_outdated_sentences(conn: Any, corpus: str, segmenter: str, model: str) -> None:
    """Sentences of passages whose text or vectors change, and any of another segmenter or model."""
    await conn.execute(
        "DELETE FROM passage_sentences p USING staged_passages s"
        " WHERE s.corpus = $1 AND (s.embedding IS NOT NULL OR s.sentences_segmenter IS NOT NULL)"
        " AND p.corpus = s.corpus AND p.passage_id = s.id",
        corpus,
        timeout=MAINTENANCE_TIMEOUT_S,
    )
    await conn.execute(
        "DELETE FROM passage_sentences WHERE corpus = $1 AND (segmenter <> $2 OR embedding_model IS DISTINCT FROM $3)",
        corpus,
        segmenter,
        model,
        timeout=MAINTENANCE_TIMEOUT_S,
    )


async def _write_staged_passages(conn: Any, corpus: str) -> int:
    """The staged passages with a new vector, written over the served ones: how many."""
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
        timeout=MAINTENANCE_TIMEOUT_S,
    )
    return int(written)


async def _move_unchanged_passages(conn: Any, corpus: str) -> None:
    """Unchanged passages may still have moved within their file, or to other pages of it."""
    await conn.execute(
        "UPDATE passages p SET position = s.position, heading = s.heading, first_page = s.first_page,"
        " last_page = s.last_page"
        " FROM staged_passages s"
        " WHERE s.corpus = $1 AND s.embedding IS NULL AND p.corpus = s.corpus AND p.id = s.id"
        " AND (p.position <> s.position OR p.heading <> s.heading"
        " OR p.first_page IS DISTINCT FROM s.first_page OR p.last_page IS DISTINCT FROM s.last_page)",
        corpus,
        timeout=MAINTENANCE_TIMEOUT_S,
    )


async def _write_staged_sentences(conn: Any, corpus: str, segmenter: str, model: str) -> None:
    """The staged sentences of passages staged with them. A passage staged again with other content and no
    sentences (an upload's job embeds them after its switch) has `sentences_segmenter` reset: its staged
    sentences are of the old text, and are not served."""
    await conn.execute(
        "INSERT INTO passage_sentences"
        " (corpus, passage_id, segmenter, ordinal, start_char, end_char, embedding_model, embedding)"
        " SELECT t.corpus, t.passage_id, t.segmenter, t.ordinal, t.start_char, t.end_char, t.embedding_model,"
        " t.embedding FROM staged_sentences t JOIN staged_passages s ON s.corpus = t.corpus AND s.id = t.passage_id"
        " WHERE t.corpus = $1 AND t.segmenter = $2 AND t.embedding_model = $3 AND s.sentences_segmenter = $2",
        corpus,
        segmenter,
        model,
        timeout=MAINTENANCE_TIMEOUT_S,
    )


async def _count_common_lexemes(conn: Any, corpus: str, passages: int) -> None:
    """The lexemes hybrid search leaves out of its text query (store.search), counted again."""
    await conn.execute("DELETE FROM common_lexemes WHERE corpus = $1", corpus, timeout=MAINTENANCE_TIMEOUT_S)
    if passages > COMMON_LEXEME_PASSAGES:
        # A scan of the corpus's text vectors: seconds at 100k passages, once per ingest.
        await conn.execute(
            "INSERT INTO common_lexemes (corpus, lexeme, passages) SELECT $1, word, ndoc"
            " FROM ts_stat(format('SELECT tsv FROM passages WHERE corpus = %L', $1::text)) WHERE ndoc > $2",
            corpus,
            COMMON_LEXEME_PASSAGES,
            timeout=MAINTENANCE_TIMEOUT_S,
        )


async def _write_corpus_state(
    conn: Any,
    about: CorpusDescription,
    version: str,
    model: str,
    fingerprint: str,
    passages: int,
    files: list[dict[str, Any]],
) -> None:
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
        about.name,
        version,
        model,
        fingerprint,
        passages,
        msgspec.json.encode(files).decode(),
        about.source_dir,
        about.title,
        about.description,
        msgspec.json.encode(about.examples).decode(),
        timeout=MAINTENANCE_TIMEOUT_S,  # waits for the row while another ingest of this corpus commits
    )
