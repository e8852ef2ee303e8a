"""Retrieval's data access: the vector and hybrid searches of a corpus's passages, each one statement, and
the sentence units stored for the passages found."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from provenance.ports import ScoredPassage
from provenance.store.pool import Pooled
from provenance.wire import DEFAULT_CORPUS

# Hybrid retrieval in one statement (CorpusStore.hybrid_search): $1 query vector, $2 question, $3 corpus,
# $4 pool size per ranking, $5 the vector ranking's weight, $6 top-k.

# The vector ranking's ORDER BY: through the HNSW index, or exactly. The index is one over every corpus and
# yields its nearest rows before the corpus filter, so a small corpus beside a large one reads the large
# one's rows to fill its pool, and gets rows that are not its nearest: bench/exact_scan.py, 2,000 passages
# beside 100,000, hybrid search p50 82 ms through the index against 15 ms exactly, and a different top 4 for
# every question. "+ 0" is an expression the index can't serve: the corpus's own rows are read and sorted.
BY_INDEX = "embedding <=> $1"
EXACT = "(embedding <=> $1) + 0"

# The text ranking's query for a question in a corpus (their parameters named by the statement). An OR of the
# question's own lexemes: websearch_to_tsquery would AND them. A lexeme in more passages than
# store.corpora.COMMON_LEXEME_PASSAGES (db/migrations/009) is left out: ranking every passage that holds it is
# what made retrieval grow with the corpus. MATERIALIZED where it is used: inlined, the query was parsed again
# for every row it filtered (40 ms against 25 ms at 2,000 matching passages).
_TEXT_QUERY = """
    SELECT to_tsquery('english', coalesce((
        SELECT string_agg(quote_literal(l.lexeme), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', {question}))) AS l(lexeme)
        WHERE NOT EXISTS (SELECT 1 FROM common_lexemes c WHERE c.corpus = {corpus} AND c.lexeme = l.lexeme)
    ), '')) AS query
"""

_HYBRID_SEARCH_SQL = """
WITH nearest AS (
    -- LIMIT before the window, so the HNSW index (or the exact sort) serves the ORDER BY and only the pool is
    -- scaled: each cosine over the largest in size in the pool (its best, but in a pool of cosines below 0),
    -- so the scale keeps the ranking's order whatever the signs.
    SELECT id, similarity / nullif(max(abs(similarity)) OVER (), 0) AS score
    FROM (
        SELECT id, 1 - (embedding <=> $1) AS similarity
        FROM passages
        WHERE corpus = $3
        ORDER BY {order}
        LIMIT $4
    ) pool
),
q AS MATERIALIZED ({text_query}),
matched AS (
    -- The text rank over the pool's best (0 where the best is 0). float8 before dividing, as the Python
    -- reference divides the same float4 ranks, so the two agree bit for bit and ties stay ties.
    SELECT id, score / nullif(max(score) OVER (), 0) AS score
    FROM (
        SELECT id, ts_rank_cd(tsv, q.query)::float8 AS score
        FROM passages, q
        WHERE corpus = $3 AND tsv @@ q.query
        ORDER BY score DESC, id
        LIMIT $4
    ) pool
),
fused AS (
    -- A passage outside one pool scores 0 in that ranking.
    SELECT coalesce(n.id, m.id) AS id,
        $5::float8 * coalesce(n.score, 0::float8) + (1 - $5::float8) * coalesce(m.score, 0::float8) AS fused
    FROM nearest n
    FULL JOIN matched m ON m.id = n.id
),
top AS (
    -- COLLATE "C": ties go to the smaller id by code point, whatever the database's collation.
    SELECT id, fused FROM fused ORDER BY fused DESC, id COLLATE "C" LIMIT $6
)
SELECT p.id, p.source, p.heading, p.text, 1 - (p.embedding <=> $1) AS score,
    CASE WHEN p.first_page IS NULL THEN NULL ELSE ARRAY(SELECT generate_series(p.first_page, p.last_page)) END
        AS pages
FROM top t
JOIN passages p ON p.corpus = $3 AND p.id = t.id
ORDER BY t.fused DESC, t.id COLLATE "C"
"""


def _both_scans(template: str) -> dict[bool, str]:
    """A search statement keyed by `exact`: its vector ranking through the index (False) or exactly (True)."""
    return {
        exact: template.format(
            order=EXACT if exact else BY_INDEX, text_query=_TEXT_QUERY.format(question="$2", corpus="$3")
        )
        for exact in (False, True)
    }


HYBRID_SEARCH_SQL = _both_scans(_HYBRID_SEARCH_SQL)
_VECTOR_SEARCH_SQL = (
    "SELECT id, source, heading, text, 1 - (embedding <=> $1) AS score,"
    " CASE WHEN first_page IS NULL THEN NULL ELSE ARRAY(SELECT generate_series(first_page, last_page))"
    " END AS pages"
    " FROM passages WHERE corpus = $3 ORDER BY {order} LIMIT $2"
)
VECTOR_SEARCH_SQL = _both_scans(_VECTOR_SEARCH_SQL)
# The hybrid statement's text ranking alone, with its scores, for measuring fusions (bench/fusion_sweep.py):
# $1 question, $2 corpus, $3 how many.
TEXT_RANKING_SQL = f"""
WITH q AS MATERIALIZED ({_TEXT_QUERY.format(question="$1", corpus="$2")})
SELECT id, ts_rank_cd(tsv, q.query)::float8 AS score
FROM passages, q
WHERE corpus = $2 AND tsv @@ q.query
ORDER BY score DESC, id
LIMIT $3
"""


class SearchStore(Pooled):
    """A corpus's passages as retrieval reads them; `CorpusStore` is one, with the writes."""

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
    # corpus filter; the pool's connections run iterative scans (provenance.store.pool.create_pool), which keep
    # reading until the LIMIT is met from this corpus, so no search needs a transaction to SET LOCAL it.

    async def vector_search(
        self, query: np.ndarray, k: int, corpus: str = DEFAULT_CORPUS, *, exact: bool = False
    ) -> list[ScoredPassage]:
        """The `k` nearest passages by cosine; `exact` reads the corpus's own rows instead of the HNSW index
        (the pipeline asks it for a corpus under HNSW_MIN_PASSAGES: `Answering._screen_and_retrieve`)."""
        async with self._conn() as conn:
            rows = await conn.fetch(VECTOR_SEARCH_SQL[exact], query, k, corpus)
        return [ScoredPassage(**dict(r)) for r in rows]

    async def passage_vectors(self, corpus: str = DEFAULT_CORPUS) -> tuple[list[str], list[np.ndarray], list[str]]:
        """Every passage's id, vector and text, by id: for ranking a corpus in Python (bench/fusion_sweep.py)."""
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT id, embedding, text FROM passages WHERE corpus = $1 ORDER BY id", corpus)
        return (
            [r["id"] for r in rows],
            [np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in rows],
            [r["text"] for r in rows],
        )

    async def text_ranking(self, question: str, n: int, corpus: str = DEFAULT_CORPUS) -> list[tuple[str, float]]:
        """The hybrid search's text ranking alone: its first `n` (id, rank) pairs, best first."""
        async with self._conn() as conn:
            rows = await conn.fetch(TEXT_RANKING_SQL, question, corpus, n)
        return [(r["id"], r["score"]) for r in rows]

    async def hybrid_search(
        self,
        query: np.ndarray,
        question: str,
        k: int,
        *,
        pool_size: int,
        vector_weight: float,
        corpus: str = DEFAULT_CORPUS,
        exact: bool = False,
    ) -> list[ScoredPassage]:
        """The top `k` of a weighted sum of two rankings of `pool_size` passages each: by cosine to `query`,
        and by full-text rank for `question`. One statement, so one round trip.

        Each ranking's scores are scaled by the largest in size in its pool (its best cosine, unless every
        cosine is below 0; its best text rank), and a passage scores `vector_weight` times its scaled cosine
        plus the rest times its scaled text rank, 0 for a ranking whose pool it is not in; ties go to the
        smaller id by code point. Every passage returned carries its cosine to `query` as its score, a
        full-text hit outside the vector pool included, never its text rank or its fused score. `exact` as
        in `vector_search`.
        """
        async with self._conn() as conn:
            rows = await conn.fetch(HYBRID_SEARCH_SQL[exact], query, question, corpus, pool_size, vector_weight, k)
        return [ScoredPassage(**dict(r)) for r in rows]
