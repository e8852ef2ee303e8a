"""Retrieval: embed the question, cosine top-k in pgvector, optionally fused with full-text by RRF."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from provenance.corpora import DEFAULT_CORPUS
from provenance.embedder import Embedder, embed_query_async
from provenance.errors import ServiceError
from provenance.models import RetrievalStage, RetrievedPassage
from provenance.passages import ScoredPassage
from provenance.store import Store
from provenance.timing import Timer

RRF_K = 60  # the constant from Cormack et al. (2009); damps the head of each ranking


class RetrievalOutcome(msgspec.Struct, frozen=True):
    stage: RetrievalStage
    passages: list[ScoredPassage]


class ModelMismatch(ServiceError):
    def __init__(self, stored: str, configured: str) -> None:
        super().__init__(
            409,
            "embedding_model_mismatch",
            f"the passages were embedded with {stored!r} but EMBED_MODEL is {configured!r}; "
            "run `provenance ingest` with the new model (or set EMBED_MODEL back)",
        )


def reciprocal_rank_fusion(rankings: list[list[str]], k: int = RRF_K) -> list[str]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda pid: (-scores[pid], pid))


async def retrieve(
    question: str,
    embedder: Embedder,
    store: Store,
    k: int,
    mode: str,
    corpus_model: str | None,
    *,
    corpus: str = DEFAULT_CORPUS,
) -> RetrievalOutcome:
    timer = Timer()
    if corpus_model is not None and corpus_model != embedder.model_name:
        raise ModelMismatch(corpus_model, embedder.model_name)
    embed_timer = Timer()
    query = await embed_query_async(embedder, question)
    embed_ms = embed_timer.ms
    if mode == "hybrid":
        pool_size = max(4 * k, 20)
        vector_hits = await store.vector_search(query, pool_size, corpus)
        text_hits = await store.text_search(question, pool_size, corpus)
        fused = reciprocal_rank_fusion([[p.id for p in vector_hits], [p.id for p in text_hits]])[:k]
        by_id = {p.id: p for p in vector_hits}
        missing = [pid for pid in fused if pid not in by_id]
        if missing:
            # A full-text hit outside the vector pool: show its real cosine, not the text rank.
            vectors = await store.embeddings_for(missing, corpus)
            for p in text_hits:
                if p.id in vectors:
                    by_id[p.id] = msgspec.structs.replace(p, score=float(np.dot(vectors[p.id], query)))
        passages = [by_id[pid] for pid in fused if pid in by_id]
    else:
        passages = await store.vector_search(query, k, corpus)
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
        RetrievedPassage(id=p.id, source=p.source, heading=p.heading, text=p.text, score=round(p.score, 4))
        for p in passages
    ]
