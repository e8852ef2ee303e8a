"""The gate (stages/gate.py): mean and weakest claim, thresholds inclusive."""

from __future__ import annotations

from provenance.stages.gate import gate
from tests.stages.support import claim


def test_gate_pass() -> None:
    stage = gate([claim("a", 0.9), claim("b", 0.8)], 0.7, 0.4)
    assert stage.decision == "pass" and stage.detail is None and stage.status == "ok"
    assert (stage.score, stage.min_claim) == (0.85, 0.8)
    assert (stage.threshold, stage.min_claim_threshold) == (0.7, 0.4)
    assert len(stage.claims) == 2 and stage.ms >= 0


def test_gate_fails_on_mean() -> None:
    stage = gate([claim("a", 0.6), claim("b", 0.65)], 0.7, 0.4)
    assert stage.decision == "fail" and stage.min_claim == 0.6
    assert stage.detail and "mean" in stage.detail


def test_gate_fails_on_weakest_claim() -> None:
    stage = gate([claim("a", 0.95), claim("b", 0.95), claim("c", 0.3)], 0.7, 0.4)
    assert stage.score is not None and stage.score >= 0.7
    assert stage.decision == "fail" and stage.min_claim == 0.3
    assert stage.detail and "weakest" in stage.detail


def test_gate_thresholds_are_inclusive() -> None:
    # Three claims at exactly the threshold average 0.6999999999999998 in floating point; they pass.
    stage = gate([claim("a", 0.7), claim("b", 0.7), claim("c", 0.7)], 0.7, 0.7)
    assert stage.decision == "pass" and stage.score == 0.7


def test_gate_no_claims_fails() -> None:
    stage = gate([], 0.6, 0.3)
    assert stage.decision == "fail" and stage.claims == [] and stage.score == 0.0
    assert (stage.threshold, stage.min_claim_threshold) == (0.6, 0.3)
    assert stage.detail and "no checkable claim" in stage.detail
