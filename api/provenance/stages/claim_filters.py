"""Claims about the sources themselves ("the passages do not mention X") are not claims about the world:
they are dropped before verification, whichever profile made them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from provenance import text as T

_SOURCE = r"(?:passages?|documents?|sources?|context|handbook|excerpts?|provided (?:text|information|material))"
_META = re.compile(
    "|".join(
        [
            # "The passages do not mention the fee", "the provided context doesn't say ..."
            rf"\b{_SOURCE}\b[^.;]*?\b(?:do(?:es)?\s*(?:not|n't)|did\s*(?:not|n't)|never|fails? to)\s+"
            r"(?:\w+\s+)?(?:mention|say|state|specify|contain|include|provide|address|discuss|cover|give|"
            r"list|indicate|describe|answer)",
            # "The fee is not mentioned in the passages"
            r"\bnot\s+(?:\w+\s+)?(?:mentioned|stated|specified|covered|addressed|provided|included|"
            rf"discussed|given|listed|described)\s+(?:anywhere\s+)?in\s+the\s+(?:\w+\s+)?{_SOURCE}",
            rf"\b{_SOURCE}\s+(?:is|are)\s+silent\b",
            r"^\s*there\s+(?:is|are)\s+no\s+(?:information|details?|mention)\s+(?:about|on|regarding|of|given)\b",
            r"^\s*(?:i|we)\s+(?:could\s+not|couldn't|cannot|can't|do\s+not|don't|am\s+unable|are\s+unable)\b",
            r"\b(?:cannot|can't|could\s+not)\s+be\s+(?:determined|answered|found)\b",
        ]
    ),
    re.IGNORECASE,
)
# "According to the passages, X" is a real claim X behind a meta prefix: keep X.
_META_PREFIX = re.compile(
    rf"^\s*(?:according\s+to|based\s+on|as\s+stated\s+in|per)\s+(?:the\s+)?(?:\w+\s+)?{_SOURCE}(?:\s+\d+)?\s*,\s*",
    re.IGNORECASE,
)


# The broader net the extractive path has always used ("... not mentioned", "the handbook doesn't ...").
_META_BROAD = re.compile(
    r"\b(passages?|documents?|sources?|context|handbook|provided text|excerpts?)\b.*\b(do(es)? not|don't|doesn't|"
    r"no information|not (mention|say|state|specify|cover|include)|silent)\b"
    r"|^(i|we) (could not|couldn't|cannot|can't|do not|don't)\b|\bnot (mentioned|specified|stated|covered)\b",
    re.IGNORECASE,
)


def is_meta_claim(claim: str) -> bool:
    """A claim about the sources rather than the world ("the passages do not mention X")."""
    return bool(_META.search(claim) or _META_BROAD.search(claim))


def split_claims(claims: Iterable[str]) -> tuple[list[str], list[str]]:
    """(kept, dropped): source-attribution prefixes stripped, blanks and duplicates gone, and claims about
    the sources themselves dropped. The one place raw claims are cleaned, whichever profile made them."""
    kept: list[str] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for raw in claims:
        claim = _strip_meta_prefix(raw.strip())
        key = claim.casefold()
        if not claim or key in seen:
            continue
        seen.add(key)
        (dropped if is_meta_claim(claim) else kept).append(claim)
    return kept, dropped


def _strip_meta_prefix(claim: str) -> str:
    stripped = _META_PREFIX.sub("", claim, count=1)
    if stripped != claim and stripped:
        return stripped[0].upper() + stripped[1:]
    return claim


# A model's decomposition is held to its answer by numbers, the facts a lexical check reads surely: a claim
# with a number neither the answer nor the question has is not the answer's (a small model copies the prompt's
# own example, "A day pass costs $25.", as a claim of an answer about something else), and an answer sentence
# with a number no claim has would be shown unchecked. Wording is the model's to choose: holding claims to the
# answer's words dropped faithful rewordings and left their long answer sentences to the lexical check alone.


def _figures(text: str) -> str:
    """The text with its words blanked, so only numbers written as figures are read: "at any one time" and
    "the one that gives" state no number."""
    return re.sub(r"[^\W\d_]+", " ", text)


def in_answer(claim: str, answer: str, question: str) -> bool:
    """Whether the answer (read with its question) can make this claim: it has every figure the claim has."""
    return not T.unsupported_numbers(_figures(claim), f"{answer} {question}")


# "Yes, ..." and "No, ..." answer the question; the fact is what follows, and that is what gets checked.
_REPLY_WORD = re.compile(r"^\s*(?:yes|no)\b\s*[,.;:!\u2013\u2014-]+\s*", re.IGNORECASE)


# A sentence most of whose content words no claim has was left out of the claims, not reworded in them.
COVERED_TERMS = 0.5


def uncovered_sentences(answer: str, claims: Sequence[str]) -> list[str]:
    """The answer's sentences that no claim states: one with a number no claim has, or one most of whose
    content words are in no claim (a small model's claims can leave a sentence out: "There is no
    defibrillator on site." beside claims about an email address). Each still has to be checked, as a claim
    of its own."""
    numbers = T.bare_numbers(" ".join(claims))
    terms = T.content_terms(" ".join(claims))
    out = []
    for sentence in T.split_sentences(answer):
        fact = _REPLY_WORD.sub("", sentence, count=1)
        if not fact or is_meta_claim(fact):
            continue
        own = T.content_terms(fact)
        left_out = bool(own) and len(own & terms) < COVERED_TERMS * len(own)
        if left_out or not T.bare_numbers(_figures(fact)) <= numbers:
            out.append(fact[0].upper() + fact[1:])
    return out
