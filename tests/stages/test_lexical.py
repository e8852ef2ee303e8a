"""The lexical check (stages/lexical.py): a claim's score is capped, never raised."""

from __future__ import annotations

import msgspec

from provenance.claims.answer_types import expected_answer_type, wrong_answer_type
from provenance.ports import ScoredPassage
from provenance.stages.lexical import (
    LOW_OVERLAP_CAP,
    OTHER_DATE_CAP,
    PREMISE_CAP,
    UNSUPPORTED_NUMBER_CAP,
    WRONG_TYPE_CAP,
    check_claim,
    lexical_check,
)
from tests.stages.support import AGM, LOCKERS, PASSAGES, claim

# A stated claim about the 2027 meeting (relevance 0.95), and one about the locker's fee that names no date.
AGM_QUOTED = claim(
    "The annual general meeting is held on Saturday 20 November 2027 at 2 pm in the main workshop.",
    1.0,
    [AGM.id],
    relevance=0.95,
)
LOCKER_FEE = claim("A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month.", 0.9, [LOCKERS.id])


def test_lexical_faithful_claim_untouched() -> None:
    c = claim("A standard locker costs $14 per month.", 0.93, [LOCKERS.id])
    out = check_claim(c, PASSAGES)
    assert out.capped_by is None and out.relevance_capped_by is None and out.support == 0.93
    assert out.lexical_overlap == 1.0
    assert msgspec.structs.replace(out, lexical_overlap=0.0) == c


def test_lexical_number_missing_from_support_is_capped() -> None:
    c = claim("A standard locker costs $19 per month.", 0.93, [LOCKERS.id])
    out = check_claim(c, PASSAGES)
    assert out.capped_by == "number_or_date_not_in_support" and out.support == UNSUPPORTED_NUMBER_CAP
    # A support cap leaves relevance alone.
    assert out.relevance == 1.0 and out.relevance_capped_by is None
    # The number must be in the claim's own support, not merely somewhere among the passages.
    elsewhere = check_claim(claim("A standard locker costs $14 per month.", 0.93, [AGM.id]), PASSAGES)
    assert elsewhere.capped_by == "number_or_date_not_in_support"


def test_lexical_month_missing_from_support_is_capped() -> None:
    out = check_claim(claim("The annual general meeting is held on Saturday 20 October 2027.", 0.9, [AGM.id]), PASSAGES)
    assert out.capped_by == "number_or_date_not_in_support" and out.support == UNSUPPORTED_NUMBER_CAP
    ok = check_claim(claim("The annual general meeting is held on Saturday 20 November 2027.", 0.9, [AGM.id]), PASSAGES)
    assert ok.capped_by is None and ok.support == 0.9


def test_lexical_claim_for_another_year_than_asked_is_capped() -> None:
    # Another year than asked: the claim is stated, but doesn't answer, so relevance is capped, not support.
    other = check_claim(AGM_QUOTED, PASSAGES, "When is the 2028 annual general meeting?")
    assert other.relevance_capped_by == "question_date_not_in_support" and other.relevance == OTHER_DATE_CAP
    assert other.capped_by is None and other.support == 1.0
    same = check_claim(AGM_QUOTED, PASSAGES, "When is the 2027 annual general meeting?")
    assert same.relevance_capped_by is None and same.relevance == 0.95
    # No year asked, no year to agree with; the question is optional for callers that have none.
    assert check_claim(AGM_QUOTED, PASSAGES, "When is the annual general meeting?").relevance_capped_by is None
    assert check_claim(AGM_QUOTED, PASSAGES).relevance_capped_by is None


def test_lexical_year_may_sit_in_the_heading_and_a_century_covers_its_years() -> None:
    titled = ScoredPassage(
        id="agm", source="g.md", heading="AGM 2027", text="The AGM is held on 20 November.", score=0.5
    )
    c = claim("The AGM is held on 20 November.", 0.9, ["agm"])
    assert check_claim(c, [titled], "When is the 2027 AGM?").relevance_capped_by is None
    ivory = ScoredPassage(
        id="iv", source="n.md", heading="Art", text="Salerno was a centre of ivorywork in the 12th century.", score=0.5
    )
    c = claim("Salerno was a centre of ivorywork in the 12th century.", 0.9, ["iv"])
    assert check_claim(c, [ivory], "What was a centre of ivorywork in the 1100s?").relevance_capped_by is None
    out = check_claim(c, [ivory], "What was a centre of ivorywork in the 1000s?")
    assert out.relevance_capped_by == "question_date_not_in_support"


def test_lexical_month_asked_against_a_claim_about_other_months() -> None:
    days = ScoredPassage(
        id="oh",
        source="e.md",
        heading="Open House",
        text="Open house days are 6 March, 12 June and 9 October.",
        score=0.5,
    )
    c = claim("Open house days are 6 March, 12 June and 9 October.", 0.9, ["oh"])
    december = check_claim(c, [days], "When is the open house in December?")
    assert december.relevance_capped_by == "question_date_not_in_support"
    assert check_claim(c, [days], "Is there an open house in June?").relevance_capped_by is None
    # A rule that names no month holds in every month.
    assert check_claim(LOCKER_FEE, PASSAGES, "How much is a locker if I join in December?").relevance_capped_by is None


def test_lexical_dates_of_one_part_do_not_bind_a_claim_answering_the_other() -> None:
    out = check_claim(LOCKER_FEE, PASSAGES, "How much is a standard locker, and will the price change in 2028?")
    assert out.relevance_capped_by is None and out.capped_by is None


def test_lexical_a_told_circumstance_is_no_part_a_claim_could_answer() -> None:
    """A question that tells its circumstances first ("My membership lapsed last spring. When is the 2028
    AGM?") asks one thing. Its first sentence, read as a part of its own (it names no date), let a claim about
    the 2027 meeting escape the date veto, as if it answered that part."""
    told = check_claim(
        AGM_QUOTED, PASSAGES, "My membership lapsed last spring. When is the 2028 annual general meeting?"
    )
    assert told.relevance_capped_by == "question_date_not_in_support" and told.relevance == OTHER_DATE_CAP
    # Two parts that both ask still each get their say.
    both = check_claim(
        LOCKER_FEE, PASSAGES, "I'm new here. How much is a standard locker, and will the price change in 2028?"
    )
    assert both.relevance_capped_by is None


def test_lexical_low_overlap_is_capped() -> None:
    c = claim("Visitors park their cars beside the canal towpath gate.", 0.88, [LOCKERS.id])
    out = check_claim(c, PASSAGES)
    assert out.capped_by == "low_lexical_overlap" and out.support == LOW_OVERLAP_CAP
    assert out.lexical_overlap < 0.34


def test_lexical_cap_never_raises_a_score() -> None:
    out = check_claim(claim("Visitors park their cars beside the canal towpath gate.", 0.05, [], 0.1), PASSAGES)
    assert out.support == 0.05 and out.capped_by == "low_lexical_overlap"
    # Nor relevance: a cap on a question year the support lacks leaves a lower relevance as it was.
    low = claim("The annual general meeting is held on Saturday 20 November 2027.", 0.9, [AGM.id], 0.1)
    capped = check_claim(low, PASSAGES, "When is the 2028 annual general meeting?")
    assert capped.relevance == 0.1 and capped.relevance_capped_by == "question_date_not_in_support"


def test_lexical_stage_counts_capped() -> None:
    claims = [
        claim("A standard locker costs $14 per month.", 0.9, [LOCKERS.id]),
        claim("A standard locker costs $19 per month.", 0.9, [LOCKERS.id]),
    ]
    outcome = lexical_check(claims, PASSAGES)
    assert outcome.stage.capped == 1 and outcome.stage.detail == "capped 1 claim(s)"
    assert [c.capped_by for c in outcome.claims] == [None, "number_or_date_not_in_support"]
    clean = lexical_check(claims[:1], PASSAGES)
    assert clean.stage.capped == 0 and clean.stage.detail is None


def test_lexical_wrong_answer_type_caps_relevance_not_support() -> None:
    rented = claim("Lockers are rented by the month.", 0.95, [LOCKERS.id])
    out = check_claim(rented, PASSAGES, "How much is a locker?")
    # No amount for "how much": stated, but not an answer.
    assert out.relevance_capped_by == "wrong_answer_type" and out.relevance == WRONG_TYPE_CAP
    assert out.capped_by is None and out.support == 0.95
    # "At no extra cost" is an amount.
    free = claim("Keyholder membership includes one standard locker at no extra cost.", 0.95, [LOCKERS.id])
    assert check_claim(free, PASSAGES, "How much is a locker?").relevance_capped_by is None
    # A yes/no question is answered by a rule, not a price.
    assert check_claim(rented, PASSAGES, "Do I pay for a locker?").relevance_capped_by is None
    assert check_claim(rented, PASSAGES, "What time is the AGM?").relevance_capped_by == "wrong_answer_type"


def test_lexical_premise_no_passage_states_caps_relevance() -> None:
    rented = claim("Lockers are rented by the month.", 0.95, [LOCKERS.id])
    out = lexical_check([rented], PASSAGES, "Since lockers are free for everyone, how big is a locker?")
    (only,) = out.claims
    assert only.relevance_capped_by == "premise_not_in_passages" and only.relevance == PREMISE_CAP
    assert only.support == 0.95 and only.capped_by is None
    assert out.stage.capped == 1
    stated = lexical_check([rented], PASSAGES, "Since lockers are rented by the month, how big is a locker?")
    assert stated.claims[0].relevance_capped_by is None and stated.stage.capped == 0


def test_lexical_how_much_of_a_whole_asks_for_a_share_and_a_percentage_gives_one() -> None:
    # Issue 47: "how much of the premium" was read as a price ("pay"), and 80% capped as no amount.
    asked = "How much of the medical premium does the company pay?"
    assert expected_answer_type(asked) == "share" and expected_answer_type("What percentage do I pay?") == "share"
    assert wrong_answer_type(asked, ["The company pays 80% of the medical premium."]) is None
    assert wrong_answer_type(asked, ["The company pays half of the premium."]) is None
    assert wrong_answer_type(asked, ["The company pays $300 of the premium each month."]) is None
    # Still checked: a sentence with no share or amount doesn't say how much.
    assert wrong_answer_type(asked, ["The company pays the medical premium."]) == "share"
    # A price question stays one.
    assert expected_answer_type("How much is a day pass?") == "money"


def test_lexical_how_many_asks_for_a_count_whatever_else_it_names() -> None:
    # Issue 47: "pay" in "pay period" and in "will travel pay for" made these price questions, and the right
    # counts ("4 hours", "one bag") were capped as no amount.
    hours = "How many hours of annual leave do I earn each pay period?"
    assert expected_answer_type(hours) == "number"
    assert wrong_answer_type(hours, ["Employees accrue 4 hours of annual leave per pay period."]) is None
    bags = "How many checked bags will travel pay for?"
    assert expected_answer_type(bags) == "number"
    assert wrong_answer_type(bags, ["Baggage fees for one bag may be reimbursed per leg."]) is None
    # Money counted is still money; a wage or a price still asks for an amount.
    assert expected_answer_type("How many dollars do I pay for a locker?") == "money"
    assert expected_answer_type("What is the pay for a floor steward?") == "money"
    assert expected_answer_type("What do I pay for a new keyfob?") == "money"
    # "Pay" naming a period or a date is not a price, with or without "how many".
    assert expected_answer_type("When does the pay period start?") == "date"
    assert expected_answer_type("What is the pay-day schedule?") is None
    assert wrong_answer_type("What is the price of a day pass?", ["A day pass is valid for a single day."]) == "money"


def test_lexical_a_when_that_opens_a_clause_asks_for_no_date() -> None:
    # Issue 47: any "when" made a date question, so "a standard schedule" was capped as no date.
    schedule = "What schedule am I put on when I first join TTS?"
    assert expected_answer_type(schedule) is None
    assert wrong_answer_type(schedule, ["By default, new TTS employees are on a standard schedule."]) is None
    assert expected_answer_type("Who led the troops when Cyprus was conquered?") == "person"
    # Asking when, first, beside another wh-word, or with an auxiliary after it, is still asking for a date.
    for asked in (
        "When does award leave run out?",
        "What year was the foundry built?",
        "What was the date of the first meeting?",
        "Where and when is the AGM held?",
        "Can guests come, and when is the social night?",
        "So when is the deadline?",
    ):
        assert expected_answer_type(asked) == "date", asked
    assert wrong_answer_type("When is the AGM?", ["The AGM is held in the main hall."]) == "date"


def test_lexical_open_and_close_ask_for_hours_only_about_opening_hours() -> None:
    # Issue 47: any "open" or "close" made a time-of-day question, so "The stadium opened in 2014" was capped as
    # no time, and "close to the coast" asked for one.
    for asked in ("When did the stadium open?", "In which year did the gallery open?", "What year did it close?"):
        assert expected_answer_type(asked) == "date", asked
    assert wrong_answer_type("When did the stadium open?", ["The stadium opened in August 2014."]) is None
    for asked in ("Which city is close to the coast?", "Which sessions are open to everyone?"):
        assert expected_answer_type(asked) is None, asked
    assert expected_answer_type("Who are the meetings open to?") == "person"
    # Opening hours are still asked for as times.
    for asked in (
        "When does the makerspace open on Saturday?",
        "Is the woodshop open late on Fridays?",
        "What time does it close?",
        "wen does the makerspace open on saturdy",
        "What are the opening hours?",
    ):
        assert expected_answer_type(asked) == "time", asked
    assert wrong_answer_type("When does the makerspace close?", ["The makerspace is run by volunteers."]) == "time"
    # "In what century" asks for a date wherever it stands.
    assert expected_answer_type("The bridge was built in what century?") == "date"


def test_lexical_who_when_where_why_and_which_decide_over_an_amount_named() -> None:
    # Issue 47: any price word made a price question, so "Who was in charge of the army?" asked for an amount.
    assert expected_answer_type("Who was in charge of the papal army?") == "person"
    assert expected_answer_type("Who pays the cancellation fee if my event isn't approved?") == "person"
    assert expected_answer_type("When did they raise the price of oil?") == "date"
    assert expected_answer_type("Which year did the price drop to $10?") == "date"
    assert expected_answer_type("Why is the joining fee charged?") is None
    assert expected_answer_type("What does the woodshop induction cost?") == "money"
    # An hour as a unit, and a "time period", ask for no time of day; opening hours still do.
    assert expected_answer_type("Which episode was over an hour long?") is None
    assert expected_answer_type("What is the most rain recorded in a 24 hour period?") is None
    assert expected_answer_type("In what time period did the species become extinct?") is None
    assert expected_answer_type("What are the staffed hours on Sunday?") == "time"
    assert expected_answer_type("In an open system of particles, what is conserved?") is None


def test_lexical_a_name_called_or_a_contact_touched_asks_for_no_address() -> None:
    # Issue 47: any "call" or "contact" asked for an email address or a phone number.
    assert expected_answer_type("What did Luther call the revolting peasants?") is None
    assert expected_answer_type("Who came into contact with Wales after the conquest?") == "person"
    for asked in (
        "What number do I call to reach the employee assistance program?",
        "wat email adress do i use to contact the bord",
        "How do I contact the board?",
        "What's the phone line for IT?",
    ):
        assert expected_answer_type(asked) == "contact", asked
