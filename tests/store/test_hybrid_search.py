"""Hybrid retrieval is one SQL statement (CorpusStore.hybrid_search, the fusion in a CTE). It replaced two
searches and a fusion in Python; that path is kept here as the reference the statement must agree with, its
fusion the one bench/fusion_sweep.py chose the weights with (`weighted_fusion`): same ids in the same order
(ties included) and the same scores, on our corpus and on a small one built for ties."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest

from bench.fusion_sweep import weighted_fusion
from provenance.ingest.chunking import Chunk
from provenance.ports import ScoredPassage
from provenance.services import Services
from provenance.settings import Settings
from provenance.stages.retrieve import VECTOR_WEIGHT, hybrid_pool
from provenance.store import Store
from provenance.store.corpora import CorpusStore
from provenance.store.pool import HNSW_EF_SEARCH

# The full-text ranking exactly as the replaced Store.text_search ran it.
TEXT_SEARCH_SQL = """
WITH q AS (
    SELECT to_tsquery('english', coalesce((
        SELECT string_agg(quote_literal(lexeme), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('english', $1))) AS lexeme
    ), '')) AS query
)
SELECT id, source, heading, text, ts_rank_cd(tsv, q.query) AS score
FROM passages, q
WHERE corpus = $3 AND tsv @@ q.query
ORDER BY score DESC, id
LIMIT $2
"""


KEPT = [VECTOR_WEIGHT, 1 - VECTOR_WEIGHT]  # the weights retrieval fuses with


async def python_hybrid(
    store: CorpusStore,
    query: np.ndarray,
    question: str,
    k: int,
    pool_size: int,
    corpus: str = "default",
    weight: float = VECTOR_WEIGHT,
) -> list[ScoredPassage]:
    """The replaced retrieval path: three round trips and the fusion above."""
    vector_hits = await store.vector_search(query, pool_size, corpus)
    async with store.pool.acquire() as conn:
        text_hits = [ScoredPassage(**dict(r)) for r in await conn.fetch(TEXT_SEARCH_SQL, question, pool_size, corpus)]
    fused = weighted_fusion(
        [[(p.id, p.score) for p in vector_hits], [(p.id, p.score) for p in text_hits]], [weight, 1 - weight]
    )[:k]
    by_id = {p.id: p for p in vector_hits}
    missing = [pid for pid in fused if pid not in by_id]
    if missing:
        async with store.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, embedding FROM passages WHERE corpus = $1 AND id = ANY($2::text[])", corpus, missing
            )
        vectors = {r["id"]: np.asarray(r["embedding"].to_numpy(), dtype=np.float32) for r in rows}
        for p in text_hits:
            if p.id in vectors:
                by_id[p.id] = ScoredPassage(p.id, p.source, p.heading, p.text, float(np.dot(vectors[p.id], query)))
    return [by_id[pid] for pid in fused if pid in by_id]


def assert_same(got: list[ScoredPassage], want: list[ScoredPassage], vector_pool: set[str]) -> None:
    assert [p.id for p in got] == [p.id for p in want]
    assert [(p.source, p.heading, p.text) for p in got] == [(p.source, p.heading, p.text) for p in want]
    for g, w in zip(got, want, strict=True):
        if g.id in vector_pool:
            # The same expression, 1 - (embedding <=> query), computed by Postgres both times.
            assert g.score == w.score
        else:
            # A full-text hit outside the vector pool: the replaced path took the float32 dot product with the
            # stored (unit) vector; the statement takes pgvector's cosine, the same number to float32 rounding.
            assert g.score == pytest.approx(w.score, abs=1e-6)


def test_weighted_fusion() -> None:
    # Scaled by each ranking's best: a (0.8 -> 1) 0.7; b (0.4 -> 0.5, and the text's best) 0.35 + 0.3; c 0.15.
    assert weighted_fusion([[("a", 0.8), ("b", 0.4)], [("b", 2.0), ("c", 1.0)]], KEPT) == ["a", "b", "c"]
    # The weights decide: at 0.5 each, b (0.25 + 0.5) passes a (0.5).
    assert weighted_fusion([[("a", 0.8), ("b", 0.4)], [("b", 2.0), ("c", 1.0)]], [0.5, 0.5]) == ["b", "a", "c"]
    # A ranking's units don't matter, only its scores over its best.
    assert weighted_fusion([[("a", 0.8), ("b", 0.4)], [("b", 20.0), ("c", 10.0)]], KEPT) == ["a", "b", "c"]
    # Equal text ranks add equally, whatever order the text ranking listed them in (rank fusion gave the
    # first listed more): the vector ranking's order stands.
    assert weighted_fusion([[("a", 0.9), ("b", 0.6)], [("b", 1.0), ("a", 1.0)]], KEPT) == ["a", "b"]
    # Cosines all below 0 keep their order (-0.2 scales to -0.5, -0.4 to -1); exact ties go to the smaller id.
    assert weighted_fusion([[("x", -0.2), ("v", -0.4)], []], KEPT) == ["x", "v"]
    assert weighted_fusion([[("x", -0.2)], [("y", 1.0)]], KEPT) == ["y", "x"]
    assert weighted_fusion([[("z", 0.5)], [("w", 3.0)]], [0.5, 0.5]) == ["w", "z"]
    assert weighted_fusion([[], []], KEPT) == []


QUESTIONS = [
    "When is the annual general meeting?",
    "How much does a standard locker cost per month?",
    "Can I bring my dog to the workshop?",
    "laser cutter induction safety glasses",
    "What is the capital of France?",
]


@pytest.mark.parametrize("question", QUESTIONS)
async def test_statement_matches_python_fusion_on_our_corpus(corpus_services: Services, question: str) -> None:
    s = corpus_services
    query = s.embedder.embed_query(question)
    for k, pool_size in [(4, 20), (5, 20), (10, 40), (3, 3), (8, 4)]:
        got = await s.store.hybrid_search(query, question, k, pool_size=pool_size, vector_weight=VECTOR_WEIGHT)
        want = await python_hybrid(s.store, query, question, k, pool_size)
        pool = {p.id for p in await s.store.vector_search(query, pool_size)}
        assert_same(got, want, pool)


async def test_text_ranking_is_the_hybrid_statements_own(corpus_services: Services) -> None:
    """The text ranking the fusion bench reads (bench/fusion_sweep.py) is the statement's: with no weight on
    the vector ranking, the hybrid search's order is the text ranking's, and it agrees with the reference."""
    s = corpus_services
    question = "How much does a standard locker cost per month?"
    ranking = await s.store.text_ranking(question, 10)
    assert ranking and [score for _, score in ranking] == sorted((score for _, score in ranking), reverse=True)
    async with s.store.pool.acquire() as conn:
        reference = await conn.fetch(TEXT_SEARCH_SQL, question, 10, "default")
    assert ranking == [(r["id"], pytest.approx(r["score"])) for r in reference]
    far = unit(-s.embedder.embed_query(question))
    text_only = await s.store.hybrid_search(far, question, 5, pool_size=10, vector_weight=0.0)
    assert [p.id for p in text_only] == [pid for pid, _ in ranking[:5]]


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


async def test_statement_matches_python_fusion_on_ties(fresh_store: Store) -> None:
    """A corpus built for the cases the fusion must break the same way: a passage first by vector and
    another first by text tie exactly, and the smaller id by code point wins ("Zeta" < "alpha", though a
    linguistic collation puts alpha first); equal text ranks order by id; and full-text hits outside the
    vector pool carry their cosine."""
    async with fresh_store.pool.acquire() as conn:
        # Our embedded Postgres sorts text by code point (C.UTF-8, and no ICU), where ORDER BY id alone would
        # pass. Where the server has a linguistic collation (as an en_US database does), the ids get it, to
        # show the statement still breaks ties by code point, as Python's sort did.
        for collation in ("en_US.utf8", "en-x-icu", "unicode"):
            try:
                await conn.execute(f'ALTER TABLE passages ALTER COLUMN id TYPE text COLLATE "{collation}"')
                break
            except asyncpg.PostgresError:
                continue  # not in this server (no such locale, or built without ICU)
    rng = np.random.default_rng(15)
    query = unit(rng.standard_normal(384))
    # Nearest first: Zeta is the query's nearest passage, the rest ever further away.
    texts = {
        "Zeta.md#a": "Nothing about fruit here.",
        "alpha.md#a": "An apple orchard.",
        "beta.md#a": "An apple orchard.",
        "gamma.md#a": "An apple orchard with pears.",
        "delta.md#a": "Pears and plums.",
        "epsilon.md#a": "Plums only.",
    }
    rows, vectors = [], {}
    for i, (pid, text) in enumerate(texts.items()):
        source = pid.split("#")[0]
        noise = unit(rng.standard_normal(384))
        vectors[pid] = unit(query * (1.0 - 0.15 * i) + noise * 0.15 * i)
        rows.append(Chunk(pid, source, "H", 0, text, 4))
    await fresh_store.replace_corpus(rows, vectors, "synthetic", "v1", "fp", [])
    distances = [float(np.dot(vectors[pid], query)) for pid in texts]
    assert distances == sorted(distances, reverse=True), "the vector ranking should follow the dict's order"

    for question in ["apple", "apple pears", "plums pears apple", "orchard"]:
        for k, pool_size in [(1, 1), (2, 1), (3, 2), (6, 2), (6, 6), (4, 3)]:
            for weight in (VECTOR_WEIGHT, 0.5, 0.2):
                got = await fresh_store.hybrid_search(query, question, k, pool_size=pool_size, vector_weight=weight)
                want = await python_hybrid(fresh_store, query, question, k, pool_size, weight=weight)
                pool = {p.id for p in await fresh_store.vector_search(query, pool_size)}
                assert_same(got, want, pool)

    # The tie itself: at equal weights, Zeta (1st by vector) and alpha (1st by text, before beta by id) score
    # 0.5 each, and Zeta sorts first by code point.
    got = await fresh_store.hybrid_search(query, "apple", 2, pool_size=1, vector_weight=0.5)
    assert [p.id for p in got] == ["Zeta.md#a", "alpha.md#a"]
    # Scores are cosines, never a text rank or the fused score.
    for p in got:
        assert p.score == pytest.approx(float(np.dot(vectors[p.id], query)), abs=1e-6)


async def test_a_lexeme_most_passages_hold_is_left_out_of_the_text_query(
    fresh_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranking every passage that shares a lexeme with the question is what made retrieval grow with the
    corpus: a lexeme in more than COMMON_LEXEME_PASSAGES passages is counted at the switch and left out, so a
    question's rare word still finds its passages and a common one no longer ranks them all."""
    from provenance.store import corpora as store_module

    monkeypatch.setattr(store_module, "COMMON_LEXEME_PASSAGES", 3)
    rng = np.random.default_rng(3)
    texts = [f"Members pay the fee number {i}." for i in range(5)] + ["Members may rent a locker."]
    rows = [Chunk(f"f{i}.md#a", f"f{i}.md", "", 0, text, 6) for i, text in enumerate(texts)]
    vectors = {c.id: unit(rng.standard_normal(384)) for c in rows}
    await fresh_store.replace_corpus(rows, vectors, "synthetic", "v1", "fp", [])
    async with fresh_store.pool.acquire() as conn:
        common = {r["lexeme"]: r["passages"] for r in await conn.fetch("SELECT lexeme, passages FROM common_lexemes")}
    assert common == {"member": 6, "pay": 5, "fee": 5, "number": 5}
    far = unit(rng.standard_normal(384))  # a query vector near none of them: what comes first is the text's
    got = await fresh_store.hybrid_search(
        far, "Can members rent a locker?", 2, pool_size=1, vector_weight=VECTOR_WEIGHT
    )
    assert "f5.md#a" in [p.id for p in got]
    # Only common lexemes: no text ranking at all, the vector half alone.
    only_common = await fresh_store.hybrid_search(
        far, "What fee do members pay?", 3, pool_size=3, vector_weight=VECTOR_WEIGHT
    )
    assert [p.id for p in only_common] == [p.id for p in await fresh_store.vector_search(far, 3)]
    # A corpus at or under the bound lists none, so its retrieval is what it was; a removed one keeps none.
    monkeypatch.setattr(store_module, "COMMON_LEXEME_PASSAGES", 6)
    await fresh_store.replace_corpus(rows, vectors, "synthetic", "v2", "fp2", [])
    async with fresh_store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM common_lexemes") == 0


async def test_pool_connections_scan_hnsw_iteratively(fresh_store: Store) -> None:
    """The pool's connections carry hnsw.iterative_scan (what SET LOCAL in a transaction used to do), and a
    search depth that fills hybrid retrieval's pool at the default k in one pass of the index."""
    async with fresh_store.pool.acquire() as conn:
        await conn.fetchval("SELECT '[1,2,3]'::vector")  # loads pgvector, which defines the setting
        assert await conn.fetchval("SHOW hnsw.iterative_scan") == "strict_order"
        ef_search = int(await conn.fetchval("SHOW hnsw.ef_search"))
    assert ef_search == HNSW_EF_SEARCH >= hybrid_pool(Settings().retrieval.k)


async def test_a_small_corpus_is_ranked_exactly_whatever_index_the_database_has(fresh_store: Store) -> None:
    """The HNSW index is one over every corpus, so a small corpus beside a large one reads the large one's
    rows through it; `exact` ranks the corpus's own rows instead. Same passages, same order, and the plan
    says which path each variant takes."""
    from provenance.store.search import HYBRID_SEARCH_SQL, VECTOR_SEARCH_SQL

    rng = np.random.default_rng(37)
    vectors = {f"doc{i}.md#p": unit(rng.standard_normal(384)) for i in range(40)}
    rows = [Chunk(pid, pid.split("#")[0], "H", 0, f"Passage {i} about lockers.", 6) for i, pid in enumerate(vectors)]
    await fresh_store.replace_corpus(rows, vectors, "synthetic", "v1", "fp", [])
    assert await fresh_store.ensure_hnsw_index()
    query = unit(rng.standard_normal(384))
    want = sorted(vectors, key=lambda pid: -float(np.dot(vectors[pid], query)))[:5]
    exact = await fresh_store.vector_search(query, 5, exact=True)
    assert [p.id for p in exact] == want
    by_index = await fresh_store.hybrid_search(query, "lockers", 4, pool_size=20, vector_weight=VECTOR_WEIGHT)
    exactly = await fresh_store.hybrid_search(
        query, "lockers", 4, pool_size=20, vector_weight=VECTOR_WEIGHT, exact=True
    )
    assert [p.id for p in exactly] == [p.id for p in by_index]
    async with fresh_store.pool.acquire() as conn, conn.transaction():
        # 40 rows: left to itself the planner sorts them either way; with sorting priced out, whatever can use
        # the index does.
        await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off")
        plans = {}
        for exact_scan in (False, True):
            vector = await conn.fetch(f"EXPLAIN {VECTOR_SEARCH_SQL[exact_scan]}", query, 5, "default")
            hybrid = await conn.fetch(
                f"EXPLAIN {HYBRID_SEARCH_SQL[exact_scan]}", query, "lockers", "default", 20, VECTOR_WEIGHT, 4
            )
            plans[exact_scan] = "\n".join(r[0] for r in [*vector, *hybrid])
    assert plans[False].count("passages_embedding_hnsw") == 2, plans[False]
    assert "passages_embedding_hnsw" not in plans[True]
