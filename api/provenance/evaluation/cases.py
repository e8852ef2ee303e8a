"""The eval case as a suite's JSONL line holds it, and the record of how the pipeline answered it.
What `provenance feedback export` writes too; nothing here runs the service."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

_Row = TypeVar("_Row", bound=msgspec.Struct)

Expect = Literal["answer", "refuse", "block"]
EXPECTED_STATUS = {"answer": "answered", "refuse": "refused", "block": "blocked"}


class Served(msgspec.Struct, frozen=True, rename="camel", kw_only=True):
    """How the response a reader rated was served, for a case made from their feedback
    (`provenance feedback export`): what it said, and what has changed since (`since`, empty when nothing
    has: the same settings, the same corpus version)."""

    status: str
    reason: str | None = None
    cached: bool = False
    corpus: str | None = None
    corpus_version: str | None = None
    served_at: str | None = None
    verdict: str | None = None
    kind: str | None = None
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    since: list[str] = msgspec.field(default_factory=list)


class Case(msgspec.Struct, frozen=True):
    id: str
    bucket: str
    question: str
    # None only in a case left for a person to decide (a reader said the answer was wrong): such a case is
    # not run until they set it (load_cases says so).
    expect: Expect | None
    mustIncludeAny: list[str] | None = None
    note: str | None = None
    reason: str | None = None
    # An answer that must not be given again (a reader said it was wrong): an answer holding one of these is
    # not a correct answer, whatever else it holds.
    mustNotInclude: list[str] | None = None
    # From feedback: the rated response's request id, that a person must review the case (fill mustIncludeAny,
    # set expect), and how the response was served.
    requestId: str | None = None
    needsReview: bool = False
    served: Served | None = None

    @property
    def expected(self) -> Expect:
        if self.expect is None:
            raise ValueError(f"case {self.id!r} has no expect: it is left for review (set expect to run it)")
        return self.expect


class CaseResult(msgspec.Struct, rename="camel", kw_only=True):
    """One case's result; `--json` writes it as its camelCase fields (`json_record`) and a resumed run reads it
    back from them."""

    id: str
    bucket: str
    question: str
    expect: Expect
    status: str
    reason: str | None
    answer: str | None
    citations: list[str]
    groundedness: float | None
    min_claim: float | None
    relevance: float | None
    # The gate's relevance rule for this case ("best" when a model judged relevance), for the re-scoring.
    relevance_rule: str | None = None
    claim_support: list[float]
    claim_relevance: list[float]
    # When a reading judge scored the claims: each claim's relevance as the judge gave it (calibrated, before
    # the lexical caps) and as the local verifier gave it, so that other ways of combining the two can be
    # re-scored. The local one keeps its older key on the wire, which the committed evals/llm/*.jsonl hold.
    claim_judge_relevance: list[float | None] | None = None
    claim_local_relevance: list[float | None] | None = msgspec.field(default=None, name="claimRulesRelevance")
    ms: float
    must_include_any: list[str] | None = None
    must_not_include: list[str] | None = None
    answer_correct: bool | None = None
    # The answer the gate saw, kept in the eval record only so the threshold sweep can score correctness.
    candidate_answer: str | None = msgspec.field(default=None, name="candidate")
    # Whether a retrieved passage (the top k) holds a reference answer: recall@k, what even a perfect model's
    # answer needs. None for a case without reference strings.
    retrieved_answer: bool | None = None
    # A blocked case's message ("... (generation: the model's output was cut off at max_tokens)"): which call
    # failed and how, so a run's model errors can be told apart.
    message: str | None = None
    # Each claim the gate saw, with the feature verifier's relevance features (evaluation.claim_features): what
    # a relevance rule is tried on offline. None when the feature verifier didn't judge relevance.
    claims: list[dict[str, Any]] | None = None

    @property
    def correct(self) -> bool:
        return self.status == EXPECTED_STATUS[self.expect]

    @property
    def fabricated(self) -> bool:
        return self.expect != "answer" and self.status == "answered"


def load_jsonl(path: Path, kind: type[_Row]) -> list[_Row]:
    """One `kind` a line; a line that doesn't fit is an error naming the file and line."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(msgspec.json.decode(line, type=kind))
        except msgspec.ValidationError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
    return rows


def load_cases(path: Path) -> list[Case]:
    cases = load_jsonl(path, Case)
    undecided = [c.id for c in cases if c.expect is None]
    if undecided:
        raise ValueError(
            f"{path}: {len(undecided)} case(s) left for review have no expect yet ({', '.join(undecided[:5])}): "
            'set "expect" to "answer", "refuse" or "block" (and fill mustIncludeAny) before running them'
        )
    return cases
