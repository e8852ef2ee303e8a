"""The quoted-answer rule (claims.relevance): when a sentence quoted word for word is confirmed to answer,
whatever the coverage model says; and when it is not (another thing's value, another year, a word the
documents never use)."""

from __future__ import annotations

import pytest

from provenance.claims.answer_types import answer_type_match, expected_answer_type
from provenance.claims.features import FeatureVerifier, build_feature_verifier
from provenance.claims.relevance import CONFIRMED, QuotedClaim, edits, misspelling_of, quoted_answer
from provenance.claims.vectors import with_calendar
from provenance.inference.embedder import Embedder
from provenance.ports import ScoredPassage

FEE = ScoredPassage(
    id="membership.md#joining-fee",
    source="membership.md",
    heading="Membership > Joining Fee",
    text=(
        "Every new member pays a one-time joining fee of $30. The joining fee is non-refundable. "
        "Members sign the safety form at their first visit."
    ),
    score=0.9,
)
FEE_SENTENCE = "Every new member pays a one-time joining fee of $30."


def quoted(question: str, claim: str, heading: str = "", *, known: float = 1.0, is_quoted: bool = True) -> QuotedClaim:
    return QuotedClaim(
        question=question, claim=claim, heading=heading, passage=claim, quoted=is_quoted, corpus_coverage=known
    )


def test_a_misspelling_is_one_or_two_edits_from_a_word_with_the_same_first_letter() -> None:
    assert edits("ruoter", "router", 2) == 1  # a swap of neighbours is one edit
    assert misspelling_of("ruoter", ["cnc", "router"]) == "router"
    assert misspelling_of("keyholdr", ["keyholder"]) == "keyholder"
    # Short words, numbers and another first letter are never read as misspellings.
    assert misspelling_of("pas", ["pass"]) is None
    assert misspelling_of("2028", ["2027"]) is None
    assert misspelling_of("petg", ["pla", "peg"]) is None
    assert misspelling_of("lathe", ["bathe"]) is None


def test_a_quoted_sentence_with_every_term_of_the_question_misspelt_or_not_is_confirmed() -> None:
    got = quoted(
        "how many hours a week can i book the cnc ruoter",
        "Each member may book the CNC router for up to 6 hours per week.",
        "Workshops > Booking Machines",
        known=0.0,  # the misspelt word is not the documents' word
    )
    assert quoted_answer(got) == CONFIRMED


def test_one_word_missing_is_confirmed_when_the_value_asked_for_is_given_and_the_word_is_the_documents() -> None:
    question = "Is there a joining fee when I sign up?"
    assert quoted_answer(quoted(question, FEE_SENTENCE, FEE.heading)) == CONFIRMED
    # A word the documents never use names something they may not cover: not confirmed.
    assert quoted_answer(quoted(question, FEE_SENTENCE, FEE.heading, known=0.4)) is None
    # Not quoted word for word: the rule says nothing (support isn't certain).
    assert quoted_answer(quoted(question, FEE_SENTENCE, FEE.heading, is_quoted=False)) is None
    # The kind of value asked for must be there: a rule with no amount doesn't answer "how much".
    assert quoted_answer(quoted("How much is the joining fee?", "The joining fee is non-refundable.")) is None


def test_a_sentence_about_another_thing_year_or_name_is_not_confirmed() -> None:
    # Another named course's price.
    beginner = "Beginner Woodworking is a four-week course and costs $180 for all four sessions."
    assert quoted_answer(quoted("How much does the Advanced Woodworking course cost?", beginner)) is None
    # Another year's meeting.
    agm = "The 2027 Annual General Meeting (AGM) will be held on Saturday 20 November 2027 at 2 pm."
    assert quoted_answer(quoted("When is the 2028 AGM?", agm)) is None
    # Another material's price, for a material the documents never mention.
    plywood = "A 600 mm by 400 mm sheet of 3 mm birch plywood costs $6."
    assert quoted_answer(quoted("How much does a sheet of acrylic cost?", plywood, known=0.33)) is None
    # Two things missing is no answer, whatever the value.
    assert quoted_answer(quoted("Is there a student price for a day pass?", "A day pass costs $25.")) is None


@pytest.fixture(scope="module")
def verifier(embedder: Embedder) -> FeatureVerifier:
    v = build_feature_verifier(embedder)
    v.set_corpus([(FEE.text, ())])
    return v


async def test_the_feature_verifier_confirms_a_quoted_answer_the_coverage_model_doubts(
    verifier: FeatureVerifier, embedder: Embedder
) -> None:
    question = "Is there a joining fee when I sign up?"
    q_vec = embedder.embed_query(question)
    c_vec = verifier.relevance.sentences.get([FEE_SENTENCE])[0]
    modelled = verifier.relevance_of(question, FEE_SENTENCE, c_vec, q_vec, FEE)
    got = (await verifier.verify(question, [FEE_SENTENCE], [FEE])).verdicts[0]
    assert got.quoted and got.support == 1.0
    assert got.relevance == pytest.approx(max(modelled, CONFIRMED), abs=1e-4)
    assert got.relevance is not None and got.relevance >= CONFIRMED
    # A question in a word the documents never use stays with the model's doubt.
    enrol = "Is there a joining fee when I enrol?"
    unknown = (await verifier.verify(enrol, [FEE_SENTENCE], [FEE])).verdicts[0]
    assert unknown.relevance is not None and unknown.relevance < CONFIRMED


def test_a_sentence_about_saturday_speaks_to_a_question_about_weekends_and_never_the_other_way() -> None:
    asked = "What time does the makerspace open on weekends?"
    # Some question word the documents never use (known < 0.99), so every one must be there.
    said = quoted(asked, "On Saturday the makerspace is open from 9 am to 6 pm.", known=0.5)
    assert quoted_answer(said) == CONFIRMED
    # A weekday is not the weekend, nor the weekend a weekday.
    assert quoted_answer(quoted(asked, "On Tuesday the makerspace is open from 10 am to 10 pm.", known=0.5)) is None
    weekdays = "What time does the makerspace open on weekdays?"
    assert quoted_answer(quoted(weekdays, "On Sunday the makerspace is open from 11 am.", known=0.5)) is None
    assert quoted_answer(quoted(weekdays, "On Tuesday the makerspace is open from 10 am.", known=0.5)) == CONFIRMED
    assert with_calendar({"tuesday": "Tuesday"}) == {"tuesday": "Tuesday", "weekday": "weekday"}
    assert with_calendar({"sunday": "Sunday"})["weekend"] == "weekend" and with_calendar({"week": "week"}) == {
        "week": "week"
    }


def test_how_long_asks_for_a_span_of_time_which_a_time_of_day_is_not() -> None:
    asked = "How long does the woodshop induction take?"
    assert expected_answer_type(asked) == "elapsed"
    assert expected_answer_type("How long can I book the CNC router for?") == "duration"
    for kind in ("duration", "elapsed"):
        assert answer_type_match(kind, "Inductions take place on Tuesday evenings at 6 pm.") == 0.0
        spans = ("The induction is a four-week course.", "Staff reply within two working days.", "It takes 90 minutes.")
        for said in spans:
            assert answer_type_match(kind, said) == 1.0, said
    # How long a thing takes is not an allowance per week, which may answer how long one can book it for.
    allowance = "Each member may book the CNC router for up to 6 hours per week."
    assert answer_type_match("elapsed", allowance) == 0.0 and answer_type_match("duration", allowance) == 1.0
    assert quoted_answer(quoted("How long does the CNC router induction take?", allowance)) is None
    assert answer_type_match("elapsed", "The course runs for two days a week over four weeks.") == 1.0
    assert quoted_answer(quoted(asked, "The woodshop induction takes two hours.")) == CONFIRMED
    assert quoted_answer(quoted(asked, "The woodshop induction takes place at 6 pm.")) is None
    # "How long is the bench?" may ask for a length: any number still answers it.
    assert expected_answer_type("How long is the bench?") == "number"
