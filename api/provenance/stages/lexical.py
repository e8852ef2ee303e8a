"""Lexical sanity check: a claim that shares almost no content words with any retrieved passage, states a
number or date its supporting passage lacks, or answers for a year or month other than the one the question
asks about, has its score capped whatever the verifiers said."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.models import ClaimResult, LexicalStage
from provenance.passages import ScoredPassage
from provenance.timing import Timer

MIN_OVERLAP = 0.34
LOW_OVERLAP_CAP = 0.2
UNSUPPORTED_NUMBER_CAP = 0.2
OTHER_DATE_CAP = 0.2


class LexicalOutcome(msgspec.Struct, frozen=True):
    stage: LexicalStage
    claims: list[ClaimResult]


def check_claim(claim: ClaimResult, passages: Sequence[ScoredPassage], question: str = "") -> ClaimResult:
    terms = T.content_terms(claim.text)
    by_id = {p.id: p for p in passages}
    overlaps = [T.overlap(terms, T.content_terms(p.text) | T.content_terms(p.heading)) for p in passages]
    best = max(overlaps, default=0.0)
    score, capped_by = claim.score, None
    if best < MIN_OVERLAP:
        score, capped_by = min(score, LOW_OVERLAP_CAP), "low_lexical_overlap"
    support = [by_id[pid] for pid in claim.supporting_passage_ids if pid in by_id]
    support_text = " ".join(p.text for p in support)
    missing_numbers = T.unsupported_numbers(claim.text, support_text)
    missing_months = T.months(claim.text) - T.months(support_text)
    if missing_numbers or missing_months:
        score, capped_by = min(score, UNSUPPORTED_NUMBER_CAP), "number_or_date_not_in_support"
    # A claim answers a two-part question when it answers either part, so the dates of one part don't
    # bind a claim that answers the other.
    with_headings = " ".join(f"{p.heading} {p.text}" for p in support)
    parts = T.sub_questions(question) if question else []
    if parts and all(T.dates_not_covered(part, claim.text, with_headings) for part in parts):
        score, capped_by = min(score, OTHER_DATE_CAP), "question_date_not_in_support"
    return msgspec.structs.replace(claim, score=round(score, 4), lexical_overlap=round(best, 3), capped_by=capped_by)


def lexical_check(
    claims: Sequence[ClaimResult], passages: Sequence[ScoredPassage], question: str = ""
) -> LexicalOutcome:
    timer = Timer()
    checked = [check_claim(c, passages, question) for c in claims]
    capped = sum(1 for c in checked if c.capped_by)
    stage = LexicalStage(
        status="ok", ms=timer.ms, capped=capped, detail=f"capped {capped} claim(s)" if capped else None
    )
    return LexicalOutcome(stage, checked)
