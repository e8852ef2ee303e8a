"""Relevance rules for quoted claims, tried offline on `provenance evals --json` records (issue 47 item 4).

The local profile refuses right sentences quoted word for word (support 1.0) for relevance alone: the feature
verifier's relevance is a coverage of the question's words, and a member's own words cover little. This tool
counts those refusals in each suite's records and re-scores candidate rules on the same records, as the
report's threshold sweep re-scores stored claim scores: each claim's relevance before the lexical caps and
its features are in the record (`claims`, `evaluation.claim_features`), a rule may raise a quoted claim's
relevance, the caps apply after it as they do in the pipeline (`stages.lexical`), and the gate's relevance
rule decides (`stages.gate`: every claim, mean >= GATE_RELEVANCE and weakest >= GATE_MIN_CLAIM).

It is exact for the gate; a rule also changes what the extractive generator's per-part check says of a
two-part question (it asks the same verifier), so a kept rule is run end to end after.

    python -m evals.relevance_rules ours=/tmp/ours.jsonl paraphrases=/tmp/para.jsonl 18f=/tmp/18f.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from provenance import text as T
from provenance.claims.answer_types import answer_type_match, expected_answer_type
from provenance.claims.relevance import (
    CONFIRMED,
    KNOWN_WORDS,
    VALUE_KINDS,
    QuotedClaim,
    anchored,
    gives_value_asked,
    missing_terms,
    quoted_answer,
)
from provenance.claims.vectors import surface_terms
from provenance.stages.lexical import OTHER_DATE_CAP

RELEVANCE = 0.70
MIN_CLAIM = 0.40

Record = Mapping[str, Any]
# A rule: the claim (with the question) -> the relevance it gives a quoted claim, or None to leave it.
Rule = Callable[[str, Record], float | None]


def load(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def refused_for_relevance(r: Record) -> bool:
    return bool(r["status"] == "refused" and r["reason"] == "not_an_answer")


def quoted_right_refused(r: Record) -> bool:
    """A right sentence, quoted word for word, refused for relevance alone: what item 4 counts."""
    claims = r.get("claims") or []
    return (
        r["expect"] == "answer"
        and refused_for_relevance(r)
        and bool(claims)
        and all(c["quoted"] for c in claims)
        and bool(r.get("candidateRight"))
    )


def _claim(question: str, c: Record) -> QuotedClaim:
    return QuotedClaim(
        question=question,
        claim=c["text"],
        heading=c.get("heading") or "",
        passage=c.get("passageText") or "",
        quoted=bool(c["quoted"]),
        corpus_coverage=float((c.get("features") or {}).get("question_corpus_coverage", 0.0)),
    )


def outcome(r: Record, rule: Rule | None) -> str:
    """The case's status under `rule`: only a refusal for relevance can change (support already passed)."""
    if rule is None or not refused_for_relevance(r) or not r.get("claims"):
        return str(r["status"])
    rels = []
    for c in r["claims"]:
        rel = c["modelRelevance"] if c["modelRelevance"] is not None else c["relevance"]
        lifted = rule(r["question"], c) if c["quoted"] else None
        if lifted is not None:
            rel = max(rel, lifted)
        if c.get("relevanceCappedBy"):
            rel = min(rel, OTHER_DATE_CAP)  # every relevance cap is 0.2
        rels.append(rel)
    passes = sum(rels) / len(rels) >= RELEVANCE and min(rels) >= MIN_CLAIM
    return "answered" if passes else "refused"


def undone(r: Record) -> Record:
    """A record of a run with the shipped rule as the run before it would have had it: each quoted, uncapped
    claim the rule lifted (relevance CONFIRMED above its modelRelevance) goes back to modelRelevance, and an
    answer whose claims then fail the gate's relevance rule is a refusal for relevance. Exact for the gate."""
    claims = [dict(c) for c in r.get("claims") or []]
    lifted = False
    for c in claims:
        model = c.get("modelRelevance")
        if c["quoted"] and not c.get("relevanceCappedBy") and model is not None and model < c["relevance"] == CONFIRMED:
            c["relevance"], lifted = model, True
    if not lifted or r["status"] != "answered":
        return r
    rels = [c["relevance"] for c in claims]
    if sum(rels) / len(rels) >= RELEVANCE and min(rels) >= MIN_CLAIM:
        return dict(r) | {"claims": claims}
    return dict(r) | {"claims": claims, "status": "refused", "reason": "not_an_answer", "answer": None}


def tally(records: Sequence[Record], rule: Rule | None) -> dict[str, int]:
    counts = {"quoted_right_refused": 0, "answered_correctly": 0, "answered_wrong": 0, "fabricated": 0}
    for r in records:
        status = outcome(r, rule)
        if r["expect"] == "answer":
            if status == "answered":
                right = r.get("answerCorrect") if r["status"] == "answered" else r.get("candidateRight")
                counts["answered_correctly" if right else "answered_wrong"] += 1
            elif quoted_right_refused(r):
                counts["quoted_right_refused"] += 1
        elif status == "answered":
            counts["fabricated"] += 1
    return counts


def changed(records: Sequence[Record], rule: Rule) -> list[str]:
    return [
        f"{r['id']} ({r['expect']}, {'right' if r.get('candidateRight') else 'wrong'}): {r['question']} -> "
        f"{r.get('candidate')}"
        for r in records
        if outcome(r, rule) != r["status"]
    ]


# --- the variants tried beside the shipped rule (claims.relevance.quoted_answer) ---------------------------

# The question's words that name the kind of answer it asks for ("price" answered by "$130").
KIND_WORDS = {
    "money": ("cost", "price", "fee", "charge", "pay", "much", "amount", "expensive", "cheap"),
    "time": ("time", "hour", "open", "close", "late", "early"),
    "number": ("many", "long", "old", "often", "far", "big", "large", "minimum", "maximum", "limit"),
    "date": ("date",),
    "contact": ("email", "e-mail", "contact", "phone", "call", "address", "number", "reach"),
}


def _kind_words(question: str, claim: str) -> frozenset[str]:
    kind = expected_answer_type(question)
    if kind not in KIND_WORDS or answer_type_match(kind, claim) < 1.0:
        return frozenset()
    return frozenset(T.stem(w) for w in KIND_WORDS[kind])


def _every_term(q: QuotedClaim, question: str) -> bool:
    return anchored(question, q.text) and not missing_terms(question, q.covering)


def _one_missing(q: QuotedClaim, question: str, *, kind: bool, known: bool, not_in_passage: bool = False) -> bool:
    if not anchored(question, q.text) or (kind and not gives_value_asked(question, q.claim)):
        return False
    missing = missing_terms(question, q.covering)
    if not_in_passage and any(T.stem(w) in surface_terms(q.passage) for w in missing):
        return False
    return len(missing) <= 1 and (not missing or not known or q.corpus_coverage >= KNOWN_WORDS)


def _per_part(check: Callable[[QuotedClaim, str], bool]) -> Rule:
    """A rule read on each part of the question that asks something and names a thing."""

    def rule(question: str, c: Record) -> float | None:
        q = _claim(question, c)
        parts = [p for p in T.sub_questions(question) if T.asks(p) and surface_terms(p, question=True)]
        return CONFIRMED if any(check(q, p) for p in parts) else None

    return rule


def _whole(check: Callable[[QuotedClaim, str], bool]) -> Rule:
    return lambda question, c: CONFIRMED if check(_claim(question, c), question) else None


def _kind_words_answered(q: QuotedClaim, question: str) -> bool:
    if not anchored(question, q.text):
        return False
    missing = missing_terms(question, q.covering, answered=_kind_words(question, q.claim))
    return not missing or (
        len(missing) == 1 and gives_value_asked(question, q.claim) and q.corpus_coverage >= KNOWN_WORDS
    )


def _shipped_variant(q: QuotedClaim, question: str, *, misspellings: bool, value_only: bool) -> bool:
    """The shipped rule (`value_only`), or the first choice, which also confirmed a quoted sentence with every
    term of a question that asks for no value; either without reading misspellings."""
    if not anchored(question, q.text):
        return False
    gives = gives_value_asked(question, q.claim)
    asks = expected_answer_type(question) in VALUE_KINDS
    if (asks or value_only) and not gives:
        return False
    missing = missing_terms(question, q.covering, misspellings=misspellings)
    return not missing or (len(missing) == 1 and gives and q.corpus_coverage >= KNOWN_WORDS)


def _rules() -> dict[str, Rule | None]:
    return {
        "today": None,
        "relevance >= 0.40 (rejected before)": lambda q, c: 1.0 if (c["modelRelevance"] or 0) >= 0.40 else None,
        "shipped (claims.relevance): value asked and given, anchors, every term or all but one known word": (
            lambda q, c: quoted_answer(_claim(q, c))
        ),
        "shipped, misspellings not read": _whole(
            lambda q, p: _shipped_variant(q, p, misspellings=False, value_only=True)
        ),
        "first choice: as shipped, but every term there also confirms a question that asks for no value": _whole(
            lambda q, p: _shipped_variant(q, p, misspellings=True, value_only=False)
        ),
        "first choice, misspellings not read": _whole(
            lambda q, p: _shipped_variant(q, p, misspellings=False, value_only=False)
        ),
        "every term there, misspellings read (anchors)": _whole(_every_term),
        "first choice, per part of the question": _per_part(
            lambda q, p: _every_term(q, p) or _one_missing(q, p, kind=True, known=True)
        ),
        "first choice, words naming the kind answered by a value": _whole(_kind_words_answered),
        "anchors, value asked given, one term missing (any word)": _per_part(
            lambda q, p: _one_missing(q, p, kind=True, known=False)
        ),
        "... and the missing term not in its passage": _per_part(
            lambda q, p: _one_missing(q, p, kind=True, known=False, not_in_passage=True)
        ),
        "anchors, one term missing (any kind, any word)": _per_part(
            lambda q, p: _one_missing(q, p, kind=False, known=False)
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="+", help="NAME=records.jsonl (provenance evals --json)")
    ap.add_argument("--changes", action="store_true", help="list every case a rule changes")
    ap.add_argument(
        "--undo", action="store_true", help="the records are of a run with the shipped rule: undo it first (undone)"
    )
    args = ap.parse_args(argv)
    suites = {name: load(Path(path)) for name, path in (s.split("=", 1) for s in args.suites)}
    if args.undo:
        suites = {name: [undone(r) for r in records] for name, records in suites.items()}
    header = "| rule | " + " | ".join(
        f"{n}: quoted right refused / answered correctly / answered wrong / fabricated" for n in suites
    )
    print(header + " |")
    print("|---|" + "---:|" * len(suites))
    for name, rule in _rules().items():
        cells = []
        for records in suites.values():
            t = tally(records, rule)
            n_answer = sum(1 for r in records if r["expect"] == "answer")
            n_other = len(records) - n_answer
            cells.append(
                f"{t['quoted_right_refused']}/{n_answer}, {t['answered_correctly']}/{n_answer}, "
                f"{t['answered_wrong']}, {t['fabricated']}/{n_other}"
            )
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.changes:
        for name, rule in _rules().items():
            if rule is None:
                continue
            print(f"\n## {name}")
            for suite, records in suites.items():
                for line in changed(records, rule):
                    print(f"- {suite} {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
