"""Whether a sentence quoted word for word answers the question, by a rule that needs no reading (issue 47
item 4): what may confirm a quoted claim's relevance when the feature verifier's coverage model doesn't.

A quoted claim's support is certain (1.0), so its relevance alone decides it, and the coverage model reads
a member's own word, or a misspelt one, as a question term the sentence lacks: "Is there a joining fee when I
sign up?" scored 0.45 against "Every new member pays a one-time joining fee of $30.". The rule asks narrower
questions of the quoted sentence and its heading path (`quoted_answer`):
- the question asks for a kind of value a sentence can be seen to give (an amount, a time, a date, a number,
  an email address or phone number), and the sentence gives it: the one thing this rule can check, without
  reading, that an answer does;
- the question's anchors are all there: its numbers, years, months and names ("6 mm", "2028", "December",
  "Advanced Woodworking"); a sentence without them is about something else;
- and the question's things are all there, a misspelling of one of the sentence's own words read as that
  word ("ruoter" for "router"), or all but one when every word of the question is one the documents use. A
  word the documents never use names a thing they may not cover (acrylic, a resin printer), and a sentence
  about its neighbour is no answer.
Chosen on our cases and checked on the paraphrases and squad2-normans (whose figures narrowed it to questions
that ask for a value); what else was tried, and the figures on every suite, are in `evals/relevance_rules.py`
and evals/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.claims.answer_types import CHECKABLE_TYPES, answer_type_match, expected_answer_type
from provenance.claims.vectors import surface_terms, with_calendar

# The relevance the rule gives a quoted claim it confirms: the gate's threshold (GATE_RELEVANCE's default),
# no more: confirmed to answer, not more certain than the verifier would be.
CONFIRMED = 0.70
# question_corpus_coverage at which every question word is one the documents use (it is a minimum of 0-1
# coverages, 1.0 for a word the vocabulary holds).
KNOWN_WORDS = 0.99
# The kinds of value a quoted sentence can be seen to give without reading it.
VALUE_KINDS = CHECKABLE_TYPES | {"number", "duration", "elapsed", "contact"}


class QuotedClaim(msgspec.Struct, frozen=True):
    """A claim read against the passage it rests on (the one whose features scored best)."""

    question: str
    claim: str
    heading: str
    passage: str
    quoted: bool
    # The feature verifier's question_corpus_coverage: 1.0 when every question word is one the documents use.
    corpus_coverage: float

    @property
    def covering(self) -> dict[str, str]:
        """The words the claim and its heading path hold (stem -> word)."""
        return with_calendar(surface_terms(self.claim) | surface_terms(T.section_path(self.heading)))

    @property
    def text(self) -> str:
        return f"{self.claim} {T.section_path(self.heading)}"


def edits(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (a swap of neighbours is one edit), or `limit + 1` once past it."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def misspelling_of(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate `word` is a misspelling of: the same first letter, within one edit for a word of up to
    five letters and two for a longer one; None for a number or a word under four letters."""
    if len(word) < 4 or any(ch.isdigit() for ch in word):
        return None
    limit = 1 if len(word) <= 5 else 2
    for c in candidates:
        if c[0] == word[0] and len(c) >= 4 and edits(word, c, limit) <= limit:
            return c
    return None


def anchors(question: str) -> set[str]:
    """What pins a question's subject: its numbers, years, months and names."""
    return T.bare_numbers(question) | T.months(question) | T.entities(question)


def anchored(question: str, text: str) -> bool:
    """Whether `text` holds every anchor of the question."""
    have = T.bare_numbers(text) | T.months(text) | {T.stem(w) for w in T.words(text)}
    return anchors(question) <= have


def missing_terms(
    question: str, covering: dict[str, str], answered: frozenset[str] = frozenset(), *, misspellings: bool = True
) -> list[str]:
    """The question's terms `covering` lacks, a misspelling of one of its words counting as that word."""
    words = list(covering.values()) if misspellings else []
    return [
        word
        for stem_, word in surface_terms(question, question=True).items()
        if stem_ not in covering and stem_ not in answered and misspelling_of(word, words) is None
    ]


def gives_value_asked(question: str, claim: str) -> bool:
    """Whether the question asks for a kind of value the claim can be seen to give, and the claim gives it."""
    kind = expected_answer_type(question)
    return kind in VALUE_KINDS and answer_type_match(kind, claim) == 1.0


def quoted_answer(q: QuotedClaim) -> float | None:
    """CONFIRMED when the quoted sentence is confirmed to answer the question (the module's rule), else None:
    the verifier's relevance stands."""
    if not q.quoted or not anchored(q.question, q.text) or not gives_value_asked(q.question, q.claim):
        return None
    missing = missing_terms(q.question, q.covering)
    if not missing or (len(missing) == 1 and q.corpus_coverage >= KNOWN_WORDS):
        return CONFIRMED
    return None
