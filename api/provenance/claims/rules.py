"""Rules every verifier shares: which passages count as a claim's support, and what a question takes for
granted. What kind of answer a question asks for is `claims.answer_types`."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.ports import PassageSupport


class LogisticModel(msgspec.Struct, frozen=True):
    """A fitted logistic model over a features struct's named fields."""

    features: list[str]
    weights: list[float]
    intercept: float

    def probability(self, features: msgspec.Struct) -> float:
        named = msgspec.structs.asdict(features)
        values = [float(named[name]) for name in self.features]
        z = sum(w * v for w, v in zip(self.weights, values, strict=True)) + self.intercept
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


# A passage beside the best one counts as support when it scores at least this...
SUPPORT_KEEP = 0.5
# ...and no further below the best than this.
SUPPORT_MARGIN = 0.15


def supporting(scored: Sequence[PassageSupport]) -> list[PassageSupport]:
    """The passages that support a claim, best first. The best-scoring passage always counts, so the lexical
    check compares the claim's numbers with the passage the verifier actually relied on."""
    ranked = sorted(scored, key=lambda s: -s.score)
    if not ranked:
        return []
    best = ranked[0].score
    return [ranked[0]] + [s for s in ranked[1:] if s.score >= SUPPORT_KEEP and s.score >= best - SUPPORT_MARGIN]


# --- premise check --------------------------------------------------------------------------------

_PREMISE = re.compile(
    r"^\s*(since|now that|given that|as|because|seeing that|considering that)\s+(?P<premise>[^,?]+),",
    re.IGNORECASE,
)
# The share of a premise's content words the passages must hold for it to count as stated.
PREMISE_COVERAGE = 0.75


def question_premise(question: str) -> str | None:
    """A clause the question takes for granted ("Since the pool is open late, ..."): it must be supported."""
    m = _PREMISE.match(question)
    return m.group("premise") if m else None


def unstated_premise(question: str, passage_texts: Sequence[str]) -> str | None:
    """The question's premise when the passages never state it: no claim answers such a question, however
    well supported the claim is on its own."""
    premise = question_premise(question)
    if premise is None:
        return None
    terms: set[str] = set()
    for text in passage_texts:
        terms |= T.content_terms(text)
    return premise if T.overlap(T.content_terms(premise), terms) < PREMISE_COVERAGE else None
