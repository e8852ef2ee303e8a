"""The gate: two rules, judged apart.

- Support: every claim must be stated by the passages: the mean claim's support and the weakest claim's
  both clear their thresholds.
- Relevance: the answer must answer the question. When a model judged relevance, at least one claim
  reaches the relevance threshold: a model's answer may carry context, and other claims need only pass
  support. When the local verifier judged it (the extractive profiles, whose answer is the sentences the
  generator chose as answering, none of them context), every claim must answer, as every claim must be
  supported: the mean relevance reaches the threshold and the weakest the per-claim floor.
  Between the uncertain floor and the threshold, whether it answers is uncertain, and the refusal says so
  rather than that it doesn't answer.

Support is checked first: an answer with a claim the documents don't state is refused for that, whatever
its relevance.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.settings import GateSettings
from provenance.timing import Timer
from provenance.wire import ClaimResult, GateStage, Judgment, RelevanceRule


def gate(claims: Sequence[ClaimResult], rules: GateSettings) -> GateStage:
    timer = Timer()
    rules_record = GateStage(
        status="ok",
        threshold=rules.threshold,
        min_claim_threshold=rules.min_claim,
        relevance_threshold=rules.relevance,
        relevance_uncertain=rules.relevance_uncertain,
    )
    if not claims:
        return msgspec.structs.replace(
            rules_record,
            ms=timer.ms,
            score=0.0,
            min_claim=0.0,
            relevance=0.0,
            decision="fail",
            failed="support",
            detail="the answer made no checkable claim",
        )
    support = [c.support for c in claims]
    # Decide on the figures the stage reports: unrounded, three claims of 0.7 average 0.6999999999999998.
    mean, lowest = round(sum(support) / len(support), 4), round(min(support), 4)
    relevances = [c.relevance for c in claims]
    # A model's relevance verdict (the generator's own, or the reading judge's) asks whether a claim answers, so
    # the best claim answering is enough: with the judge in the local profile, "best" answered more right
    # answers than "every" on our cases, the paraphrases and the 18F suite, and fabricated no more
    # (evals/results-judge-*.md). The local verifier's relevance is a coverage of the question: every claim.
    rule: RelevanceRule = "best" if any(_model_rated(c) for c in claims) else "every"
    relevance = round(max(relevances) if rule == "best" else sum(relevances) / len(relevances), 4)
    weakest_relevance = round(min(relevances), 4)
    detail: str | None = None
    failed: Judgment | None = None
    if mean < rules.threshold:
        failed, detail = "support", f"mean claim support {mean:.2f} is below {rules.threshold:.2f}"
    elif lowest < rules.min_claim:
        failed, detail = "support", f"weakest claim's support is {lowest:.2f}, below {rules.min_claim:.2f}"
    elif relevance < rules.relevance:
        failed = "relevance"
        which = "the most relevant claim" if rule == "best" else "the claims, on average,"
        detail = f"{which} score {relevance:.2f} on answering the question, below {rules.relevance:.2f}" + (
            ": uncertain" if relevance >= rules.relevance_uncertain else ""
        )
    elif rule == "every" and weakest_relevance < rules.min_claim:
        failed = "relevance"
        detail = (
            f"the weakest claim scores {weakest_relevance:.2f} on answering the question, below {rules.min_claim:.2f}"
        )
    return msgspec.structs.replace(
        rules_record,
        ms=timer.ms,
        score=mean,
        min_claim=lowest,
        relevance=relevance,
        relevance_rule=rule,
        decision="fail" if failed else "pass",
        failed=failed,
        claims=list(claims),
        detail=detail,
    )


def _model_rated(claim: ClaimResult) -> bool:
    return claim.model_relevance is not None or (claim.judge is not None and claim.judge.relevance is not None)


def relevance_uncertain(stage: GateStage) -> bool:
    """Whether a refusal for relevance was for an uncertain verdict rather than a low one."""
    return (
        stage.failed == "relevance"
        and stage.relevance is not None
        and stage.relevance_uncertain <= stage.relevance < stage.relevance_threshold
    )
