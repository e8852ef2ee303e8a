"""Retrieval: embed the question, cosine top-k in pgvector, optionally fused with full-text ranking."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.errors import ModelMismatch
from provenance.inference.embedder import Embedder, embed_query_async
from provenance.ports import ScoredPassage, Usage
from provenance.settings import RetrievalMode
from provenance.store.corpora import CorpusStore
from provenance.timing import Timer
from provenance.wire import DEFAULT_CORPUS, RetrievalStage, RetrievedPassage

# Hybrid retrieval adds the two rankings' scores, each scaled by its pool's largest, the vector ranking's
# weighted VECTOR_WEIGHT: the convex combination that Bruch, Gai and Ingber ("An Analysis of Fusion Functions
# for Hybrid Retrieval", 2023) found better than reciprocal rank fusion. Rank fusion (constant 10 before)
# threw the scores away, and the word-count text ranking has long runs of equal ranks, ordered by id, so a
# passage the vector ranking put first lost to one that happened to sort early in both. Measured without the
# generator (bench/fusion_sweep.py, docs/retrieval.md "Score fusion"): chosen on the 18F handbook, our cases,
# the paraphrases and squad2-normans, at the middle of a plateau (0.65-0.75), it finds no fewer than rank
# fusion at k = 1, 4 or 8 on those or on the sets held out (the conversation suites' standalone questions and
# 1,281 SQuAD 1.1 questions): recall@4 on the 18F handbook 35 -> 36 of 38, the paraphrases 28 -> 31 of 33.
VECTOR_WEIGHT = 0.7
# Passages each ranking draws from. 50 rather than 20 lets a passage 21st-50th in one ranking count: more on
# the choosing suites at k = 1 and 8, and held out 13 SQuAD questions more at k = 4 (where a pool of 20 fell
# below rank fusion), 1-2 conversation questions fewer. The statement's time is ranking every match, not the
# LIMIT: p50 15.8 ms against 15.9 on the handbook.
HYBRID_POOL = 50


def hybrid_pool(k: int) -> int:
    """How many passages each ranking draws from for a top `k`."""
    return max(4 * k, HYBRID_POOL)


class RetrievalOutcome(msgspec.Struct, frozen=True):
    stage: RetrievalStage
    passages: list[ScoredPassage]

    @property
    def usages(self) -> list[Usage]:
        return []  # no model call


async def retrieve(
    question: str,
    embedder: Embedder,
    store: CorpusStore,
    k: int,
    mode: RetrievalMode,
    corpus_model: str | None,
    *,
    corpus: str = DEFAULT_CORPUS,
    exact: bool = False,
) -> RetrievalOutcome:
    """`exact`: rank the corpus's own vectors rather than read the HNSW index over every corpus, for a corpus
    below the index's size (`HNSW_MIN_PASSAGES`), whatever shares the database with it."""
    timer = Timer()
    if corpus_model is not None and corpus_model != embedder.model_name:
        raise ModelMismatch(corpus_model, embedder.model_name)
    embed_timer = Timer()
    query = await embed_query_async(embedder, question)
    embed_ms = embed_timer.ms
    if mode == "hybrid":
        # Fused in the database, one round trip (CorpusStore.hybrid_search); each ranking draws from a pool
        # several times k, so a passage ranked well by either one reaches the top k.
        passages = await store.hybrid_search(
            query, question, k, pool_size=hybrid_pool(k), vector_weight=VECTOR_WEIGHT, corpus=corpus, exact=exact
        )
    else:
        passages = await store.vector_search(query, k, corpus, exact=exact)
    # The sentence units ingest decided for them: every later stage reads these, never a re-split.
    spans = await store.sentence_spans(corpus, T.SEGMENTER_VERSION, [p.id for p in passages])
    passages = [msgspec.structs.replace(p, sentences=spans[p.id]) if p.id in spans else p for p in passages]
    stage = RetrievalStage(
        status="ok",
        ms=timer.ms,
        k=k,
        mode=mode,
        embed_model=embedder.model_name,
        embed_ms=embed_ms,
        passages=passage_records(passages),
        detail=None if passages else "the corpus is empty",
    )
    return RetrievalOutcome(stage, passages)


def passage_records(passages: Sequence[ScoredPassage]) -> list[RetrievedPassage]:
    """The passages as the retrieval record shows them (and the page draws them as the evidence)."""
    return [
        RetrievedPassage(
            id=p.id, source=p.source, heading=p.heading, text=p.text, score=round(p.score, 4), pages=p.pages
        )
        for p in passages
    ]
