"""The lexical check (stages/lexical.py): a claim's score is capped, never raised."""

from __future__ import annotations

import msgspec

from provenance.passages import ScoredPassage
from provenance.stages.lexical import (
    LOW_OVERLAP_CAP,
    OTHER_DATE_CAP,
    UNSUPPORTED_NUMBER_CAP,
    check_claim,
    lexical_check,
)
from tests.stages.support import AGM, LOCKERS, PASSAGES, claim


def test_lexical_faithful_claim_untouched() -> None:
    c = claim("A standard locker costs $14 per month.", 0.93, [LOCKERS.id])
    out = check_claim(c, PASSAGES)
    assert out.capped_by is None and out.score == 0.93
    assert out.lexical_overlap == 1.0
    assert msgspec.structs.replace(out, lexical_overlap=0.0) == c


def test_lexical_number_missing_from_support_is_capped() -> None:
    c = claim("A standard locker costs $19 per month.", 0.93, [LOCKERS.id])
    out = check_claim(c, PASSAGES)
    assert out.capped_by == "number_or_date_not_in_support" and out.score == UNSUPPORTED_NUMBER_CAP
    # The number must be in the claim's own support, not merely somewhere among the passages.
    elsewhere = check_claim(claim("A standard locker costs $14 per month.", 0.93, [AGM.id]), PASSAGES)
    assert elsewhere.capped_by == "number_or_date_not_in_support"


def test_lexical_month_missing_from_support_is_capped() -> None:
    out = check_claim(claim("The annual general meeting is held on Saturday 20 October 2027.", 0.9, [AGM.id]), PASSAGES)
    assert out.capped_by == "number_or_date_not_in_support" and out.score == UNSUPPORTED_NUMBER_CAP
    ok = check_claim(claim("The annual general meeting is held on Saturday 20 November 2027.", 0.9, [AGM.id]), PASSAGES)
    assert ok.capped_by is None and ok.score == 0.9


def test_lexical_claim_for_another_year_than_asked_is_capped() -> None:
    quoted = claim(
        "The annual general meeting is held on Saturday 20 November 2027 at 2 pm in the main workshop.", 0.95, [AGM.id]
    )
    other = check_claim(quoted, PASSAGES, "When is the 2028 annual general meeting?")
    assert other.capped_by == "question_date_not_in_support" and other.score == OTHER_DATE_CAP
    same = check_claim(quoted, PASSAGES, "When is the 2027 annual general meeting?")
    assert same.capped_by is None and same.score == 0.95
    # No year asked, no year to agree with; the question is optional for callers that have none.
    assert check_claim(quoted, PASSAGES, "When is the annual general meeting?").capped_by is None
    assert check_claim(quoted, PASSAGES).capped_by is None


def test_lexical_year_may_sit_in_the_heading_and_a_century_covers_its_years() -> None:
    titled = ScoredPassage(
        id="agm", source="g.md", heading="AGM 2027", text="The AGM is held on 20 November.", score=0.5
    )
    c = claim("The AGM is held on 20 November.", 0.9, ["agm"])
    assert check_claim(c, [titled], "When is the 2027 AGM?").capped_by is None
    ivory = ScoredPassage(
        id="iv", source="n.md", heading="Art", text="Salerno was a centre of ivorywork in the 12th century.", score=0.5
    )
    c = claim("Salerno was a centre of ivorywork in the 12th century.", 0.9, ["iv"])
    assert check_claim(c, [ivory], "What was a centre of ivorywork in the 1100s?").capped_by is None
    out = check_claim(c, [ivory], "What was a centre of ivorywork in the 1000s?")
    assert out.capped_by == "question_date_not_in_support"


def test_lexical_month_asked_against_a_claim_about_other_months() -> None:
    days = ScoredPassage(
        id="oh",
        source="e.md",
        heading="Open House",
        text="Open house days are 6 March, 12 June and 9 October.",
        score=0.5,
    )
    c = claim("Open house days are 6 March, 12 June and 9 October.", 0.9, ["oh"])
    assert check_claim(c, [days], "When is the open house in December?").capped_by == "question_date_not_in_support"
    assert check_claim(c, [days], "Is there an open house in June?").capped_by is None
    # A rule that names no month holds in every month.
    fee = claim("A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month.", 0.9, [LOCKERS.id])
    assert check_claim(fee, PASSAGES, "How much is a locker if I join in December?").capped_by is None


def test_lexical_dates_of_one_part_do_not_bind_a_claim_answering_the_other() -> None:
    fee = claim("A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month.", 0.9, [LOCKERS.id])
    out = check_claim(fee, PASSAGES, "How much is a standard locker, and will the price change in 2028?")
    assert out.capped_by is None


def test_lexical_low_overlap_is_capped() -> None:
    c = claim("Visitors park their cars beside the canal towpath gate.", 0.88, [LOCKERS.id])
    out = check_claim(c, PASSAGES)
    assert out.capped_by == "low_lexical_overlap" and out.score == LOW_OVERLAP_CAP
    assert out.lexical_overlap < 0.34


def test_lexical_cap_never_raises_a_score() -> None:
    out = check_claim(claim("Visitors park their cars beside the canal towpath gate.", 0.05, []), PASSAGES)
    assert out.score == 0.05 and out.capped_by == "low_lexical_overlap"


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
