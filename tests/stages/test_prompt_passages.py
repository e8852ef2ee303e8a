"""The passages as a model's prompt holds them: whole within the budget (or with none), else each cut to its
sentences closest to the question, best first, every passage kept by its exact id."""

from __future__ import annotations

from provenance.inference.embedder import Embedder
from provenance.ports import ScoredPassage
from provenance.profiles.local import build_local_profile
from provenance.stages.closest import closest_sentences
from provenance.stages.prompt_passages import GAP, prompt_passages

QUESTION = "How much does a day pass cost?"
PASSAGES = [
    ScoredPassage(
        id="01-membership.md#day-passes",
        source="01-membership.md",
        heading="Day Passes",
        text=(
            "Day passes are for visitors who want to try the space. They are sold at the front desk. "
            "A day pass costs $25. It is valid for the staffed hours of one day. Tea and coffee are free."
        ),
        score=0.8,
    ),
    ScoredPassage(
        id="02-hours.md#opening-hours",
        source="02-hours.md",
        heading="Opening Hours",
        text=(
            "The space opens at 9 a.m. on weekdays. It closes at 10 p.m. On Sundays it is closed all day. "
            "Bank holidays follow the Sunday hours."
        ),
        score=0.4,
    ),
]


async def test_without_a_budget_or_within_it_the_passages_are_whole(embedder: Embedder) -> None:
    verifier = build_local_profile(embedder).verifier
    for budget in (0, 10_000):
        prompt = await prompt_passages(QUESTION, PASSAGES, budget, verifier, embedder)
        assert prompt.passages == PASSAGES and prompt.cut == [] and prompt.detail is None


async def test_past_the_budget_each_passage_keeps_its_id_and_its_closest_sentences(embedder: Embedder) -> None:
    verifier = build_local_profile(embedder).verifier
    whole = sum(embedder.count_tokens(p.text) for p in PASSAGES)
    prompt = await prompt_passages(QUESTION, PASSAGES, 24, verifier, embedder)
    assert [p.id for p in prompt.passages] == [p.id for p in PASSAGES]
    assert prompt.tokens == whole and prompt.prompt_tokens < whole and prompt.cut
    closest = await closest_sentences(QUESTION, PASSAGES, verifier, embedder)
    for cut, passage in zip(prompt.passages, PASSAGES, strict=True):
        # The sentence a refusal would point at is the one the prompt keeps, and nothing else is made up.
        best = closest[passage.id]
        assert passage.text[best.start : best.end] in cut.text
        assert all(part in passage.text for part in cut.text.split(GAP))
    assert "$25" in prompt.passages[0].text
    # The passages given to every check are untouched.
    assert PASSAGES[0].text.startswith("Day passes are for visitors")
