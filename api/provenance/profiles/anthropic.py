"""The `anthropic` profile's model calls: screening, generation, and the claims with the model's verdicts.

Every call forces one tool (`tool_choice={"type": "tool", ...}`) so the reply is structured JSON the
SDK has already parsed; the tool input is then validated with msgspec, so a reply of the wrong shape
fails as a `ModelError` here rather than as a KeyError somewhere in the pipeline. What each port asks and
how its reply is read are `profiles.base`, shared with the openai profile: this module is the call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import anthropic
from anthropic import AsyncAnthropic
from anthropic.lib.streaming import AsyncMessageStream
from anthropic.types import Message, ToolChoiceToolParam, ToolParam, ToolUseBlock

from provenance import metrics
from provenance.claims import LocalVerifier, build_verifier
from provenance.errors import ModelError, ModelOutputError
from provenance.inference.embedder import Embedder
from provenance.inference.sdk import CHARS_PER_TOKEN_ESTIMATE, SdkErrors, sdk_failures
from provenance.inference.streamed_calls import Pace, Watch, estimated_tokens
from provenance.ports import Profile, ScoredPassage, Usage
from provenance.profiles.base import (
    ModelCalls,
    ModelCondenser,
    ModelDecomposeAndVerify,
    ModelGenerator,
    ModelPort,
    ModelScreener,
)
from provenance.profiles.local import SentenceDecomposer
from provenance.profiles.outputs import Tool, call_name
from provenance.settings import Bounds, Settings

VERIFIER_NAME = "anthropic-entailment"
# How much longer than a call's ceiling the SDK's own timeout is: never the bound that ends a call.
SDK_TIMEOUT_MARGIN_S = 10.0


def make_client(settings: Settings) -> AsyncAnthropic:
    """One client per process: it owns the connection pool, so the profile's classes share it."""
    if not settings.anthropic.api_key:
        raise ModelError("the anthropic profile needs ANTHROPIC_API_KEY")
    return AsyncAnthropic(
        api_key=settings.anthropic.api_key,
        # None lets the SDK use its default endpoint (or ANTHROPIC_BASE_URL, which it reads itself).
        base_url=settings.anthropic.base_url or None,
        # The calls' own bounds (`streamed_calls`) end a call first; the SDK's timeout only backs them up.
        timeout=settings.anthropic.timeout_s + SDK_TIMEOUT_MARGIN_S,
        max_retries=settings.anthropic.max_retries,
    )


# --- the call --------------------------------------------------------------------------------------


def _usage(model: str, response: Message) -> Usage:
    u = response.usage
    # Cache tokens are billed too; counting them as input over-reports slightly, which errs toward the cap.
    cached = (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
    return Usage(model=model, input_tokens=u.input_tokens + cached, output_tokens=u.output_tokens)


@functools.cache
def tool_param(tool: Tool) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.schema}


# The SDK's failures, and what its messages call the other end.
SDK_ERRORS = SdkErrors(
    anthropic.APITimeoutError, anthropic.APIStatusError, anthropic.APIConnectionError, anthropic.AnthropicError
)
SERVER = "model API"


async def call_tool(
    client: AsyncAnthropic,
    *,
    model: str,
    system: str,
    user: str,
    tool: ToolParam,
    max_tokens: int,
    what: str,
    bounds: Bounds,
    pace: Pace,
) -> tuple[dict[str, object], Usage]:
    """One Messages call forced to `tool`, streamed under `bounds` (`provenance.inference.streamed_calls`); returns the
    tool input and the usage. Failures → ModelError."""
    name = tool["name"]
    choice: ToolChoiceToolParam = {"type": "tool", "name": name}
    call = call_name(what)
    # One call as the pipeline sees it; the SDK's own retries within it are not counted apart.
    metrics.model_call(call)
    prompt_tokens = estimated_tokens(system + user, CHARS_PER_TOKEN_ESTIMATE)
    watch = Watch(bounds, pace, model=model, prompt_tokens=prompt_tokens, what=what, call=call, server=SERVER)
    with sdk_failures(SDK_ERRORS, what=what, call=call, server=SERVER, watch=watch):
        manager = client.messages.stream(
            model=model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": user}],
            tools=[tool],
            tool_choice=choice,
        )
        # Entering the manager sends the request: the first token's bound starts with it.
        stream = await watch.opened(manager.__aenter__())
        try:
            async for _ in watch.chunks(stream, _tokens):
                pass
            response = await _final(stream)
        finally:
            await stream.close()
    return _tool_input(response, name, model, what, call)


def _tool_input(
    response: Message | None, name: str, model: str, what: str, call: str
) -> tuple[dict[str, object], Usage]:
    """The input a finished response gave the tool `name`, with its usage; a response that gave none is a
    ModelError saying why."""
    if response is None:
        raise ModelError(f"{what}: the {SERVER} sent a malformed response", call=call, kind="malformed")
    try:
        usage = _usage(model, response)
        content = list(response.content)
    except (AttributeError, TypeError) as exc:
        # Without strict validation the SDK builds its models from whatever JSON arrived.
        raise ModelError(f"{what}: the {SERVER} sent a malformed response", call=call, kind="malformed") from exc
    if response.stop_reason == "max_tokens":
        cut_off = f"{what}: the model's output was cut off at max_tokens"
        # The SDK parses a streamed tool input as it comes, so a cut-off one is the object as far as it got.
        partial = next(
            (dict(b.input) for b in content if isinstance(b, ToolUseBlock) and isinstance(b.input, dict)), None
        )
        raise ModelOutputError(cut_off, usage, call=call, kind="cut_off", partial=partial)
    for block in content:
        if isinstance(block, ToolUseBlock) and block.name == name and isinstance(block.input, dict):
            return dict(block.input), usage
    raise ModelOutputError(
        f"{what}: the model did not call {name} (stop_reason={response.stop_reason})",
        usage,
        call=call,
        kind="no_tool_call",
    )


async def _final(stream: AsyncMessageStream[Any]) -> Message | None:
    """The message the stream built, or None when no message began (a body that wasn't a message stream)."""
    try:
        message: Message | None = await stream.get_final_message()
    except AssertionError:  # the SDK asserts a message began
        return None
    return message


# A streamed delta's tokens, estimated from its characters (the API counts them only at the end).
DELTA_CHARS_PER_TOKEN = 4


def _tokens(event: object) -> int:
    if getattr(event, "type", None) != "content_block_delta":
        return 0
    delta = getattr(event, "delta", None)
    text = getattr(delta, "partial_json", None) or getattr(delta, "text", None) or ""
    return estimated_tokens(text, DELTA_CHARS_PER_TOKEN)


# --- the ports -------------------------------------------------------------------------------------


class _AnthropicPort(ModelPort[AsyncAnthropic]):
    """A model port whose one way to call the model is a forced tool call."""

    async def _call(
        self, *, system: str, user: str, tool: Tool, passages: Sequence[ScoredPassage], what: str
    ) -> tuple[dict[str, object], Usage]:
        return await call_tool(
            self.client,
            model=self.model,
            system=system,
            user=user,
            tool=tool_param(tool),
            max_tokens=self.max_output_tokens,
            what=what,
            bounds=self.bounds,
            pace=self.pace,
        )


class AnthropicScreener(_AnthropicPort, ModelScreener[AsyncAnthropic]):
    name = "anthropic-screener"


class AnthropicCondenser(_AnthropicPort, ModelCondenser[AsyncAnthropic]):
    name = "anthropic-condenser"


class AnthropicGenerator(_AnthropicPort, ModelGenerator[AsyncAnthropic]):
    name = "anthropic-generator"


class AnthropicDecomposeAndVerify(_AnthropicPort, ModelDecomposeAndVerify[AsyncAnthropic]):
    name = VERIFIER_NAME


def build_anthropic_models(settings: Settings, client: AsyncAnthropic | None = None) -> ModelCalls:
    """Claude screens, answers, and gives the claims with its verdicts, sharing one client."""
    client = client or make_client(settings)
    model = settings.anthropic.model
    bounds = settings.anthropic.bounds
    pace = Pace(bounds.prompt_tokens_per_s)
    claims = (
        AnthropicDecomposeAndVerify(client, model, bounds=bounds, pace=pace)
        if settings.claims_from == "model"
        else None
    )
    return ModelCalls(
        screener=AnthropicScreener(client, model, bounds=bounds, pace=pace),
        generator=AnthropicGenerator(client, model, bounds=bounds, pace=pace),
        decompose_and_verify=claims,
        condenser=AnthropicCondenser(client, model, bounds=bounds, pace=pace),
    )


def build_anthropic_profile(
    settings: Settings,
    embedder: Embedder,
    client: AsyncAnthropic | None = None,
    *,
    local: LocalVerifier | None = None,
) -> Profile:
    """The paid profile: Claude screens, answers, and gives the claims with its own verdicts in one call. The
    local verifier judges every claim's support too, and a claim is supported only as far as both agree;
    whether it answers the question is the model's verdict, under the local vetoes."""
    models = build_anthropic_models(settings, client)
    assert models.screener is not None  # Claude screens: build_anthropic_models gives it one
    local = local or build_verifier(settings, embedder)
    return Profile(
        name="anthropic",
        screener=models.screener,
        generator=models.generator,
        verifier=local.verifier,
        on_corpus=local.on_corpus,
        worst_case=models.worst_case,
        # Claude screens the question alone, alongside retrieval.
        screener_reads_passages=False,
        cache_tag="|".join(t for t in (settings.anthropic.model, local.cache_tag) if t),
        # The local verifier runs after the combined model call, on the critical path: the passages' sentence
        # vectors come from the store (computed at ingest), never embedded then.
        sentence_vectors=local.sentence_vectors,
        word_vectors=local.word_vectors,
        # Claims and the model's verdicts in one call: three sequential round trips per answer. With
        # CLAIMS_FROM=sentences, the answer's sentences, judged on this machine alone.
        decompose_and_verify=models.decompose_and_verify,
        decomposer=SentenceDecomposer() if models.decompose_and_verify is None else None,
        passage_tokens=settings.anthropic.passage_tokens,
        condenser=models.condenser,
    )
