"""Test data built once: a value whose fields a test doesn't care about gets plausible ones, and the test
names only the fields it is about."""

from __future__ import annotations

from typing import Any

from provenance.evaluation.cases import CaseResult


def case_result(**fields: Any) -> CaseResult:
    """One eval case's result: by default an answerable case answered with its reference, passing the gate
    on two claims."""
    defaults: dict[str, Any] = {
        "id": "x",
        "bucket": "answerable",
        "question": "q",
        "expect": "answer",
        "status": "answered",
        "reason": None,
        "answer": "It costs $14.",
        "citations": ["p"],
        "groundedness": 0.9,
        "min_claim": 0.9,
        "relevance": 1.0,
        "relevance_rule": "best",
        "claim_support": [0.9],
        "claim_relevance": [1.0],
        "ms": 1.0,
        "must_include_any": ["$14"],
    }
    return CaseResult(**(defaults | fields))
