"""The local profile's verifier and generator rules, on real embeddings (no database needed)."""

from __future__ import annotations

import pytest

from provenance import text as T
from provenance.embedder import Embedder
from provenance.feature_verifier import (
    RELEVANCE_FEATURES,
    FeatureVerifier,
    SentenceEmbeddings,
    build_feature_verifier,
)
from provenance.passages import ScoredPassage
from provenance.profiles.local import ExtractiveGenerator

PASSAGE = ScoredPassage(
    id="lockers.md#1",
    source="lockers.md",
    heading="Lockers > Renting a locker",
    text=(
        "A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month.\n"
        "Lockers are rented by the calendar month at the front desk."
    ),
    score=0.9,
)
QUESTION = "How much does a standard locker cost per month?"


@pytest.fixture(scope="module")
def verifier(embedder: Embedder) -> FeatureVerifier:
    v = build_feature_verifier(embedder)
    v.extractor.set_corpus([PASSAGE.text])
    return v


async def score(verifier: FeatureVerifier, question: str, claim: str) -> float:
    verification = await verifier.verify(question, [claim], [PASSAGE])
    return verification.verdicts[0].score


def test_quoted_in_ignores_line_breaks_and_spacing_only() -> None:
    assert T.quoted_in("costs $14   per month.", PASSAGE.text)
    assert T.quoted_in("per month.\nLockers are rented", PASSAGE.text)
    assert not T.quoted_in("costs $15 per month.", PASSAGE.text)
    assert not T.quoted_in("Costs $14 per month.", PASSAGE.text)


async def test_a_quoted_claim_is_judged_on_relevance_alone(verifier: FeatureVerifier, embedder: Embedder) -> None:
    claim = "A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month."
    features = verifier.extractor.features(
        QUESTION, claim, verifier.extractor.sentences.get([claim])[0], embedder.embed_query(QUESTION), PASSAGE
    )
    relevance = verifier.coef.relevance.probability(features[-len(RELEVANCE_FEATURES) :])
    assert await score(verifier, QUESTION, claim) == pytest.approx(relevance, abs=1e-4)
    assert verifier.probability(features, quoted=True) > verifier.probability(features)


def test_only_a_whole_sentence_counts_as_quoted() -> None:
    text = "If you join before May, the joining fee is $30. Otherwise it is $45."
    assert T.is_sentence_of("Otherwise it is   $45.", text)
    assert T.quoted_in("the joining fee is $30.", text)
    assert not T.is_sentence_of("the joining fee is $30.", text)


async def test_a_quoted_fragment_keeps_the_support_estimate(verifier: FeatureVerifier, embedder: Embedder) -> None:
    fragment = "standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month."
    assert T.quoted_in(fragment, PASSAGE.text) and not T.is_sentence_of(fragment, PASSAGE.text)
    features = verifier.extractor.features(
        QUESTION, fragment, verifier.extractor.sentences.get([fragment])[0], embedder.embed_query(QUESTION), PASSAGE
    )
    assert await score(verifier, QUESTION, fragment) == pytest.approx(verifier.probability(features), abs=1e-4)
    assert verifier.probability(features) < verifier.probability(features, quoted=True)


async def test_an_unquoted_claim_keeps_the_support_estimate(verifier: FeatureVerifier) -> None:
    # Not word for word (the passage has the dimensions in between): support is estimated, not certain,
    # and a changed amount lowers it.
    faithful = "A standard locker costs $14 per month."
    assert not T.quoted_in(faithful, PASSAGE.text)
    altered = await score(verifier, QUESTION, "A standard locker costs $41 per month.")
    assert altered < await score(verifier, QUESTION, faithful)
    assert altered < 0.40


async def test_a_quoted_claim_that_does_not_answer_still_fails(verifier: FeatureVerifier) -> None:
    claim = "Lockers are rented by the calendar month at the front desk."
    assert T.quoted_in(claim, PASSAGE.text)
    assert await score(verifier, "Can I bring my dog to the makerspace?", claim) < 0.40


async def test_the_generator_quotes_a_sentence_two_passages_share_once(embedder: Embedder) -> None:
    shared = "Keyholder membership includes one standard locker at no extra cost."
    passages = [
        ScoredPassage(id="a#1", source="a", heading="Membership", text=f"{shared} Keyholders get a key.", score=0.9),
        ScoredPassage(id="b#1", source="b", heading="Lockers", text=f"{shared} Lockers cost $14.", score=0.8),
    ]
    generator = ExtractiveGenerator(SentenceEmbeddings(embedder))
    generation = await generator.generate("Does Keyholder membership include a standard locker?", passages)
    assert generation.answer.count(shared) == 1
    assert generation.used_passage_ids[0] == "a#1"


async def test_a_partial_answer_names_the_part_no_sentence_answers(embedder: Embedder) -> None:
    passages = [PASSAGE]
    generator = ExtractiveGenerator(SentenceEmbeddings(embedder))
    both = await generator.generate("How much does a standard locker cost per month, and is there wifi?", passages)
    assert "$14" in both.answer
    assert both.answer.endswith('The documents don\'t cover "Is there wifi?".')
    one = await generator.generate(QUESTION, passages)
    assert "don't cover" not in one.answer
