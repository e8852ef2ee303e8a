"""On a refusal, where to look: each retrieved passage's sentence closest to the question, so the reader sees
which sentence of it mattered without reading every passage whole.

"Closest" is the verifier's own judgment of whether a sentence answers the question (read as a claim, as it
judges a claim's relevance) when the verifier makes one (`ports.RanksSentences`), else the sentence's
embedding similarity to the question. It is where the answer would most likely be, never a verdict that it
is there: the gate has already said the answer was not found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal

import msgspec
import numpy as np

from provenance import text as T
from provenance.embedder import Embedder
from provenance.models import ClosestSentence, RetrievedPassage
from provenance.passages import ScoredPassage
from provenance.ports import RanksSentences, SentenceScore, Verifier


async def closest_sentences(
    question: str, passages: Sequence[ScoredPassage], verifier: Verifier, embedder: Embedder
) -> dict[str, ClosestSentence]:
    """Passage id -> its sentence closest to the question; a passage without sentences has none."""
    if not passages:
        return {}
    by: Literal["relevance", "similarity"]
    if isinstance(verifier, RanksSentences):
        scored = await verifier.sentence_relevance(question, passages)
        by = "relevance"
    else:
        scored = await asyncio.to_thread(_by_similarity, question, passages, embedder)
        by = "similarity"
    out: dict[str, ClosestSentence] = {}
    for passage, sentences in zip(passages, scored, strict=True):
        if sentences:
            # The first of equals: the earlier sentence, as a reader would come to it.
            best = max(sentences, key=lambda s: s.score)
            out[passage.id] = ClosestSentence(start=best.start, end=best.end, score=round(best.score, 4), by=by)
    return out


def _by_similarity(question: str, passages: Sequence[ScoredPassage], embedder: Embedder) -> list[list[SentenceScore]]:
    q_vec = embedder.embed_query(question)
    ranges = [T.sentence_ranges(p.text) for p in passages]
    texts = [text for found in ranges for _, _, text in found]
    sims = iter((embedder.embed_documents(texts) @ q_vec).tolist() if texts else np.zeros(0).tolist())
    return [[SentenceScore(start, end, max(0.0, float(next(sims)))) for start, end, _ in found] for found in ranges]


def with_closest(records: Sequence[RetrievedPassage], closest: dict[str, ClosestSentence]) -> list[RetrievedPassage]:
    return [msgspec.structs.replace(r, closest=closest.get(r.id)) for r in records]
