"""Evidence that points at its sentence: every claim's support window and, on a refusal, each retrieved
passage's sentence closest to the question, computed on the server and recorded in the AskResponse."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.pipeline.door import Pipeline
from provenance.ports import RanksSentences, ScoredPassage, SentenceScore, Verification
from provenance.services import Services
from provenance.stages.closest import closest_sentences
from provenance.wire import AskResponse

_ids = itertools.count()


async def ask(pipeline: Pipeline, question: str) -> AskResponse:
    return (await pipeline.ask(question, request_id=f"evidence-{next(_ids)}", use_cache=False)).response


def passage_texts(r: AskResponse) -> dict[str, str]:
    return {p.id: p.text for p in r.stages.retrieval.passages}


async def test_every_claim_of_an_answer_points_at_the_sentence_that_supports_it(corpus_services: Services) -> None:
    r = await ask(corpus_services.pipeline, "How much does a standard locker cost per month?")
    assert r.status == "answered", r.message
    texts = passage_texts(r)
    claims = r.stages.gate.claims
    assert claims
    for claim in claims:
        assert claim.evidence, claim
        assert {e.passage_id for e in claim.evidence} <= set(claim.supporting_passage_ids)
        for span in claim.evidence:
            text = texts[span.passage_id]
            assert 0 <= span.start < span.end <= len(text)
            if claim.quoted:
                # A quoted claim's evidence is its own sentence, word for word.
                assert " ".join(text[span.start : span.end].split()) == " ".join(claim.text.split())
    # On the wire, camelCase like the rest.
    wire = msgspec.json.decode(msgspec.json.encode(r))
    assert set(wire["stages"]["groundedness"]["claims"][0]["evidence"][0]) == {"passageId", "start", "end"}


async def test_a_refusal_points_at_each_passages_sentence_closest_to_the_question(corpus_services: Services) -> None:
    r = await ask(corpus_services.pipeline, "Can I bring my friend along when I come in?")
    assert r.status == "refused", r.answer
    passages = r.stages.retrieval.passages
    assert passages and all(p.closest is not None for p in passages)
    for p in passages:
        assert p.closest is not None
        # The feature verifier's relevance, or similarity where it can't tell the sentences apart.
        assert p.closest.by in {"relevance", "similarity"}
        sentence = p.text[p.closest.start : p.closest.end]
        assert " ".join(sentence.split()) in {" ".join(s.split()) for s in T.split_sentences(p.text)}
    shown = {p.text[p.closest.start : p.closest.end] for p in passages if p.closest}
    assert any("guests" in s for s in shown), shown


async def test_an_answer_records_no_closest_sentence(corpus_services: Services) -> None:
    r = await ask(corpus_services.pipeline, "What are the opening hours on Saturday?")
    assert r.status == "answered"
    assert all(p.closest is None for p in r.stages.retrieval.passages)


class _NoRanking:
    """A verifier that judges claims but not sentences: the closest sentence falls back to similarity."""

    name = "no-ranking"

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        return Verification(verdicts=[])


async def test_without_the_verifiers_judgment_closest_is_by_similarity(corpus_services: Services) -> None:
    assert isinstance(corpus_services.profile.verifier, RanksSentences)
    assert not isinstance(_NoRanking(), RanksSentences)
    found = await closest_sentences("How many guests can I bring?", [GUESTS], _NoRanking(), corpus_services.embedder)
    closest = found["a#b"]
    assert closest.by == "similarity"
    assert GUESTS.text[closest.start : closest.end] == "Members may bring up to two guests at a time."


GUESTS = ScoredPassage(
    id="a#b",
    source="a.md",
    heading="Guests",
    text="The wood shop closes at 9pm. Members may bring up to two guests at a time. Guests sign in.",
    score=0.5,
)


class _Ranks:
    """A verifier that scores each sentence as given."""

    name = "ranks"

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        return Verification(verdicts=[])

    async def sentence_relevance(self, question: str, passages: Sequence[ScoredPassage]) -> list[list[SentenceScore]]:
        return [
            [SentenceScore(s, e, x) for (s, e, _), x in zip(T.sentence_ranges(p.text), self.scores, strict=True)]
            for p in passages
        ]


async def test_closest_is_by_relevance_where_it_tells_the_sentences_apart(corpus_services: Services) -> None:
    embedder = corpus_services.embedder
    # Relevance decides, even against similarity.
    found = await closest_sentences("How many guests can I bring?", [GUESTS], _Ranks([0.1, 0.02, 0.9]), embedder)
    assert (found["a#b"].by, found["a#b"].score) == ("relevance", 0.9)
    assert GUESTS.text[found["a#b"].start : found["a#b"].end] == "Guests sign in."
    # Where it can't (all about nothing, or two within a hundredth), similarity chooses among the tied.
    for scores in ([0.0, 0.0007, 0.0], [0.5, 0.495, 0.1]):
        found = await closest_sentences("How many guests can I bring?", [GUESTS], _Ranks(scores), embedder)
        closest = found["a#b"]
        assert closest.by == "similarity", scores
        assert GUESTS.text[closest.start : closest.end] == "Members may bring up to two guests at a time."


async def test_a_lost_fob_refusal_points_at_the_keyfob_sentence(corpus_services: Services) -> None:
    r = await ask(corpus_services.pipeline, "How much is a new fob if I lose mine?")
    assert r.status == "refused"
    shown = [p.text[p.closest.start : p.closest.end] for p in r.stages.retrieval.passages if p.closest]
    assert any("keyfob" in s for s in shown), shown
