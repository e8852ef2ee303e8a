"""The claim decomposition stage (stages/decompose.py), with a decomposer of fixed claims.

Real inputs, and tiny real implementations of the model ports, so the test exercises the stage module's own
logic, not the local profile's tuning."""

from __future__ import annotations

from provenance.claims import split_claims
from provenance.ports import (
    Decomposition,
    Usage,
)
from provenance.stages.decompose import decompose


class FixedDecomposer:
    name = "fixed-decomposer"

    def __init__(self, claims: list[str]) -> None:
        self.claims = claims

    async def decompose(self, question: str, answer: str) -> Decomposition:
        return Decomposition(self.claims, Usage(model="fixed-dec"))


async def test_decompose_drops_meta_claims_and_duplicates() -> None:
    claims = [
        "A standard locker costs $14 per month.",
        "The passages do not mention parking.",
        "  A standard locker costs $14 per month.  ",
        "",
        "I could not find anything about car parking.",
        "Keyholder membership includes one standard locker.",
        "A standard locker costs $14 per month.",
    ]
    outcome = await decompose("How much is a locker?", "…", FixedDecomposer(claims))
    assert outcome.claims == [
        "A standard locker costs $14 per month.",
        "Keyholder membership includes one standard locker.",
    ]
    stage = outcome.stage
    assert stage.dropped == ["The passages do not mention parking.", "I could not find anything about car parking."]
    assert stage.claim_count == 2 and stage.model == "fixed-dec" and stage.status == "ok"
    assert stage.detail and "2" in stage.detail


def test_filter_claims_without_meta_has_no_drops() -> None:
    kept, dropped = split_claims(["Lockers are rented by the month.", "Lockers are rented by the month."])
    assert kept == ["Lockers are rented by the month."] and dropped == []


async def test_decompose_detail_is_none_without_drops() -> None:
    outcome = await decompose("q", "a", FixedDecomposer(["Lockers are rented by the month."]))
    assert outcome.stage.detail is None and outcome.stage.dropped == []
