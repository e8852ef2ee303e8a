"""The claim decomposition stage (stages/decompose.py), with a decomposer of fixed claims.

Real inputs, and tiny real implementations of the model ports, so the test exercises the stage module's own
logic, not the local profile's tuning."""

from __future__ import annotations

from collections.abc import Sequence

from provenance.ports import ClaimVerdict, Decomposition, ScoredPassage, Usage, Verification
from provenance.stages.claim_filters import split_claims
from provenance.stages.decompose import decompose, decompose_and_verify
from provenance.stages.entail import combine
from tests.stages.support import LOCKERS, PASSAGES


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


class FixedChecker:
    """A model that returns fixed claims, each with a verdict of its own (support, relevance)."""

    name = "fixed-checker"

    def __init__(self, claims: list[str], verdicts: list[tuple[float, float]]) -> None:
        self.claims, self.verdicts = claims, verdicts

    async def decompose_and_verify(
        self, question: str, answer: str, passages: Sequence[ScoredPassage]
    ) -> tuple[Decomposition, Verification]:
        verdicts = [ClaimVerdict(s, [LOCKERS.id], relevance=r) for s, r in self.verdicts]
        return Decomposition(self.claims, Usage(model="fixed-chk")), Verification(verdicts)


async def test_a_claim_the_answer_does_not_make_is_dropped() -> None:
    # A small model copies the prompt's own example as a claim of an answer about something else.
    checker = FixedChecker(
        ["A day pass costs $25.", "A standard locker costs $14 per month."], [(1.0, 1.0), (0.9, 1.0)]
    )
    outcome = await decompose_and_verify(
        "How much is a locker?", "A standard locker costs $14 per month.", PASSAGES, checker
    )
    given = outcome.verification
    assert given is not None and outcome.verified_by == "fixed-checker"
    assert outcome.claims == ["A standard locker costs $14 per month."]
    assert outcome.stage.not_in_answer == ["A day pass costs $25."] and outcome.stage.added == 0
    # The verdict that stays is the kept claim's own, not the dropped one's.
    assert [v.support for v in given.verdicts] == [0.9] and given.local_only_from is None
    assert outcome.stage.detail and "doesn't make" in outcome.stage.detail


async def test_a_claim_made_self_contained_from_the_question_is_the_answers() -> None:
    checker = FixedChecker(["A standard locker costs $14 per month."], [(0.9, 1.0)])
    outcome = await decompose_and_verify("How much is a standard locker per month?", "$14.", PASSAGES, checker)
    assert outcome.claims == ["A standard locker costs $14 per month."] and outcome.stage.not_in_answer == []


async def test_an_answer_sentence_no_claim_states_is_checked_as_a_claim_by_the_local_verifier_alone() -> None:
    # The model's claims leave out the answer's second sentence, number and all: it would be shown unchecked.
    answer = "Yes, a standard locker costs $14 per month. Large lockers cost $22 per month."
    checker = FixedChecker(["A standard locker costs $14 per month."], [(0.9, 1.0)])
    outcome = await decompose_and_verify("How much is a locker?", answer, PASSAGES, checker)
    given = outcome.verification
    assert given is not None
    assert outcome.claims == ["A standard locker costs $14 per month.", "Large lockers cost $22 per month."]
    assert outcome.stage.added == 1 and outcome.stage.claim_count == 2
    assert given.local_only_from == 1 and len(given.verdicts) == 1
    local = Verification([ClaimVerdict(0.95, [LOCKERS.id], 0.9), ClaimVerdict(0.3, [], 0.8)])
    first, second = combine(outcome.claims, local, given)
    assert (first.support, first.model_support) == (0.9, 0.9)
    # No model verdict for the added sentence: the local verifier's stands, not a missing verdict's 0.
    assert (second.support, second.model_support, second.relevance) == (0.3, None, 0.8)


async def test_an_answer_sentence_the_claims_leave_out_is_checked_though_it_has_no_number() -> None:
    # Seen from a 1.5B model: its claims were all about the email address, and the second sentence, a fact
    # the passages never state, would have been shown unchecked.
    answer = "To report an injury, email safety@example.org. There is no defibrillator on site."
    claims = ["Injuries are reported to safety@example.org.", "The safety email is safety@example.org."]
    checker = FixedChecker(claims, [(1.0, 1.0), (1.0, 1.0)])
    outcome = await decompose_and_verify("Who do I email about an injury?", answer, PASSAGES, checker)
    assert outcome.claims == [*claims, "There is no defibrillator on site."] and outcome.stage.added == 1


async def test_an_answer_sentence_its_claims_reword_is_not_added() -> None:
    answer = "Lockers cost $14 a month, and Keyholders get one included."
    claims = ["A standard locker costs $14 per month.", "Keyholder membership includes one locker."]
    checker = FixedChecker(claims, [(0.9, 1.0), (0.9, 1.0)])
    outcome = await decompose_and_verify("How much is a locker?", answer, PASSAGES, checker)
    assert outcome.claims == claims and outcome.stage.added == 0


async def test_a_reply_word_is_not_a_claim_and_a_covered_answer_adds_nothing() -> None:
    answer = "Yes. A standard locker costs $14 per month."
    checker = FixedChecker(["A standard locker costs $14 per month."], [(0.9, 1.0)])
    outcome = await decompose_and_verify("Is there a locker fee?", answer, PASSAGES, checker)
    given = outcome.verification
    assert given is not None
    assert outcome.claims == ["A standard locker costs $14 per month."] and outcome.stage.added == 0
    assert given.local_only_from is None
