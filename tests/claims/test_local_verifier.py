"""The local profile's verifier and generator rules, on real embeddings (no database needed)."""

from __future__ import annotations

import pytest

from provenance import text as T
from provenance.claims.features import FeatureVerifier, build_feature_verifier
from provenance.claims.support import FACT_VETO, NEGATION_VETO, NOT_SELF_CONTAINED_CAP, QUOTED_SUPPORT, RuleSupport
from provenance.claims.vectors import SentenceEmbeddings
from provenance.inference.embedder import Embedder
from provenance.ports import ClaimVerdict, ScoredPassage
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
    v.set_corpus([(PASSAGE.text, ())])
    return v


async def verdict(verifier: FeatureVerifier, question: str, claim: str) -> ClaimVerdict:
    verification = await verifier.verify(question, [claim], [PASSAGE])
    return verification.verdicts[0]


def test_quoted_in_ignores_line_breaks_and_spacing_only() -> None:
    assert T.quoted_in("costs $14   per month.", PASSAGE.text)
    assert T.quoted_in("per month.\nLockers are rented", PASSAGE.text)
    assert not T.quoted_in("costs $15 per month.", PASSAGE.text)
    assert not T.quoted_in("Costs $14 per month.", PASSAGE.text)


async def test_a_quoted_claim_is_judged_on_relevance_alone(verifier: FeatureVerifier, embedder: Embedder) -> None:
    claim = "A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month."
    relevance = verifier.relevance_of(
        QUESTION, claim, verifier.relevance.sentences.get([claim])[0], embedder.embed_query(QUESTION), PASSAGE
    )
    got = await verdict(verifier, QUESTION, claim)
    # Quoted word for word: its support is certain, and only its relevance is estimated.
    assert got.quoted and got.support == QUOTED_SUPPORT == 1.0
    assert got.relevance == pytest.approx(relevance, abs=1e-4)
    assert got.supporting_passage_ids == [PASSAGE.id]


def test_only_a_whole_sentence_counts_as_quoted() -> None:
    text = "If you join before May, the joining fee is $30. Otherwise it is $45."
    assert T.is_sentence_of("Otherwise it is   $45.", text)
    assert T.quoted_in("the joining fee is $30.", text)
    assert not T.is_sentence_of("the joining fee is $30.", text)


async def test_a_quoted_fragment_keeps_the_support_estimate(verifier: FeatureVerifier, embedder: Embedder) -> None:
    fragment = "standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month."
    assert T.quoted_in(fragment, PASSAGE.text) and not T.is_sentence_of(fragment, PASSAGE.text)
    (judged,) = verifier.support.check([fragment], [PASSAGE])[0]
    got = await verdict(verifier, QUESTION, fragment)
    # Not a whole sentence: support is the support judge's estimate, below the certainty of a quote.
    assert not got.quoted and not judged.quoted
    assert got.support == pytest.approx(judged.score, abs=1e-4)
    assert judged.veto is None and judged.features is not None
    assert got.support < QUOTED_SUPPORT


async def test_an_unquoted_claim_keeps_the_support_estimate(verifier: FeatureVerifier) -> None:
    # Not word for word (the passage has the dimensions in between): support is estimated, not certain,
    # and a changed amount lowers it.
    faithful = "A standard locker costs $14 per month."
    assert not T.quoted_in(faithful, PASSAGE.text)
    altered = (await verdict(verifier, QUESTION, "A standard locker costs $41 per month.")).support
    assert altered < (await verdict(verifier, QUESTION, faithful)).support
    assert altered < 0.40


async def test_a_quoted_claim_that_does_not_answer_still_fails(verifier: FeatureVerifier) -> None:
    claim = "Lockers are rented by the calendar month at the front desk."
    assert T.quoted_in(claim, PASSAGE.text)
    got = await verdict(verifier, "Can I bring my dog to the makerspace?", claim)
    # True (quoted), but no answer: it fails on relevance, not support.
    assert got.quoted and got.support == 1.0
    assert got.relevance is not None and got.relevance < 0.40


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


# --- support, judged without the question ------------------------------------------------------------

KEYFOB = ScoredPassage(
    id="02-hours-and-access.md#keyfob-access",
    source="02-hours-and-access.md",
    heading="Hours and Access > Keyfob Access",
    text=(
        "Every member receives a keyfob when joining. A Keyholder keyfob opens the main entrance at any hour.\n\n"
        "A replacement keyfob costs $15. A Keyholder working alone outside opening hours must not use the laser "
        "cutter, the CNC router or the table saw."
    ),
    score=0.8,
)


@pytest.fixture(scope="module")
def rule_support(embedder: Embedder) -> RuleSupport:
    judge = build_feature_verifier(embedder).support
    judge.set_corpus([(KEYFOB.text, ())])
    return judge


def test_support_a_verbatim_sentence_is_certain_and_located(rule_support: RuleSupport) -> None:
    claim = "A replacement keyfob costs $15."
    (judged,) = rule_support.check([claim], [KEYFOB])[0]
    assert judged.quoted and judged.score == QUOTED_SUPPORT and judged.veto is None
    assert KEYFOB.text[judged.start : judged.end] == claim


def test_support_a_changed_number_is_vetoed(rule_support: RuleSupport) -> None:
    (judged,) = rule_support.check(["A replacement keyfob costs $25."], [KEYFOB])[0]
    assert judged.veto == "fact_not_stated" and judged.score <= FACT_VETO and not judged.quoted
    # A unit the passage doesn't state is a changed fact too.
    (monthly,) = rule_support.check(["A replacement keyfob costs $15 per month."], [KEYFOB])[0]
    assert monthly.veto == "fact_not_stated" and monthly.score <= FACT_VETO


def test_support_a_flipped_rule_is_vetoed(rule_support: RuleSupport) -> None:
    claim = "A Keyholder working alone outside opening hours may use the laser cutter."
    (judged,) = rule_support.check([claim], [KEYFOB])[0]
    assert judged.veto == "negation_flipped" and judged.score <= NEGATION_VETO
    # Its words are all the passage's: only the veto tells it apart.
    assert judged.features is not None and judged.features.coverage == 1.0


def test_support_a_claim_pointing_outside_itself_is_capped(rule_support: RuleSupport) -> None:
    # "It" is the keyfob only in the sentence before; on its own the claim says nothing the passage states.
    (judged,) = rule_support.check(["It costs $15."], [KEYFOB])[0]
    assert judged.veto == "not_self_contained" and judged.score == NOT_SELF_CONTAINED_CAP
    # A self-contained restatement of the same fact passes.
    (restated,) = rule_support.check(["Replacing a keyfob costs $15."], [KEYFOB])[0]
    assert restated.veto is None and restated.score >= 0.7


def test_support_ignores_the_question(verifier: FeatureVerifier) -> None:
    # The same claim against the same passage is as supported whatever was asked.
    claim = "A standard locker costs $14 per month."
    asked = [verifier.verify_now(q, [claim], [PASSAGE]).verdicts[0] for q in (QUESTION, "Can I bring my dog?")]
    assert asked[0].support == asked[1].support
    assert asked[0].relevance is not None and asked[1].relevance is not None
    assert asked[1].relevance < asked[0].relevance
