"""The generation stage (stages/generate.py), with a generator of fixed answers.

Real inputs, and tiny real implementations of the model ports, so the test exercises the stage module's own
logic, not the local profile's tuning."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from provenance.ports import Generation, ScoredPassage, Usage
from provenance.stages.generate import generate
from tests.stages.support import AGM, LOCKERS, PASSAGES


class FixedGenerator:
    name = "fixed-generator"

    def __init__(self, answer: str, used: list[str]) -> None:
        self.answer, self.used = answer, used

    async def generate(self, question: str, passages: Sequence[ScoredPassage]) -> Generation:
        return Generation(self.answer, self.used, Usage(model="fixed-gen", input_tokens=120, output_tokens=9))


async def test_generate_keeps_only_passages_it_was_shown() -> None:
    gen = FixedGenerator("  A standard locker costs $14 per month.\n", [AGM.id, "99-made-up.md#nowhere", LOCKERS.id])
    outcome = await generate("How much is a locker?", gen, [LOCKERS, AGM])
    assert outcome.generation.answer == "A standard locker costs $14 per month."
    assert outcome.generation.used_passage_ids == [AGM.id, LOCKERS.id]
    stage = outcome.stage
    assert stage.status == "ok" and stage.empty is False and stage.detail is None and stage.ms >= 0
    assert stage.used_passage_ids == [AGM.id, LOCKERS.id]
    assert (stage.model, stage.input_tokens, stage.output_tokens) == ("fixed-gen", 120, 9)


@pytest.mark.parametrize("answer", ["", "   ", "\n\t "])
async def test_generate_whitespace_answer_is_empty(answer: str) -> None:
    outcome = await generate("What is the wifi password?", FixedGenerator(answer, [LOCKERS.id]), PASSAGES)
    assert outcome.generation.answer == ""
    assert outcome.stage.empty is True
    assert outcome.stage.detail and "nothing" in outcome.stage.detail
