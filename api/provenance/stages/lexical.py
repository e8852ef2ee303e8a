"""Lexical sanity checks: what needs no reading caps a claim's scores, whatever the verifiers said.

Support is capped for a claim that shares almost no content words with any retrieved passage, or states a
number or date its supporting passage lacks. Relevance is capped, whoever judged it (the local verifier or
the model), for a claim whose support never mentions a year, month or number the question names, that is
not the kind of answer the question asks for (no amount for "how much"), or that answers a question built
on a premise no passage states.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.claims.answer_types import wrong_answer_type
from provenance.claims.rules import unstated_premise
from provenance.ports import ScoredPassage, Usage
from provenance.timing import Timer
from provenance.wire import ClaimResult, LexicalStage

MIN_OVERLAP = 0.34
LOW_OVERLAP_CAP = 0.2
UNSUPPORTED_NUMBER_CAP = 0.2
OTHER_DATE_CAP = 0.2
WRONG_TYPE_CAP = 0.2
PREMISE_CAP = 0.2


class LexicalOutcome(msgspec.Struct, frozen=True):
    stage: LexicalStage
    claims: list[ClaimResult]

    @property
    def usages(self) -> list[Usage]:
        return []  # no model call


def _support_cap(claim: ClaimResult, overlap: float, support: str) -> tuple[float, str | None]:
    if overlap < MIN_OVERLAP:
        return LOW_OVERLAP_CAP, "low_lexical_overlap"
    if not T.numbers_and_months_stated(claim.text, support):
        return UNSUPPORTED_NUMBER_CAP, "number_or_date_not_in_support"
    return 1.0, None


def _question_facts_missing(part: str, claim: str, support: str) -> bool:
    """Whether a part of the question pins its subject to a year, month or number that neither the claim nor
    its support mentions: "the 2028 AGM" is not answered by a passage about the 2027 one."""
    if T.dates_not_covered(part, claim, support):
        return True
    # Years and decades are dates_not_covered's ("the 1100s" is "the 12th century"); any other number counts.
    numbers = {n for n in T.bare_numbers(part) if not (len(n) == 4 and n.isdigit() and 1000 <= int(n) <= 2099)}
    return not numbers <= T.bare_numbers(f"{support} {claim}")


def _relevance_cap(claim: ClaimResult, question: str, support: str, premise: str | None) -> tuple[float, str | None]:
    if premise is not None:
        return PREMISE_CAP, "premise_not_in_passages"
    # A claim answers a two-part question when it answers either part, so the dates of one part don't bind a
    # claim that answers the other. Only parts that ask: "My membership lapsed. When is the 2028 AGM?" tells
    # its circumstances first, and that sentence, naming no date, let any claim escape the veto.
    parts = T.sub_questions(question) if question else []
    parts = [p for p in parts if T.asks(p)] or parts
    if parts and all(_question_facts_missing(part, claim.text, support) for part in parts):
        return OTHER_DATE_CAP, "question_date_not_in_support"
    if question and wrong_answer_type(question, [claim.text]) is not None:
        return WRONG_TYPE_CAP, "wrong_answer_type"
    return 1.0, None


def check_claim(
    claim: ClaimResult, passages: Sequence[ScoredPassage], question: str = "", premise: str | None = None
) -> ClaimResult:
    terms = T.content_terms(claim.text)
    overlap = max(
        (T.overlap(terms, T.content_terms(p.text) | T.content_terms(p.heading)) for p in passages), default=0.0
    )
    by_id = {p.id: p for p in passages}
    support_passages = [by_id[pid] for pid in claim.supporting_passage_ids if pid in by_id]
    support_text = " ".join(p.text for p in support_passages)
    with_headings = " ".join(f"{p.heading} {p.text}" for p in support_passages)
    support_cap, capped_by = _support_cap(claim, overlap, support_text)
    relevance_cap, relevance_capped_by = _relevance_cap(claim, question, with_headings, premise)
    return msgspec.structs.replace(
        claim,
        support=round(min(claim.support, support_cap), 4),
        relevance=round(min(claim.relevance, relevance_cap), 4),
        lexical_overlap=round(overlap, 3),
        capped_by=capped_by,
        relevance_capped_by=relevance_capped_by,
    )


def lexical_check(
    claims: Sequence[ClaimResult], passages: Sequence[ScoredPassage], question: str = ""
) -> LexicalOutcome:
    timer = Timer()
    premise = unstated_premise(question, [f"{p.heading} {p.text}" for p in passages]) if question else None
    checked = [check_claim(c, passages, question, premise) for c in claims]
    capped = sum(1 for c in checked if c.capped_by or c.relevance_capped_by)
    stage = LexicalStage(
        status="ok", ms=timer.ms, capped=capped, detail=f"capped {capped} claim(s)" if capped else None
    )
    return LexicalOutcome(stage, checked)
