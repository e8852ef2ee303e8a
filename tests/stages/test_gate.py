"""The gate (stages/gate.py): mean and weakest claim, thresholds inclusive."""

from __future__ import annotations

from provenance.settings import GateSettings
from provenance.stages.gate import gate, relevance_uncertain
from tests.stages.support import claim


def test_gate_pass() -> None:
    stage = gate([claim("a", 0.9), claim("b", 0.8)], GateSettings(threshold=0.7, min_claim=0.4))
    assert stage.decision == "pass" and stage.detail is None and stage.status == "ok"
    assert (stage.score, stage.min_claim) == (0.85, 0.8)
    assert (stage.threshold, stage.min_claim_threshold) == (0.7, 0.4)
    assert len(stage.claims) == 2 and stage.ms >= 0


def test_gate_fails_on_mean() -> None:
    stage = gate([claim("a", 0.6), claim("b", 0.65)], GateSettings(threshold=0.7, min_claim=0.4))
    assert stage.decision == "fail" and stage.min_claim == 0.6 and stage.failed == "support"
    assert stage.detail and "mean" in stage.detail


def test_gate_fails_on_weakest_claim() -> None:
    stage = gate([claim("a", 0.95), claim("b", 0.95), claim("c", 0.3)], GateSettings(threshold=0.7, min_claim=0.4))
    assert stage.score is not None and stage.score >= 0.7
    assert stage.decision == "fail" and stage.min_claim == 0.3 and stage.failed == "support"
    assert stage.detail and "weakest" in stage.detail


def test_gate_thresholds_are_inclusive() -> None:
    # Three claims at exactly the threshold average 0.6999999999999998 in floating point; they pass.
    stage = gate(
        [claim("a", 0.7, relevance=0.7), claim("b", 0.7, relevance=0.7), claim("c", 0.7, relevance=0.7)],
        GateSettings(threshold=0.7, min_claim=0.7, relevance=0.7),
    )
    assert stage.decision == "pass" and stage.score == 0.7 and stage.relevance == 0.7 and stage.failed is None


def test_gate_no_claims_fails() -> None:
    stage = gate([], GateSettings(threshold=0.6, min_claim=0.3))
    assert stage.decision == "fail" and stage.claims == [] and stage.score == 0.0
    assert (stage.threshold, stage.min_claim_threshold) == (0.6, 0.3)
    assert stage.detail and "no checkable claim" in stage.detail
    assert stage.failed == "support" and stage.relevance == 0.0


def test_gate_passes_one_answering_claim_beside_supported_context() -> None:
    # The answer, and a claim of context that doesn't answer by itself but is stated by the passages.
    claims = [claim("answer", 0.9, relevance=0.85, by_model=True), claim("context", 0.8, relevance=0.1, by_model=True)]
    stage = gate(claims, GateSettings())
    assert stage.decision == "pass" and stage.failed is None and stage.detail is None
    assert (stage.relevance, stage.relevance_threshold, stage.relevance_uncertain) == (0.85, 0.70, 0.40)


def test_gate_fails_on_relevance_when_no_claim_answers() -> None:
    claims = [claim("a", 0.95, relevance=0.6, by_model=True), claim("b", 0.9, relevance=0.2, by_model=True)]
    stage = gate(claims, GateSettings(relevance=0.7, relevance_uncertain=0.4))
    assert stage.decision == "fail" and stage.failed == "relevance" and stage.relevance == 0.6
    assert stage.detail and "0.60" in stage.detail and stage.detail.endswith(": uncertain")
    assert relevance_uncertain(stage)
    low = gate([claim("a", 0.95, relevance=0.3)], GateSettings(relevance=0.7, relevance_uncertain=0.4))
    assert low.failed == "relevance" and not relevance_uncertain(low)
    assert low.detail and not low.detail.endswith(": uncertain")
    # Inclusive, as the support thresholds are.
    assert gate([claim("a", 0.95, relevance=0.7)], GateSettings(relevance=0.7)).decision == "pass"


def test_gate_support_failure_wins_over_relevance_failure() -> None:
    stage = gate([claim("a", 0.3, relevance=0.1)], GateSettings(threshold=0.7, min_claim=0.4, relevance=0.7))
    assert stage.decision == "fail" and stage.failed == "support"
    assert stage.detail and "support" in stage.detail and not relevance_uncertain(stage)
    # A well-answering claim doesn't make up for a context claim the passages don't state.
    mixed = gate(
        [claim("a", 0.95, relevance=0.95), claim("b", 0.95, relevance=0.0), claim("c", 0.3, relevance=0.0)],
        GateSettings(),
    )
    assert mixed.failed == "support" and mixed.detail and "weakest" in mixed.detail


def test_gate_reads_every_claims_relevance_when_the_local_verifier_judged_it() -> None:
    """An extractive answer is sentences its generator chose as answering, none of them context: with the
    local verifier's relevance, every claim must answer (the mean, and the weakest above its floor)."""
    rules = GateSettings(threshold=0.7, min_claim=0.4, relevance=0.7)
    context = [claim("answer", 1.0, relevance=0.85), claim("context", 1.0, relevance=0.1)]
    stage = gate(context, rules)
    assert stage.relevance_rule == "every" and stage.failed == "relevance" and stage.relevance == 0.475
    # Both answering, one weakly: the mean clears 0.70 and the weakest its floor.
    both = gate([claim("a", 1.0, relevance=0.95), claim("b", 1.0, relevance=0.5)], rules)
    assert both.decision == "pass" and both.relevance == 0.725
    # The mean clears, the weakest doesn't.
    weak = gate([claim("a", 1.0, relevance=1.0), claim("b", 1.0, relevance=1.0), claim("c", 1.0, relevance=0.3)], rules)
    assert weak.failed == "relevance" and weak.detail and "weakest" in weak.detail
    # The same claims judged by a model pass on the best one.
    assert (
        gate(
            [claim("answer", 1.0, relevance=0.85, by_model=True), claim("c", 1.0, relevance=0.1, by_model=True)], rules
        ).decision
        == "pass"
    )
