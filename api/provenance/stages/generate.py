"""Generation: the profile's generator answers from the retrieved passages, or returns an empty answer."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.ports import Generation, Generator, ScoredPassage, Usage
from provenance.timing import Timer
from provenance.wire import GenerationStage


class GenerationOutcome(msgspec.Struct, frozen=True):
    stage: GenerationStage
    generation: Generation

    @property
    def usages(self) -> list[Usage]:
        return [self.generation.usage]


async def generate(question: str, generator: Generator, passages: Sequence[ScoredPassage]) -> GenerationOutcome:
    timer = Timer()
    generation = await generator.generate(question, passages)
    given = {p.id for p in passages}
    # A generator may only claim to have used passages it was shown.
    used = [pid for pid in generation.used_passage_ids if pid in given]
    answer = generation.answer.strip()
    generation = msgspec.structs.replace(generation, answer=answer, used_passage_ids=used)
    stage = GenerationStage(
        status="ok",
        ms=timer.ms,
        model=generation.usage.model,
        input_tokens=generation.usage.input_tokens,
        output_tokens=generation.usage.output_tokens,
        empty=not answer,
        used_passage_ids=used,
        detail=_detail(generation),
        cut_off=generation.cut_off,
    )
    return GenerationOutcome(stage, generation)


def _detail(generation: Generation) -> str | None:
    if not generation.answer:
        return "the generator found nothing in the passages that answers the question"
    if generation.cut_off:
        return (
            "the model's output was cut off at its token limit: its complete sentences up to the cut, each once, "
            "are the answer checked"
        )
    return None
