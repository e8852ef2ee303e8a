"""How eval results are scored: right or wrong against the expected outcome, the fabrication and
false-refusal rates, and the results rescored offline at another gate threshold or relevance rule
(by the live `stages.gate.gate`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import msgspec

from provenance import text as T
from provenance.claims.verdict import no_no
from provenance.evaluation.cases import CaseResult
from provenance.settings import GateSettings
from provenance.stages.claim_filters import is_meta_claim
from provenance.stages.gate import gate
from provenance.wire import ClaimResult, RelevanceRule

THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def retrieved_answer(texts: Sequence[str], must_include_any: Sequence[str] | None) -> bool | None:
    """Whether one of the retrieved passages holds a reference string (case and line breaks aside)."""
    if not must_include_any:
        return None
    flat = [" ".join(t.split()).lower() for t in texts]
    return any(" ".join(m.split()).lower() in t for m in must_include_any for t in flat)


def answer_matches(answer: str | None, must_include_any: Sequence[str] | None) -> bool | None:
    if not must_include_any:
        return None
    if not answer:
        return False
    low = answer.lower()
    return any(m.lower() in low for m in must_include_any)


PARTIAL = "partial"


def answer_right(
    bucket: str,
    answer: str | None,
    must_include_any: Sequence[str] | None,
    must_not_include: Sequence[str] | None = None,
) -> bool | None:
    """Whether an answer holds a reference answer; in the partial bucket it must also say what it leaves
    out (a sentence about the documents themselves, "the documents don't cover ..."), whichever profile
    wrote it. An answer that gives again one a reader said was wrong (`must_not_include`) is not right."""
    if answer and answer_matches(answer, must_not_include):
        return False
    right = answer_matches(answer, must_include_any)
    if right and bucket == PARTIAL:
        return any(is_meta_claim(s) for s in T.split_sentences(answer or ""))
    return right


# --- scoring ------------------------------------------------------------------------------------


class Score(msgspec.Struct):
    n: int
    accuracy: float
    false_refusal_rate: float | None
    fabrication_rate: float | None
    answer_correctness: float | None
    answered_correctly: float | None
    mean_ms: float
    p95_ms: float
    # Of the answerable cases with reference strings: a retrieved passage holds one (recall@k).
    recall: float | None = None


def _rate(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def score(results: Sequence[CaseResult]) -> Score:
    should_answer = [r for r in results if r.expect == "answer"]
    should_not = [r for r in results if r.expect != "answer"]
    answered = [r for r in should_answer if r.status == "answered"]
    # A case with only an answer it must not give scores when it gives it (answer_correct False).
    with_key = [r for r in answered if r.must_include_any or r.answer_correct is False]
    ms = sorted(r.ms for r in results) or [0.0]
    keyed_all = [r for r in should_answer if r.must_include_any or r.answer_correct is False]
    return Score(
        n=len(results),
        accuracy=sum(r.correct for r in results) / max(len(results), 1),
        false_refusal_rate=_rate(sum(r.status != "answered" for r in should_answer), len(should_answer)),
        fabrication_rate=_rate(sum(r.fabricated for r in should_not), len(should_not)),
        answer_correctness=_rate(sum(bool(r.answer_correct) for r in with_key), len(with_key)),
        answered_correctly=_rate(sum(bool(r.answer_correct) for r in keyed_all), len(keyed_all)),
        mean_ms=statistics.fmean(ms),
        p95_ms=ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        recall=_rate(
            sum(bool(r.retrieved_answer) for r in keyed_all),
            sum(r.retrieved_answer is not None for r in keyed_all),
        ),
    )


def rescore(results: Sequence[CaseResult], rules: GateSettings, threshold: float) -> list[CaseResult]:
    """The gate is a pure function of the stored claim scores, so other thresholds can be re-scored without
    re-running the pipeline: by the gate itself, so the sweep and the live gate never disagree. `threshold`
    replaces both the mean-support and the relevance threshold. Cases that never reached the gate keep their
    outcome."""
    swept = msgspec.structs.replace(rules, threshold=threshold, relevance=threshold)
    out = []
    for r in results:
        if not r.claim_support or r.status == "blocked":
            out.append(r)
            continue
        best = r.relevance_rule == "best"
        claims = [_scored(s, rel, best) for s, rel in zip(r.claim_support, r.claim_relevance, strict=True)]
        out.append(_regated(r, claims, swept))
    return out


def _scored(support: float, relevance: float, best: bool) -> ClaimResult:
    """A claim as the gate reads it from a stored record: its scores, and a model's relevance under "best"."""
    return ClaimResult(
        text="",
        support=support,
        relevance=relevance,
        supporting_passage_ids=[],
        lexical_overlap=0.0,
        local_support=support,
        model_relevance=relevance if best else None,
    )


def _regated(r: CaseResult, claims: list[ClaimResult], rules: GateSettings) -> CaseResult:
    """The case as the gate decides it on `claims`: answered with its candidate, or refused."""
    passed = gate(claims, rules).decision == "pass"
    answer = (r.answer or r.candidate_answer) if passed else None
    return msgspec.structs.replace(
        r,
        status="answered" if passed else "refused",
        answer=answer,
        answer_correct=(
            answer_right(r.bucket, answer, r.must_include_any, r.must_not_include) if r.expect == "answer" else None
        ),
    )


# How a judge's relevance and the rules' may be combined (re-scored in the report when a judge scored).
RELEVANCE_SOURCES: dict[str, Callable[[float, float], float]] = {
    "judge": lambda judge, rules: judge,
    "rules": lambda judge, rules: rules,
    "either (max)": max,
    "mean": lambda judge, rules: (judge + rules) / 2,
    # JUDGE_RELEVANCE=veto: the higher of the two unless the judge says No.
    "veto": lambda judge, rules: max(judge, rules) if no_no("veto", judge) else judge,
    # JUDGE_RELEVANCE=firm: the higher of the two unless the judge says a firm No (no writer's verdict here).
    "firm": lambda judge, rules: max(judge, rules) if no_no("firm", judge) else judge,
}


RELEVANCE_RULES: tuple[RelevanceRule, ...] = ("every", "best")


def rescore_relevance(
    results: Sequence[CaseResult], rules: GateSettings, source: str, relevance_rule: RelevanceRule
) -> list[CaseResult]:
    """The judged cases re-scored with each claim's relevance taken from `source` (RELEVANCE_SOURCES) under
    the gate's `relevance_rule`. A lexical cap stays: a claim whose stored relevance is below what the judge
    gave was capped, and the cap bounds any other source too. Cases without the judge's record keep their
    outcome."""
    combine = RELEVANCE_SOURCES[source]
    out = []
    for r in results:
        if not r.claim_support or r.status == "blocked" or r.claim_judge_relevance is None:
            out.append(r)
            continue
        claims = []
        for s, final, judge, own in zip(
            r.claim_support, r.claim_relevance, r.claim_judge_relevance, r.claim_local_relevance or [], strict=True
        ):
            if judge is None or own is None:
                relevance = final  # not judged (its support failed the floor): as it was
            else:
                capped = final < judge - 1e-3
                relevance = min(combine(judge, own), final) if capped else combine(judge, own)
            claims.append(_scored(s, relevance, relevance_rule == "best"))
        out.append(_regated(r, claims, rules))
    return out
