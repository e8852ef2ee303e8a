"""On a refusal, where to look: each retrieved passage's sentence closest to the question, so the reader sees
which sentence of it mattered without reading every passage whole.

"Closest" is the verifier's own judgment of whether a sentence answers the question (read as a claim, as it
judges a claim's relevance) when the verifier makes one (`ports.RanksSentences`) and it tells the passage's
sentences apart; else the sentence's embedding similarity to the question, among the sentences it could not
tell apart (a question about a "fob" the feature verifier scores 0.00 against every sentence: similarity
then finds the one about the keyfob). It is where the answer would most likely be, never a verdict that it
is there: the gate has already said the answer was not found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.inference.embedder import Embedder
from provenance.ports import RanksSentences, ScoredPassage, SentenceScore, Verifier
from provenance.wire import ClosestSentence, RetrievedPassage

# Relevance scores closer than this are not told apart (the page shows two decimals).
RESOLUTION = 0.01


async def closest_sentences(
    question: str, passages: Sequence[ScoredPassage], verifier: Verifier, embedder: Embedder
) -> dict[str, ClosestSentence]:
    """Passage id -> its sentence closest to the question; a passage without sentences has none."""
    if not passages:
        return {}
    relevance, similarity = await sentence_scores(question, passages, verifier, embedder)
    out: dict[str, ClosestSentence] = {}
    for i, (passage, similar) in enumerate(zip(passages, similarity, strict=True)):
        if similar:
            out[passage.id] = _closest(similar, relevance[i] if relevance is not None else None)
    return out


async def sentence_scores(
    question: str, passages: Sequence[ScoredPassage], verifier: Verifier, embedder: Embedder
) -> tuple[list[list[SentenceScore]] | None, list[list[SentenceScore]]]:
    """How close each sentence of each passage (by its stored spans) is to the question: the verifier's
    relevance, when it ranks sentences (else None), and the embedding similarity."""
    relevance: list[list[SentenceScore]] | None = None
    if isinstance(verifier, RanksSentences):
        relevance = await verifier.sentence_relevance(question, passages)
    similarity = await asyncio.to_thread(_by_similarity, question, passages, embedder)
    return relevance, similarity


def ranked(similar: Sequence[SentenceScore], relevant: Sequence[SentenceScore] | None) -> list[int]:
    """A passage's sentences, closest to the question first, by the judgment `closest_sentences` makes: the
    verifier's relevance where it tells them apart, then similarity; the earlier of equals first."""
    use_relevance = relevant is not None and len(relevant) == len(similar)

    def key(k: int) -> tuple[float, float, int]:
        rel = round(relevant[k].score / RESOLUTION) if use_relevance and relevant is not None else 0
        return (-rel, -similar[k].score, k)

    return sorted(range(len(similar)), key=key)


def _closest(similar: Sequence[SentenceScore], relevant: Sequence[SentenceScore] | None) -> ClosestSentence:
    candidates = list(range(len(similar)))
    if relevant is not None and len(relevant) == len(similar):
        best = max(s.score for s in relevant)
        candidates = [k for k, s in enumerate(relevant) if s.score >= best - RESOLUTION]
        if len(candidates) == 1 and best >= RESOLUTION:
            chosen = relevant[candidates[0]]
            return ClosestSentence(start=chosen.start, end=chosen.end, score=round(chosen.score, 4), by="relevance")
    # The first of equals: the earlier sentence, as a reader would come to it.
    chosen = max((similar[k] for k in candidates), key=lambda s: s.score)
    return ClosestSentence(start=chosen.start, end=chosen.end, score=round(chosen.score, 4), by="similarity")


def _by_similarity(question: str, passages: Sequence[ScoredPassage], embedder: Embedder) -> list[list[SentenceScore]]:
    q_vec = embedder.embed_query(question)
    ranges = [T.sentence_ranges(p.text, p.sentences) for p in passages]
    texts = [text for found in ranges for _, _, text in found]
    sims = iter((embedder.embed_documents(texts) @ q_vec).tolist() if texts else [])
    return [[SentenceScore(start, end, max(0.0, float(next(sims)))) for start, end, _ in found] for found in ranges]


def with_closest(records: Sequence[RetrievedPassage], closest: dict[str, ClosestSentence]) -> list[RetrievedPassage]:
    return [msgspec.structs.replace(r, closest=closest.get(r.id)) for r in records]
