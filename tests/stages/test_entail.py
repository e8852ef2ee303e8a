"""The entailment stage (stages/entail.py): one verifier or two combined, failing closed.

Real inputs, and tiny real implementations of the model ports, so the test exercises the stage module's own
logic, not the local profile's tuning."""

from __future__ import annotations

from collections.abc import Sequence

from provenance.claims.verdict import combine
from provenance.ports import ClaimVerdict, ScoredPassage, Usage, Verification
from provenance.stages.decompose import DecompositionOutcome
from provenance.stages.entail import entail
from provenance.wire import DecompositionStage
from tests.stages.support import AGM, LOCKERS, PASSAGES, SHELVES

Verdict = tuple[float, list[str]] | tuple[float, list[str], float | None]


def verification(*verdicts: Verdict, usage: Usage | None = None) -> Verification:
    """Verdicts as (support, passage ids) or (support, passage ids, relevance)."""
    return Verification([ClaimVerdict(*v) for v in verdicts], usage)


def test_combine_one_verifier_passes_local_through() -> None:
    local = verification((0.91234, [LOCKERS.id, SHELVES.id]), (0.2, []))
    results = combine(["c1", "c2"], local, None)
    assert [r.text for r in results] == ["c1", "c2"]
    assert results[0].support == results[0].local_support == 0.9123
    assert results[0].supporting_passage_ids == [LOCKERS.id, SHELVES.id]
    assert results[1].support == 0.2 and results[1].supporting_passage_ids == []
    assert all(r.model_support is None and r.model_relevance is None and r.capped_by is None for r in results)
    # No relevance from the local verifier: the claim is not taken to answer.
    assert all(r.relevance == 0.0 and r.local_relevance is None for r in results)


def test_combine_two_verifiers_min_score_and_agreed_support() -> None:
    local = verification((0.9, [LOCKERS.id, SHELVES.id]), (0.4, [AGM.id]), (0.8, [LOCKERS.id]))
    model = verification((0.7, [SHELVES.id, AGM.id]), (0.95, [LOCKERS.id]), (0.6, [SHELVES.id]))
    r1, r2, r3 = combine(["c1", "c2", "c3"], local, model)
    # Agreed passages only; support the lower of the two; both supports reported.
    assert (r1.support, r1.local_support, r1.model_support) == (0.7, 0.9, 0.7)
    assert r1.supporting_passage_ids == [SHELVES.id]
    # No agreement: the more doubtful verifier's passages.
    assert (r2.support, r2.model_support) == (0.4, 0.95) and r2.supporting_passage_ids == [AGM.id]
    assert (r3.support, r3.model_support) == (0.6, 0.6) and r3.supporting_passage_ids == [SHELVES.id]


class FixedVerifier:
    def __init__(self, name: str, result: Verification) -> None:
        self.name, self.result = name, result
        self.calls = 0

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        self.calls += 1
        assert len(passages) == len(PASSAGES)
        return self.result


async def test_entail_runs_the_verifier_and_counts_the_model_verdicts_given() -> None:
    local = FixedVerifier("local", verification((0.9, [LOCKERS.id])))
    given = verification((0.5, [LOCKERS.id]), usage=Usage(model="m", input_tokens=7))
    claims = ["A standard locker costs $14 per month."]
    stage = DecompositionStage(status="ok", claim_count=1)
    with_verdicts = DecompositionOutcome(stage, claims, Usage(model="m"), verification=given, verified_by="model")
    outcome = await entail("q", with_verdicts, PASSAGES, local)
    assert local.calls == 1
    assert outcome.stage.verifiers == ["local", "model"] and outcome.stage.status == "ok"
    assert outcome.usages == [Usage(model="m", input_tokens=7)]
    (only,) = outcome.claims
    assert (only.support, only.local_support, only.model_support) == (0.5, 0.9, 0.5)

    alone = await entail("q", DecompositionOutcome(stage, claims, Usage(model="m")), PASSAGES, local)
    assert alone.stage.verifiers == ["local"] and alone.usages == []
    assert alone.claims[0].support == 0.9 and alone.claims[0].model_support is None


def test_combine_fails_closed_when_the_model_omits_a_claim() -> None:
    from provenance.ports import ClaimVerdict, Verification
    from provenance.stages.entail import combine

    local = Verification(verdicts=[ClaimVerdict(0.9, ["a"]), ClaimVerdict(0.9, ["a"])])
    model = Verification(verdicts=[ClaimVerdict(0.8, ["a"])])
    first, second = combine(["one", "two"], local, model)
    assert first.support == 0.8 and first.supporting_passage_ids == ["a"]
    assert second.support == 0.0 and second.model_support == 0.0 and second.local_support == 0.9
    # ... and as no answer: the missing verdict's relevance is 0.
    assert second.relevance == 0.0 and second.model_relevance == 0.0


def test_combine_takes_the_models_relevance_and_the_lower_support() -> None:
    local = verification((0.9, [LOCKERS.id], 0.2), (0.8, [LOCKERS.id], 0.9), (0.7, [AGM.id], 0.6))
    # The model judges the first claim an answer, the second not; it gives no relevance for the third.
    model = verification((0.95, [LOCKERS.id], 0.85), (0.6, [LOCKERS.id], 0.1), (0.9, [AGM.id], None))
    r1, r2, r3 = combine(["c1", "c2", "c3"], local, model)
    assert (r1.support, r1.relevance, r1.local_relevance, r1.model_relevance) == (0.9, 0.85, 0.2, 0.85)
    assert (r2.support, r2.relevance, r2.local_relevance, r2.model_relevance) == (0.6, 0.1, 0.9, 0.1)
    # No relevance from the model: the local verifier's stands.
    assert (r3.support, r3.relevance, r3.model_relevance) == (0.7, 0.6, None)
    # Without a model, relevance is the local verifier's.
    alone = combine(["c1"], verification((0.9, [LOCKERS.id], 0.42)), None)[0]
    assert (alone.relevance, alone.local_relevance, alone.model_relevance) == (0.42, 0.42, None)
