"""Model calls stream, bounded on their progress (`provenance.inference.streamed_calls`), the same for both SDKs: each
test runs against a scripted OpenAI-compatible server (the real `openai` SDK) and the fake Messages API (the
real `anthropic` SDK), on loopback. A call slow to its first token but steady succeeds; one that stalls mid-
answer times out on the gap, one that never stops on the ceiling, each naming its bound; a call that made
progress is never retried, one that failed before any token is."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from provenance.errors import ModelError
from provenance.inference.streamed_calls import PROGRESS, Pace, Progress, first_token_s
from provenance.ports import ScoredPassage
from provenance.profiles.anthropic import AnthropicGenerator
from provenance.profiles.base import ModelGenerator
from provenance.profiles.openai_compatible import OpenAIGenerator
from provenance.profiles.outputs import ANSWER_TOOL
from provenance.settings import Bounds
from tests.fake_anthropic import FakeAnthropic
from tests.scripted_server import ScriptedServer, StreamPlan

PASSAGE = ScoredPassage(
    id="01-membership.md#day-passes",
    source="01-membership.md",
    heading="Day Passes",
    text="A day pass costs $25 and is valid for the staffed hours of one day.",
    score=0.82,
)
ANSWER = {"answer": "A day pass costs $25.", "used_passage_ids": [PASSAGE.id]}
QUESTION = "How much is a day pass?"
# Steady: a chunk every 20 ms, each well within the gap bound.
STEADY = 0.02
GAP = 0.5


class Scripted(Protocol):
    """One SDK's server on loopback, scripted: what it streams and how, and what it was asked."""

    def generator(self, bounds: Bounds, *, max_retries: int = 0) -> ModelGenerator[Any]: ...

    def script(
        self,
        *,
        first_token_s: float = 0.0,
        gap_s: float = STEADY,
        stall_after: int | None = None,
        endless: bool = False,
    ) -> None: ...

    def fail_first(self, status: int) -> None: ...

    @property
    def requests(self) -> int: ...


class OpenAIScripted:
    def __init__(self, server: ScriptedServer, url: str) -> None:
        self.server, self.url = server, url

    def generator(self, bounds: Bounds, *, max_retries: int = 0) -> ModelGenerator[Any]:
        client = AsyncOpenAI(base_url=self.url, api_key="k", timeout=60, max_retries=max_retries)
        return OpenAIGenerator(client, "m", bounds=bounds)

    def script(
        self,
        *,
        first_token_s: float = 0.0,
        gap_s: float = STEADY,
        stall_after: int | None = None,
        endless: bool = False,
    ) -> None:
        self.server.completion(json.dumps(ANSWER))
        self.server.plan = StreamPlan(
            first_token_s=first_token_s, gap_s=gap_s, stall_after=stall_after, endless=endless
        )

    def fail_first(self, status: int) -> None:
        self.server.failures.append(status)

    @property
    def requests(self) -> int:
        return len(self.server.requests)


class AnthropicScripted:
    def __init__(self, fake: FakeAnthropic) -> None:
        self.fake = fake

    def generator(self, bounds: Bounds, *, max_retries: int = 0) -> ModelGenerator[Any]:
        return AnthropicGenerator(
            self.fake.client(timeout=60, max_retries=max_retries), "claude-haiku-4-5", bounds=bounds
        )

    def script(
        self,
        *,
        first_token_s: float = 0.0,
        gap_s: float = STEADY,
        stall_after: int | None = None,
        endless: bool = False,
    ) -> None:
        self.fake.reply(
            ANSWER_TOOL,
            ANSWER,
            delay_s=first_token_s,
            delta_delay_s=gap_s,
            delta_chars=4,
            stall_after=stall_after,
            endless=endless,
        )

    def fail_first(self, status: int) -> None:
        self.fake.fail(status)

    @property
    def requests(self) -> int:
        return len(self.fake.requests)


@pytest_asyncio.fixture(params=["openai", "anthropic"], loop_scope="session")
async def scripted(request: pytest.FixtureRequest) -> AsyncIterator[Scripted]:
    if request.param == "openai":
        server = ScriptedServer()
        url = await server.start()
        try:
            yield OpenAIScripted(server, url)
        finally:
            await server.close()
    else:
        with FakeAnthropic() as fake:
            yield AnthropicScripted(fake)


def bounds(**changes: float) -> Bounds:
    return Bounds(**({"first_token_s": 0.3, "prompt_tokens_per_s": 1e6, "gap_s": GAP, "ceiling_s": 30.0} | changes))


async def test_a_call_slow_to_its_first_token_but_steady_succeeds(scripted: Scripted) -> None:
    scripted.script(first_token_s=1.0)
    # The floor alone (0.3 s) is shorter than the wait: the prompt's size at the server's pace pays for it.
    slow_reader = bounds(prompt_tokens_per_s=500)
    told: list[Progress] = []
    token = PROGRESS.set(told.append)
    try:
        generation = await scripted.generator(slow_reader).generate(QUESTION, [PASSAGE])
    finally:
        PROGRESS.reset(token)
    assert generation.answer == ANSWER["answer"] and generation.used_passage_ids == [PASSAGE.id]
    # While it wrote, the stage and its tokens so far, counting up; never the text.
    assert told and {p.stage for p in told} == {"generation"}
    # First the model reading the prompt (no tokens yet), then each token it writes.
    assert told[0].tokens == 0 and told[-1].tokens >= 1
    assert [p.tokens for p in told] == sorted({p.tokens for p in told})
    assert all(set(msgspec_fields(p)) == {"stage", "tokens", "elapsed_s"} for p in told)
    assert scripted.requests == 1


async def test_the_same_wait_for_a_prompt_the_server_reads_fast_is_a_first_token_timeout(scripted: Scripted) -> None:
    scripted.script(first_token_s=1.0)
    with pytest.raises(ModelError) as info:
        await scripted.generator(bounds()).generate(QUESTION, [PASSAGE])
    assert info.value.kind == "timeout" and info.value.usage is None
    assert "generation: " in str(info.value) and "did not answer in time: no first token within" in str(info.value)


async def test_a_call_that_stalls_mid_answer_times_out_on_the_gap(scripted: Scripted) -> None:
    scripted.script(stall_after=3)
    with pytest.raises(ModelError) as info:
        await scripted.generator(bounds(gap_s=0.3)).generate(QUESTION, [PASSAGE])
    message = str(info.value)
    assert (
        info.value.kind == "timeout" and "no token for 0.3 s, after" in message and "(the token-gap bound)" in message
    )
    # What it wrote was paid for: an estimate, since the server counts only at the end.
    assert info.value.usage is not None and info.value.usage.output_tokens >= 3


async def test_a_call_that_never_stops_hits_the_ceiling(scripted: Scripted) -> None:
    scripted.script(endless=True)
    with pytest.raises(ModelError) as info:
        await scripted.generator(bounds(ceiling_s=1.0)).generate(QUESTION, [PASSAGE])
    message = str(info.value)
    assert info.value.kind == "timeout" and "still writing after 1 s" in message and "(the ceiling)" in message


async def test_a_call_that_made_progress_is_not_retried(scripted: Scripted) -> None:
    scripted.script(stall_after=2)
    with pytest.raises(ModelError, match="token-gap"):
        await scripted.generator(bounds(gap_s=0.3), max_retries=2).generate(QUESTION, [PASSAGE])
    assert scripted.requests == 1


async def test_a_call_that_failed_before_any_token_is_retried(scripted: Scripted) -> None:
    scripted.fail_first(503)
    scripted.script()
    generation = await scripted.generator(bounds(), max_retries=1).generate(QUESTION, [PASSAGE])
    assert generation.answer == ANSWER["answer"]
    assert scripted.requests == 2


def msgspec_fields(progress: Progress) -> tuple[str, ...]:
    return progress.__struct_fields__


def test_the_first_token_bound_grows_with_the_prompt_and_a_slower_measured_pace() -> None:
    b = Bounds(first_token_s=10, prompt_tokens_per_s=100, gap_s=5, ceiling_s=300)
    pace = Pace(b.prompt_tokens_per_s)
    assert first_token_s(b, pace, 0) == 10
    assert first_token_s(b, pace, 1000) == pytest.approx(10 + 2 * 1000 / 100)
    # A server measured faster than configured is not trusted to stay so (a cached prompt looks fast)...
    pace.observe(1000, 1.0)
    assert pace.tokens_per_s == 100
    # ...one measured slower is: the next prompt gets the longer wait.
    pace.observe(1000, 100.0)
    assert pace.tokens_per_s < 100 and first_token_s(b, pace, 1000) > 30
    # Never past the ceiling.
    assert first_token_s(b, Pace(0.001), 1000) == 300
