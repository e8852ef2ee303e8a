"""Evidence that points at its sentence: every claim's support window and, on a refusal, each retrieved
passage's sentence closest to the question, computed on the server and recorded in the AskResponse."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.models import AskResponse
from provenance.passages import ScoredPassage
from provenance.pipeline import Pipeline
from provenance.ports import RanksSentences, Verification
from provenance.services import Services
from provenance.stages.closest import closest_sentences

_ids = itertools.count()


async def ask(pipeline: Pipeline, question: str) -> AskResponse:
    return (await pipeline.ask(question, request_id=f"evidence-{next(_ids)}", use_cache=False)).response


def passage_texts(r: AskResponse) -> dict[str, str]:
    return {p.id: p.text for p in r.stages.retrieval.passages}


async def test_every_claim_of_an_answer_points_at_the_sentence_that_supports_it(corpus_services: Services) -> None:
    r = await ask(corpus_services.pipeline, "How much does a standard locker cost per month?")
    assert r.status == "answered", r.message
    texts = passage_texts(r)
    claims = r.stages.groundedness.claims
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
        assert p.closest.by == "relevance"  # the feature verifier judges it
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
    passages = [
        ScoredPassage(
            id="a#b",
            source="a.md",
            heading="Guests",
            text="The wood shop closes at 9pm. Members may bring up to two guests at a time. Guests sign in.",
            score=0.5,
        )
    ]
    found = await closest_sentences("How many guests can I bring?", passages, _NoRanking(), corpus_services.embedder)
    closest = found["a#b"]
    assert closest.by == "similarity"
    assert passages[0].text[closest.start : closest.end] == "Members may bring up to two guests at a time."
