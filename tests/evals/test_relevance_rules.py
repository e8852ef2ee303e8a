"""evals/relevance_rules.py: what it counts, and how it re-scores a rule offline (the gate's rules and the
lexical caps, as the pipeline applies them)."""

from __future__ import annotations

from typing import Any

from evals.relevance_rules import outcome, quoted_right_refused, tally, undone


def record(expect: str = "answer", *, right: bool = True, capped: str | None = None, **claim: Any) -> dict[str, Any]:
    c = {
        "text": "Every new member pays a one-time joining fee of $30.",
        "quoted": True,
        "support": 1.0,
        "relevance": 0.45,
        "modelRelevance": 0.45,
        "relevanceCappedBy": capped,
        "heading": "Membership > Joining Fee",
        "passageText": "Every new member pays a one-time joining fee of $30.",
        "features": {"question_corpus_coverage": 1.0},
    } | claim
    return {
        "id": "x",
        "question": "Is there a joining fee when I sign up?",
        "expect": expect,
        "status": "refused",
        "reason": "not_an_answer",
        "candidate": c["text"],
        "candidateRight": right if expect == "answer" else None,
        "answerCorrect": False,
        "claims": [c],
    }


def lift(question: str, claim: dict[str, Any]) -> float | None:
    return 0.70


def test_a_quoted_right_sentence_refused_for_relevance_is_counted_and_a_rule_can_answer_it() -> None:
    refused = record()
    assert quoted_right_refused(refused)
    assert not quoted_right_refused(record(right=False)) and not quoted_right_refused(record(quoted=False))
    assert outcome(refused, None) == "refused" and outcome(refused, lift) == "answered"
    assert tally([refused], lift) == {
        "quoted_right_refused": 0,
        "answered_correctly": 1,
        "answered_wrong": 0,
        "fabricated": 0,
    }
    # A near miss the rule answers is a fabrication.
    assert tally([record("refuse")], lift)["fabricated"] == 1


def test_a_rule_never_lifts_a_capped_or_unquoted_claim_nor_a_refusal_for_support() -> None:
    assert outcome(record(capped="wrong_answer_type"), lift) == "refused"
    assert outcome(record(quoted=False), lift) == "refused"
    assert outcome(record() | {"reason": "not_grounded"}, lift) == "refused"


def test_a_run_with_the_rule_is_undone_to_the_refusal_it_replaced() -> None:
    lifted = record(relevance=0.70) | {"status": "answered", "reason": None, "answer": "Every new member pays..."}
    before = undone(lifted)
    assert before["status"] == "refused" and before["reason"] == "not_an_answer" and before["answer"] is None
    assert quoted_right_refused(before) and outcome(before, lift) == "answered"
    # A claim the model itself passed, or one capped, is left as it is.
    assert undone(record(relevance=0.91, modelRelevance=0.91) | {"status": "answered"})["status"] == "answered"
    assert undone(record(relevance=0.2, capped="wrong_answer_type"))["status"] == "refused"
