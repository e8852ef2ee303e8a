"""Retrieval: embed the question, cosine top-k in pgvector, optionally fused with full-text by RRF."""

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

# Reciprocal rank fusion's constant: a passage scores 1 / (RRF_K + rank) in each ranking it is in. Cormack et
# et al.'s 60 was fitted to fuse many TREC runs deep (recall at 1,000); at 60, a first place in one ranking alone
# (1/61) loses to fifteenth place in both (2/75), so here the word-count text ranking, which ranks a one-line
# passage holding the question's rare word below long ones repeating its common words, outvoted the vector
# ranking's first. 10 lets a first place stand against a middling pair (1/11 against 2/25), while a passage near
# the head of both still leads. Measured without the generator (bench/retrieval_recall.py, docs/retrieval.md):
# recall@4 on the 18F handbook 34/38 -> 35/38, and no lower at k = 1, 4 or 8 on our cases, the paraphrases and
# squad2-normans but squad2-normans at k = 1 (75 -> 74 of 96).
RRF_K = 10


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
            query, question, k, pool_size=max(4 * k, 20), rrf_k=RRF_K, corpus=corpus, exact=exact
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
